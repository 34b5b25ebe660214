"""Rules of the test suite's own layout that code can check."""

from __future__ import annotations

import ast

from conftest import REPO_ROOT


def test_tests_share_helpers_through_helper_modules_not_other_test_modules():
    """A test module imports conftest or a `*_testing.py` helper module, never another test
    module (whose tests and fixtures would then run, or be shadowed, in the wrong place)."""
    found = []
    for path in sorted((REPO_ROOT / "tests").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            found += [f"{path.name}: {n}" for n in names if n.split(".")[0].startswith("test_")]
    assert found == []
