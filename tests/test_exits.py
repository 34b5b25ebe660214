"""`cleanrl_utils.console.errors`: the exit codes, defined once, and what Ctrl-C does; every
`os._exit` of the package listed in its table; no alias of an exit code, no `raise SystemExit`
but the entry guard's."""

from __future__ import annotations

import ast
import os
import re
import signal

import pytest
from scripts_testing import REPO_ROOT

from cleanrl_utils.console import errors, signals


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
    assert found and all(f.startswith("cleanrl_utils/console/errors.py:") for f in found), found


def test_exit_codes_are_imported_from_exits_only():
    """An exit code has one home: every module that names one imports it from
    `cleanrl_utils.console.errors`, none through another module that imported it (no re-exports)."""
    codes = {
        name
        for name, value in vars(errors).items()
        if name.isupper() and isinstance(value, int) and not isinstance(value, bool)
    }
    found = []
    for folder in ("cleanrl_utils", "cleanrl", "benchmark", "tests"):
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if (
                    isinstance(node, ast.ImportFrom)
                    and node.module != "cleanrl_utils.console.errors"
                ):
                    names = {alias.name for alias in node.names} & codes
                    found += [f"{path.relative_to(REPO_ROOT)}:{node.lineno}: {n}" for n in names]
    assert codes >= {"FAILED", "USAGE_ERROR", "DISK_EXIT", "CHECKPOINT_EXIT", "INTERRUPTED"}
    assert found == []


# ---------------------------------------------------------------------------------------------
# Every `os._exit` is listed in the table of `console/errors.py`'s docstring, and nothing else ends
# the process: no alias of an exit code, no `raise SystemExit` but the entry guard's


FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def holders(tree: ast.AST):
    """Each node of `tree`, with the qualified name of the function or class that holds it
    (`Class.method`, `function.inner`; `<module>` at the top level) and whether that is a
    function."""
    pending = [(tree, "<module>", False)]
    while pending:
        node, holder, in_function = pending.pop()
        yield node, holder, in_function
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (*FUNCTIONS, ast.ClassDef)):
                name = child.name if holder == "<module>" else f"{holder}.{child.name}"
                pending.append((child, name, isinstance(child, FUNCTIONS)))
            else:
                pending.append((child, holder, in_function))


def exit_calls(source: str) -> list[tuple[str, int, ast.Call]]:
    """The `os._exit(...)` calls of a module: the name of the function that holds each (the
    innermost: a method's own name, as the table names it), its line, the call."""
    found = []
    for node, holder, _ in holders(ast.parse(source)):
        if isinstance(node, ast.Call) and (
            (
                isinstance(node.func, ast.Attribute)
                and node.func.attr == "_exit"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id in ("os", "posix")
            )
            or (isinstance(node.func, ast.Name) and node.func.id == "_exit")  # `from os import`
        ):
            found.append((holder.rpartition(".")[2], node.lineno, node))
    return sorted(found, key=lambda call: call[1])


def exit_table(doc: str) -> dict[tuple[str, str], set[int]]:
    """The rows of the table of `os._exit` calls: (module path, function) -> the exit codes."""
    rows = {}
    for line in doc.splitlines():
        if line.startswith("| `"):
            where, code = line.strip("|").split("|")[:2]
            path, *functions = re.findall(r"`([^`]+)`", where)
            for function in functions:
                rows[path, function] = {int(c) for c in re.findall(r"\d+", code)}
    return rows


def exit_table_problems(modules: dict[str, str], table: dict[tuple[str, str], set[int]]):
    """What breaks the rule: an `os._exit` in a function the table does not list, a code named
    at the call (`os._exit(FAILED)`) that its row does not give, a row that holds no call."""
    problems, found = [], set()
    for path, source in sorted(modules.items()):
        for function, line, call in exit_calls(source):
            found.add((path, function))
            if (path, function) not in table:
                problems.append(f"{path}:{line}: os._exit in {function}, not in the table")
                continue
            named = call.args[0].id if call.args and isinstance(call.args[0], ast.Name) else None
            code = getattr(errors, named, None) if named else None
            if isinstance(code, int) and code not in table[path, function]:
                problems.append(f"{path}:{line}: {function} exits with {code}, not in its row")
    problems += [
        f"{p} {f}: listed, and it holds no os._exit"
        for p, f in sorted(table)
        if (p, f) not in found
    ]
    return problems


PACKAGE = REPO_ROOT / "cleanrl_utils"


def test_every_os_exit_of_the_package_is_listed_in_the_table_of_cli_errors():
    modules = {p.relative_to(PACKAGE).as_posix(): p.read_text() for p in PACKAGE.rglob("*.py")}
    table = exit_table(errors.__doc__)
    assert len(table) >= 8 and ("distributed/lost_ranks.py", "exit_lost") in table, table
    assert exit_table_problems(modules, table) == []


