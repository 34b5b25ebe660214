"""Rules of the test suite's own layout that code can check."""

from __future__ import annotations

import ast
import re

from scripts_testing import REPO_ROOT

# an import statement at the start of a line, or after a `;`, in a program held in a string (the
# code of a `python -c` process, a template to be formatted)
IMPORT_IN_TEXT = re.compile(
    r"(?:^|;)[ \t]*(?:from[ \t]+([\w.]+)[ \t]+import\b"
    r"|import[ \t]+([\w.]+(?:[ \t]+as[ \t]+\w+)?(?:[ \t]*,[ \t]*[\w.]+(?:[ \t]+as[ \t]+\w+)?)*))",
    re.M,
)


def imported_modules(source: str) -> list[str]:
    """The modules a Python source imports: its import statements (a function's too), its
    `__import__("name")` and `importlib.import_module("name")` calls, and the import statements
    of every program held in its strings."""
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", getattr(node.func, "attr", None))
            in ("__import__", "import_module")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names.append(node.args[0].value)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            for match in IMPORT_IN_TEXT.finditer(node.value):
                if match[1]:
                    names.append(match[1])
                else:
                    names += [part.split()[0] for part in match[2].split(",")]
    return names


def is_test_module(name: str) -> bool:
    """conftest.py or a test module: what no file under tests/ may import."""
    top = name.split(".")[0]
    return top == "conftest" or top.startswith("test_")


def test_imports_are_found_in_code_and_in_program_texts():
    # (the test module's name is filled in at run time: this file must pass its own rule)
    program = (
        "import os, sys\nsys.path.insert(0, {tests!r})\nimport {name} as t; from {other} import x\n"
    )
    program = program.format(tests="tests", name="test_run", other="run_testing")
    source = "\n".join(
        [
            "import json",
            "from pathlib import Path",
            "def f():",
            "    import importlib",
            "    importlib.import_module('one_testing')",
            "    return __import__('two_testing')",
            f"PROGRAM = {program!r}",
            "CODE = f'x = {1}; import three_testing'",
        ]
    )
    assert sorted(imported_modules(source)) == [
        "importlib",
        "json",
        "one_testing",
        "os",
        "pathlib",
        "run_testing",
        "sys",
        "test_run",
        "three_testing",
        "two_testing",
    ]
    assert [name for name in imported_modules(source) if is_test_module(name)] == ["test_run"]
    assert not imported_modules('"""A docstring that speaks of an import, and of conftest."""')


def test_tests_share_helpers_through_helper_modules_not_conftest_or_test_modules():
    """A file under tests/ takes shared helpers from a `*_testing.py` module, never from conftest
    (pytest's, for fixtures) nor from another test module (whose tests and fixtures would then
    run, or be shadowed, in the wrong place): not in its code, and not in a program it runs as a
    process."""
    found = []
    for path in sorted((REPO_ROOT / "tests").glob("*.py")):
        names = imported_modules(path.read_text())
        found += [f"{path.name}: {name}" for name in names if is_test_module(name)]
    assert found == []
