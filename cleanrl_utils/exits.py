"""How the project's commands end: one constant per exit code, and what Ctrl-C does.

The lowest floor of `cleanrl_utils`: it imports nothing from the package, and every module that
exits with one of these codes or handles Ctrl-C takes them from here.

- `stops_on_ctrl_c` (or `CtrlCExit(message)`, for another message): Ctrl-C in a command's entry
  point, or in a `with` block, ends the process with one line and exit code 130, no traceback.
- `StopRequest`: Ctrl-C, SIGTERM and SIGHUP set a flag instead, for a loop that must stop what it
  started before it ends (the benchmark launcher's pool and `--slurm-wait`).

- `record_stops`: from a script's first import (`cleanrl_utils.entry`) until its `Run` takes the
  handlers over, SIGTERM, SIGUSR1 and Ctrl-C end the process at once (before the run exists) or
  are recorded (`early_stop`) and end it at the run's next safe point.

A training run's own stop signals (finish the iteration, write a checkpoint) are `Run`'s
(`cleanrl_utils.run`); they end with `CHECKPOINT_EXIT` or `INTERRUPTED`.
"""

from __future__ import annotations

import contextlib
import errno
import os
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


STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT)
_early_stops: list[int] = []  # what `record_stops` received once a run held them, in order
_held = False  # whether a run holds the stops (`hold_stops`): before, they end the process


def signal_name(signum: int) -> str:
    return "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name


def record_stops() -> None:
    """SIGTERM, SIGUSR1 and Ctrl-C from now on: while a script imports torch, EnvPool and JAX
    (nothing is written yet), each ends the process at once from the handler, with one line and
    exit code 75 (SIGTERM, SIGUSR1: requeued by the SLURM templates, where SIGTERM's default
    would end it with 143) or 130: a KeyboardInterrupt raised where it lands could be swallowed
    (JAX's gc callback: "Exception ignored in"), and the run would train on. Once a run holds
    them (`hold_stops`) they are recorded, and the run stops at its next safe point
    (`early_stop`); a second Ctrl-C stops at once. A signal ignored (SIG_IGN) stays ignored."""
    for signum in STOP_SIGNALS:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, _record_stop)


def hold_stops() -> None:
    """A run has begun: the stops `record_stops` receives are recorded, no longer acted on."""
    global _held
    _held = True


def _record_stop(signum, frame) -> None:
    if not _held:
        code = INTERRUPTED if signum == signal.SIGINT else CHECKPOINT_EXIT
        line = f"received {signal_name(signum)} before training began: stopping; nothing was "
        os.write(2, f"{line}written (exit code {code})\n".encode())
        os._exit(code)
    if signum == signal.SIGINT and signal.SIGINT in _early_stops:  # the process ends by it
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.write(2, b"received Ctrl-C again: stopping now\n")
        os.kill(os.getpid(), signal.SIGINT)
    _early_stops.append(signum)


def early_stop() -> int | None:
    """The first stop signal `record_stops` received while a run held them, or None."""
    return _early_stops[0] if _early_stops else None