def test_the_os_exit_check_names_what_breaks_the_rule():
    table = exit_table(
        "| where | code | why |\n|---|---|---|\n"
        "| `a/b.py` `listed`, `gone` | 1, 2 | why |\n| `c.py` `renamed` | 2 | why |\n"
    )
    assert table == {
        ("a/b.py", "listed"): {1, 2},
        ("a/b.py", "gone"): {1, 2},
        ("c.py", "renamed"): {2},
    }
    modules = {
        "a/b.py": (
            "import os\nfrom cleanrl_utils.console.errors import FAILED, INTERRUPTED\n\n"
            "def listed(code):\n    os._exit(code)\n    os._exit(FAILED)\n\n"
            "class Ranks:\n    def other(self):\n        os._exit(INTERRUPTED)\n"
        ),
        "c.py": "from os import _exit\n\ndef new_name():\n    _exit(2)\n",
    }
    assert exit_table_problems(modules, table) == [
        "a/b.py:10: os._exit in other, not in the table",
        "c.py:4: os._exit in new_name, not in the table",
        "a/b.py gone: listed, and it holds no os._exit",
        "c.py renamed: listed, and it holds no os._exit",
    ]
    modules["a/b.py"] = modules["a/b.py"].replace("os._exit(FAILED)", "os._exit(INTERRUPTED)")
    assert "a/b.py:6: listed exits with 130, not in its row" in exit_table_problems(modules, table)


EXIT_CODE_NAMES = {
    name
    for name, value in vars(errors).items()
    if name.isupper() and isinstance(value, int) and not isinstance(value, bool)
}
# the `raise SystemExit` that stay, with why: (module, the function that holds it) -> why
SYSTEM_EXITS = {
    ("cleanrl_utils/console/errors.py", "entry_point.__exit__"): (
        "the entry guard: the one place that turns a RunError or Ctrl-C into an exit"
    ),
}


def names_exit_code(node: ast.AST) -> bool:
    """`FAILED`, `errors.FAILED`: an exit code of `console/errors.py`, by its name."""
    name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)
    return name in EXIT_CODE_NAMES


def raises_system_exit(node: ast.AST) -> bool:
    """`raise SystemExit`, `raise SystemExit(code)`, `raise builtins.SystemExit(...)`."""
    if not isinstance(node, ast.Raise) or node.exc is None:
        return False
    raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
    return (raised.id if isinstance(raised, ast.Name) else getattr(raised, "attr", None)) == (
        "SystemExit"
    )


def alias_and_raise_problems(path: str, source: str) -> list[str]:
    """An exit code given another name (`LOST_RANK_EXIT = FAILED` in a module or a class, an
    all-caps name in a function, `import FAILED as LOST`), and a `raise SystemExit` outside
    `SYSTEM_EXITS`. A local variable that holds a code (`line, code = ..., FAILED`) is no
    alias, nor is a collection of codes (`(CHECKPOINT_EXIT, INTERRUPTED)`)."""
    problems = []
    for node, holder, in_function in holders(ast.parse(source)):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            pairs = []
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                    pairs += zip(target.elts, node.value.elts)
                else:
                    pairs.append((target, node.value))
            for target, value in pairs:
                name = target.id if isinstance(target, ast.Name) else getattr(target, "attr", "")
                if names_exit_code(value) and (not in_function or name.isupper()):
                    problems.append((node.lineno, f"an alias of an exit code: {name}"))
        elif isinstance(node, ast.ImportFrom):
            problems += [
                (node.lineno, f"{alias.name} imported as {alias.asname}")
                for alias in node.names
                if alias.name in EXIT_CODE_NAMES and alias.asname
            ]
        elif raises_system_exit(node) and (path, holder) not in SYSTEM_EXITS:
            problems.append((node.lineno, f"raise SystemExit in {holder}"))
    return [f"{path}:{line}: {problem}" for line, problem in sorted(problems)]


def test_no_module_gives_an_exit_code_another_name_or_raises_system_exit():
    problems, raises = [], set()
    for folder in ("cleanrl_utils", "benchmark", "cleanrl"):
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            name, source = path.relative_to(REPO_ROOT).as_posix(), path.read_text()
            problems += alias_and_raise_problems(name, source)
            raises |= {
                (name, holder)
                for node, holder, _ in holders(ast.parse(source))
                if raises_system_exit(node)
            }
    assert problems == []
    assert raises == set(SYSTEM_EXITS)  # (the check sees the entry guard's, and they are kept)


def test_the_alias_check_names_what_breaks_the_rule():
    source = (
        "from cleanrl_utils.console import errors\n"
        "from cleanrl_utils.console.errors import FAILED, USAGE_ERROR as BAD_INPUT\n\n"
        "LOST_RANK_EXIT = FAILED\n"
        "STOP_CODES: tuple = (errors.CHECKPOINT_EXIT, errors.INTERRUPTED)\n"
        "A, B = FAILED, 1\n\n"
        "class Ranks:\n    CODE = errors.FAILED\n\n    def end(self):\n"
        "        line, code = 'lost', FAILED\n        MINE = FAILED\n"
        "        raise SystemExit(code)\n\n"
        "def main():\n    raise SystemExit\n"
    )
    assert alias_and_raise_problems("m.py", source) == [
        "m.py:2: USAGE_ERROR imported as BAD_INPUT",
        "m.py:4: an alias of an exit code: LOST_RANK_EXIT",
        "m.py:6: an alias of an exit code: A",
        "m.py:9: an alias of an exit code: CODE",
        "m.py:13: an alias of an exit code: MINE",
        "m.py:14: raise SystemExit in Ranks.end",
        "m.py:17: raise SystemExit in main",
    ]
