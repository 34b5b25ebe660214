"""Helpers for the tests that use `cleanrl_utils.run.Run` in-process."""

from __future__ import annotations

import contextlib

from cleanrl_utils.exits import RunError


@contextlib.contextmanager
def entry_point():
    """What a script's entry point does with a `RunError` (`cleanrl_utils.entry.run_error_hook`):
    its one line, then the process ends with its code (here: `SystemExit`)."""
    try:
        yield
    except RunError as exc:
        exc.say()
        raise SystemExit(exc.code) from None
