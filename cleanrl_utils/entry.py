"""Imported first by the scripts of `cleanrl/`, and only by entry points: it makes a missing
optional dependency one line naming the install command, not a traceback (`extras.install`, which
replaces `sys.excepthook`). The rest of `cleanrl_utils` changes no global state when imported; the
`python -m` tools call `extras.install()` in their `__main__`, since they import their optional
packages only where they use them.

A script run as a program (`python SCRIPT`, torchrun's `python -u SCRIPT`; not one imported for
its definitions, by a test or a tool) also handles its stop signals from here on
(`signals.record_stops`): a SIGTERM or Ctrl-C while it imports its libraries stops it at once with
one line and exit code 75 or 130 (nothing is written yet); once its run has begun, at the run's
next safe point. And its stdout and stderr can be lost without losing the run (`output.guard`):
a closed terminal, a `| tee` ended by Ctrl-C, a full disk or `2>&-` drop what is said there
(noted where it can be), and the run trains on or stops with its checkpoint.

The script's `if __name__ == "__main__":` block runs inside the entry guard, with its `Run`:

    with entry_point(), Run(parse_args(Args), __file__) as run:

where a `RunError` (`cleanrl_utils.run` and the checks raise it: bad input, a checkpoint it cannot
use, a full disk, a stop before training) becomes its one line and its exit code, no traceback
(`cleanrl_utils.console.errors.entry_point`, the guard of every entry point)."""

import os
import sys

from cleanrl_utils.console import extras, output, signals

extras.install()


def run_as_a_program() -> bool:
    """Whether the program Python runs is the script that imports this module: `__main__` is a
    file named on the command line (`python SCRIPT`, torchrun's `python -u SCRIPT`; not a `-m`
    tool, a notebook or pytest), and it imports this module itself, no other module being
    imported around it (importlib marks each module it is executing with
    `__spec__._initializing`), so a program that imports a script for its
    definitions is not one."""
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    started = {os.path.realpath(a) for a in sys.orig_argv[1:] if a.endswith(".py")}
    if main is None or os.path.realpath(main) not in started:
        return False
    return not [
        name
        for name, module in list(sys.modules.items())
        if name != __name__ and getattr(getattr(module, "__spec__", None), "_initializing", False)
    ]


if run_as_a_program():
    output.guard()
    signals.record_stops()
