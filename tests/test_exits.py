"""`cleanrl_utils.cli.errors`: the exit codes, defined once, and what Ctrl-C does."""

from __future__ import annotations

import ast
import os
import signal

import pytest
from scripts_testing import REPO_ROOT

from cleanrl_utils.cli import errors, signals


def test_ctrl_c_in_an_entry_point_is_one_line_and_exit_code_130(capsys):
    @errors.entry_point()
    def main():
        raise KeyboardInterrupt

    with pytest.raises(SystemExit) as stopped:
        main()
    assert stopped.value.code == errors.INTERRUPTED == 130
    assert stopped.value.__suppress_context__  # no traceback of the KeyboardInterrupt
    assert capsys.readouterr().err == "interrupted (Ctrl-C)\n"
    with pytest.raises(SystemExit), errors.entry_point("interrupted (Ctrl-C): nothing written"):
        raise KeyboardInterrupt
    assert capsys.readouterr().err == "interrupted (Ctrl-C): nothing written\n"
    with pytest.raises(ValueError), errors.entry_point():  # other errors go on as they were
        raise ValueError


def test_stop_request_sets_a_flag_and_gives_the_handlers_back():
    before = {s: signal.getsignal(s) for s in signals.StopRequest.SIGNALS}
    with signals.StopRequest() as stop:
        assert not stop.requested
        os.kill(os.getpid(), signal.SIGINT)  # no KeyboardInterrupt: only the flag
        signal.raise_signal(signal.SIGTERM)
        assert stop.requested
    assert {s: signal.getsignal(s) for s in signals.StopRequest.SIGNALS} == before


def test_stop_request_with_a_handler_gives_back_every_handler_it_replaced():
    """`Run`'s use: its own handler for SIGTERM, SIGUSR1 and Ctrl-C, Ctrl-C's replaced inside the
    block (a second Ctrl-C); the handlers from before the block are the ones given back."""
    got = []
    before = {s: signal.getsignal(s) for s in signals.STOP_SIGNALS}
    with signals.StopRequest(
        signals.STOP_SIGNALS, lambda signum, frame: got.append(signum)
    ) as stop:
        signal.raise_signal(signal.SIGUSR1)
        stop.replace(signal.SIGINT, lambda signum, frame: got.append(-signum))
        signal.raise_signal(signal.SIGINT)
    assert got == [signal.SIGUSR1, -signal.SIGINT] and not stop.requested
    assert {s: signal.getsignal(s) for s in signals.STOP_SIGNALS} == before


EXIT_CODES = {errors.FAILED, errors.USAGE_ERROR, errors.CHECKPOINT_EXIT, errors.INTERRUPTED}


def test_each_exit_code_is_defined_once_in_cleanrl_utils():
    """`NAME = 2`, `NAME = 75`, `NAME = 130` where NAME speaks of an exit: only in errors.py."""
    found = []
    for path in sorted((REPO_ROOT / "cleanrl_utils").rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Constant)
                and node.value.value in EXIT_CODES | {errors.CANNOT_START}
                and any(
                    word in target.id
                    for target in node.targets
                    if isinstance(target, ast.Name)
                    for word in ("EXIT", "ERROR", "INTERRUPT", "FAIL", "START")
                )
            ):
                found.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno}")
    assert found and all(f.startswith("cleanrl_utils/cli/errors.py:") for f in found), found


def test_exit_codes_are_imported_from_exits_only():
    """An exit code has one home: every module that names one imports it from
    `cleanrl_utils.cli.errors`, none through another module that imported it (no re-exports)."""
    codes = {
        name
        for name, value in vars(errors).items()
        if name.isupper() and isinstance(value, int) and not isinstance(value, bool)
    }
    found = []
    for folder in ("cleanrl_utils", "cleanrl", "benchmark", "tests"):
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module != "cleanrl_utils.cli.errors":
                    names = {alias.name for alias in node.names} & codes
                    found += [f"{path.relative_to(REPO_ROOT)}:{node.lineno}: {n}" for n in names]
    assert codes >= {"FAILED", "USAGE_ERROR", "DISK_EXIT", "CHECKPOINT_EXIT", "INTERRUPTED"}
    assert found == []
