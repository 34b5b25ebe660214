"""Imported first by the scripts of `cleanrl/`, and only by entry points: it makes a missing
optional dependency one line naming the install command, not a traceback (`extras.install`, which
replaces `sys.excepthook`). The rest of `cleanrl_utils` changes no global state when imported; the
`python -m` tools call `extras.install()` in their `__main__`, since they import their optional
packages only where they use them.

A script run as a program (not one imported for its definitions, by a test or a tool) also
handles its stop signals from here on (`exits.record_stops`): a SIGTERM or Ctrl-C while it imports
its libraries stops it at once with one line and exit code 75 or 130 (nothing is written yet);
once its run has begun, at the run's next safe point. And its stdout and stderr can be lost
without losing the run (`output.guard`): a closed terminal, a `| tee` ended by Ctrl-C, a full
disk or `2>&-` drop what is said there (noted where it can be), and the run trains on or stops
with its checkpoint.

A `RunError` that reaches the top of a script (`cleanrl_utils.run` raises it instead of exiting:
bad input, a checkpoint it cannot use, a stop before training) is its one line and its exit code,
no traceback (`run_error_hook`)."""

import atexit
import os
import sys

from cleanrl_utils import exits, extras, output

extras.install()


def run_error_hook(exc_type, exc, traceback, previous=sys.excepthook) -> None:
    """`sys.excepthook` of a script: a `RunError` is said in one line and ends the process with
    its code, after what a normal exit runs (the `atexit` functions: a rank that never joined
    the others tells them); anything else goes to the hook before it."""
    if not isinstance(exc, exits.RunError):
        return previous(exc_type, exc, traceback)
    exc.say()
    atexit._run_exitfuncs()
    output.flush()
    os._exit(exc.code)  # (an excepthook cannot choose the exit code otherwise)


if sys.excepthook in (sys.__excepthook__, extras.missing_extra_hook):
    sys.excepthook = run_error_hook


def imported_by_a_program() -> bool:
    """Whether the module importing this one is the program: the file Python was started with
    (`python SCRIPT`, torchrun's `python -u SCRIPT`), not a module that a test or a tool imports
    or runs with `runpy` (the frames between are the import machinery's)."""
    frame = sys._getframe(2)  # (1: this module's own code)
    while frame is not None and frame.f_code.co_filename.startswith("<frozen importlib"):
        frame = frame.f_back
    if frame is None or frame.f_globals.get("__name__") != "__main__":
        return False
    started = {os.path.realpath(a) for a in sys.orig_argv[1:] if a.endswith(".py")}
    return os.path.realpath(frame.f_code.co_filename) in started


if imported_by_a_program():
    output.guard()
    exits.record_stops()
