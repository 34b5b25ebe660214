"""How the project's commands end: one constant per exit code, and what Ctrl-C does.

The lowest floor of `cleanrl_utils`: it imports nothing from the package, and every module that
exits with one of these codes or handles Ctrl-C takes them from here.

- `stops_on_ctrl_c` (or `CtrlCExit(message)`, for another message): Ctrl-C in a command's entry
  point, or in a `with` block, ends the process with one line and exit code 130, no traceback.
- `StopRequest`: Ctrl-C, SIGTERM and SIGHUP set a flag instead, for a loop that must stop what it
  started before it ends (the benchmark launcher's pool and `--slurm-wait`).

A training run's own stop signals (finish the iteration, write a checkpoint) are `Run`'s
(`cleanrl_utils.run`); they end with `CHECKPOINT_EXIT` or `INTERRUPTED`.
"""

from __future__ import annotations

import contextlib
import errno
import signal
import sys

FAILED = 1  # the command ran and did not succeed (a failed run, a rejected submission, a download)
USAGE_ERROR = 2  # bad input: one `error:` line, before any work starts
DISK_EXIT = 74  # EX_IOERR: a write into the run folder failed (a full disk; not requeued)
CHECKPOINT_EXIT = 75  # EX_TEMPFAIL, "try again": SIGTERM, SIGUSR1 (the SLURM templates requeue)
CANNOT_START = 127  # what a shell reports for a program it cannot start
INTERRUPTED = 130  # what a shell reports for a process stopped by Ctrl-C


def cause(exc: OSError) -> str:
    """`no space left on device (ENOSPC)`: an OSError as a reader wants it."""
    name = errno.errorcode.get(exc.errno or 0)
    text = (exc.strerror or str(exc)).rstrip(".")
    text = text[:1].lower() + text[1:]
    return f"{text} ({name})" if name else text


class CtrlCExit(contextlib.ContextDecorator):
    """Ctrl-C (a `KeyboardInterrupt`) inside the decorated function or the `with` block ends the
    process with `message` on stderr and exit code 130 (what a shell reports for Ctrl-C), not a
    traceback."""

    def __init__(self, message: str = "interrupted (Ctrl-C)"):
        self.message = message

    def __enter__(self) -> CtrlCExit:
        return self

    def __exit__(self, exc_type, exc, traceback) -> None:
        if exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
            print(self.message, file=sys.stderr, flush=True)
            raise SystemExit(INTERRUPTED) from None


stops_on_ctrl_c = CtrlCExit()  # `@stops_on_ctrl_c` on a command's `main`


class StopRequest:
    """Ctrl-C (SIGINT), SIGTERM and SIGHUP (a closed terminal) set `requested` instead of raising
    wherever the program happens to be, so that nothing is started without being tracked. The
    handlers before it are back when the `with` block ends. Only the main thread may use it
    (Python runs signal handlers there)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __enter__(self) -> StopRequest:
        self.requested = False
        self.previous = {s: signal.signal(s, self._handle) for s in self.SIGNALS}
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum, frame) -> None:
        self.requested = True
