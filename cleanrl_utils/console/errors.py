"""How the project's commands end: the exit codes, the one error the package raises for the user
to read, and the one guard that turns it into an exit.

- The exit codes, one constant each; every module that ends with one imports it from here (no
  alias, no re-export: `tests/test_exits.py`).
- `RunError`: bad input, a checkpoint it cannot use, a full disk, a stop before training: its
  line and its exit code, as a value. `fail(message)` raises it. Library code raises it and
  never exits.
- `entry_point()`: the only place that turns errors into exits, used only by entry points, one
  spelling for all of them: `@entry_point()` on a tool's `main`, `with entry_point(), Run(...)`
  in a script's `if __name__ == "__main__":` block, `with entry_point("...")` for another
  Ctrl-C line. A `RunError` is its line and its exit code, Ctrl-C one line and exit code 130,
  no traceback.

The stop signals (`StopRequest`, and a script's stops before its run holds them) are
`cleanrl_utils.console.signals`'.

These ends cannot be raised up to an entry point, and end the process at once with `os._exit`
after their one line (`tests/test_exits.py` finds every call, by the module and the function
that holds it, and checks it is listed here):

| where | code | why not raised |
|---|---|---|
| `console/signals.py` `_record_stop` | 75, 130 | a stop signal while a script imports its libraries: an exception raised from a signal handler lands wherever the program happens to be, and a library's callback can swallow it (JAX's gc callback: "Exception ignored in") |
| `run/stops.py` `stop_after_training` | 75, 130 | a stop signal during the steps after training: the same, from the run's handler |
| `console/extras.py` `missing_extra_hook` | 2 | a missing optional package, said from `sys.excepthook`, which cannot choose the exit code |
| `distributed/torch_ranks.py` `_fail_together` | 1, 2 | ranks that found the same problem in one collective (2: their runs differ; 1: a message that is not one, minibatch permutations out of step): a clean exit can block on a peer that has already left |
| `distributed/jax_processes.py` `_fail_together` | 1, 2 | the same for JAX's processes |
| `distributed/jax_processes.py` `_late` | 2 | a process that did not connect in time, from the watchdog's thread, while jaxlib holds the main one in `jax.distributed.initialize` |
| `distributed/lost_ranks.py` `say_and_exit` | 2 | a rank that waits in the rendezvous past CLEANRL_DIST_TIMEOUT_S, or for one that stopped before joining: from the watchdog's or the watcher's thread, while the main one waits in `init_process_group` |
| `distributed/lost_ranks.py` `exit_lost` | 1 | a rank lost in a collective: a clean exit would wait on the lost rank again |
"""

from __future__ import annotations

import contextlib
from typing import NoReturn

from cleanrl_utils.console.output import say

FAILED = 1  # the command ran and did not succeed (a failed run, a rejected submission, a download)
USAGE_ERROR = 2  # bad input: one `error:` line, before any work starts
DISK_EXIT = 74  # EX_IOERR: a write into the run folder failed (a full disk; not requeued)
CHECKPOINT_EXIT = 75  # EX_TEMPFAIL, "try again": SIGTERM, SIGUSR1 (the SLURM templates requeue)
CANNOT_START = 127  # what a shell reports for a program it cannot start
INTERRUPTED = 130  # what a shell reports for a process stopped by Ctrl-C


class RunError(Exception):
    """What the user reads of a command that cannot start or go on (bad input, a checkpoint it
    cannot use, a full disk, a stop before training, a run already finished): `line`, what to say
    (`error: {message}` unless given; empty: it has been said), and `code`, the exit code.
    Library code raises it instead of exiting; an entry point (`entry_point`) says the line (on
    stdout for code 0, else stderr) and exits with the code."""

    def __init__(self, message: str, code: int = USAGE_ERROR, line: str | None = None):
        super().__init__(message)
        self.message, self.code = message, code
        self.line = f"error: {message}" if line is None else line

    def say(self) -> None:
        if self.line:
            say(self.line, stdout=self.code == 0)


class entry_point(contextlib.ContextDecorator):  # noqa: N801 (used as a function, as contextlib's)
    """Around an entry point (`@entry_point()` on a command's `main`, or a `with` block): a
    `RunError` raised inside ends the process with its line and its exit code, Ctrl-C (a
    `KeyboardInterrupt`) with `ctrl_c` on stderr and exit code 130 (what a shell reports for
    Ctrl-C); no traceback. The one place where the package turns its errors into exits: library
    code raises, and only entry points use this."""

    def __init__(self, ctrl_c: str = "interrupted (Ctrl-C)"):
        self.ctrl_c = ctrl_c

    def __enter__(self) -> entry_point:
        return self

    def __exit__(self, exc_type, exc, traceback) -> None:
        if exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
            say(self.ctrl_c)
            raise SystemExit(INTERRUPTED) from None
        if exc_type is not None and issubclass(exc_type, RunError):
            exc.say()
            raise SystemExit(exc.code) from None


def fail(message: str, code: int = USAGE_ERROR) -> NoReturn:
    """Raises the `RunError` whose line is `error: message` and whose exit code is `code`: the
    entry point says the line, with no traceback, and exits with the code."""
    raise RunError(message, code)
