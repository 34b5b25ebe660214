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

The script's `if __name__ == "__main__":` block runs inside `point()`, with its `Run`:

    with entry.point(), Run(parse_args(Args), __file__) as run:

where a `RunError` (`cleanrl_utils.run` and the checks raise it: bad input, a checkpoint it cannot
use, a full disk, a stop before training) becomes its one line and its exit code, no traceback:
the scripts' one entry point helper (`exits.EntryPoint`)."""

import os
import sys

from cleanrl_utils.cli import errors as exits
from cleanrl_utils.cli import extras, output

extras.install()


def point() -> exits.EntryPoint:
    """Around a script's `if __name__ == "__main__":` block: a `RunError` raised in it ends the
    process with its line and its exit code; a Ctrl-C that reaches it (the run's own handlers
    turn Ctrl-C into a stop; this is for one before they hold it), one line and 130."""
    return exits.EntryPoint()


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
