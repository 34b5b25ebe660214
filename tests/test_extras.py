"""A missing optional package is one line naming the install command, exit code 2, even for
`--help` (cleanrl_utils/console/extras.py). The packages are made missing for real: a `sitecustomize`
module on the child's path puts a finder first on `sys.meta_path` that finds nothing for them,
so `import ale_py` raises the `ModuleNotFoundError` a machine without the extra would raise."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from scripts_testing import REPO_ROOT, script_env

from cleanrl_utils.console import extras
from cleanrl_utils.console.errors import entry_point

BLOCKER = """
import importlib.abc, os, sys

class Missing(importlib.abc.MetaPathFinder):
    names = set(os.environ["CLEANRL_TEST_MISSING"].split(","))

    def find_spec(self, name, path=None, target=None):
        if name in self.names or name.partition(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Missing())
"""


def run_without(tmp_path: Path, missing: str, args: list[str]) -> subprocess.CompletedProcess:
    (tmp_path / "sitecustomize.py").write_text(BLOCKER)
    path = os.pathsep.join([str(tmp_path), str(REPO_ROOT)])  # this checkout's cleanrl_utils
    env = script_env(tmp_path, CLEANRL_TEST_MISSING=missing, PYTHONPATH=path)
    return subprocess.run(
        [sys.executable, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize(
    "script, missing, extra",
    [
        ("ppo_atari", "ale_py", "atari"),
        ("ppo_atari_lstm", "cv2", "atari"),
        ("ppo_atari_envpool", "envpool", "envpool"),
        ("ppo_atari_envpool_xla_jax", "flax", "jax"),
        ("ppo_atari_envpool_xla_jax_scan", "envpool", "envpool"),
        ("ppo_atari_ale_vector", "ale_py", "atari"),
    ],
)
def test_a_script_without_its_extra_says_what_to_install_even_for_help(
    tmp_path, script, missing, extra
):
    proc = run_without(tmp_path, missing, [str(REPO_ROOT / "cleanrl" / f"{script}.py"), "--help"])
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"error: {script}.py needs the `{extra}` extra")
    assert f"no module named '{missing}'" in line and extras.INSTALL[extra] in line
    assert not (tmp_path / "runs").exists()


def test_a_package_too_old_for_the_script_says_so(tmp_path):
    """ale-py before 0.11 has no `ale_py.vector_env` (the gymnasium scripts run on it): the ALE
    vector script says a newer ale-py is needed, not that the extra is missing."""
    script = str(REPO_ROOT / "cleanrl" / "ppo_atari_ale_vector.py")
    proc = run_without(tmp_path, "ale_py.vector_env", [script, "--help"])
    assert proc.returncode == 2 and proc.stdout == "" and "Traceback" not in proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("error: ppo_atari_ale_vector.py needs a newer ale_py than the one")
    assert "no module named 'ale_py.vector_env'" in line and extras.INSTALL["atari"] in line


@pytest.mark.parametrize("module", ["cleanrl_utils.evals", "cleanrl_utils.evals.jax_eval"])
def test_the_evaluator_without_an_extra_names_the_command_as_typed(tmp_path, module):
    """`python -m PACKAGE` runs `PACKAGE/__main__.py`: the message names the command, not that
    file. A JAX model file without the jax extra:"""
    (tmp_path / "agent.cleanrl_model").write_bytes(b"\x81\xa6script\xa1x")  # a msgpack map
    proc = run_without(tmp_path, "flax", ["-m", module, "--model-path", "agent.cleanrl_model"])
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"error: python -m {module} needs the `jax` extra (no module named")
    assert extras.INSTALL["jax"] in line


def test_the_tuner_without_optuna_says_what_to_install(tmp_path):
    proc = run_without(tmp_path, "optuna", ["-m", "cleanrl_utils.tuner", "--num-trials", "1"])
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "needs the `optuna` extra" in line and extras.INSTALL["optuna"] in line
    # nothing started (the bytecode of sitecustomize.py, which the interpreter imported, aside)
    assert [p for p in tmp_path.iterdir() if p.name != "__pycache__"] == [
        tmp_path / "sitecustomize.py"
    ]


def test_importing_cleanrl_utils_changes_no_global_state(tmp_path):
    """Every module of the package but `entry` (the scripts' first import) leaves sys.excepthook
    and the signal handlers as they were; `entry` installs only the missing-extra hook (a
    `RunError` becomes its exit in the script's entry point, `entry_point()`, not in a hook)."""
    code = """
import importlib, pkgutil, signal, sys
def state():
    return [sys.excepthook] + [signal.getsignal(s) for s in signal.valid_signals()]
before = state()
import cleanrl_utils
names = [m.name for m in pkgutil.walk_packages(cleanrl_utils.__path__, "cleanrl_utils.")]
for name in names:
    if name != "cleanrl_utils.entry" and not name.endswith("__main__"):
        importlib.import_module(name)
assert state() == before, "an import changed sys.excepthook or a signal handler"
assert len(names) > 30, names
import cleanrl_utils.entry
from cleanrl_utils.console.extras import missing_extra_hook
assert sys.excepthook is missing_extra_hook
"""
    proc = run_without(tmp_path, "nothing", ["-c", code])
    assert proc.returncode == 0, proc.stderr


def test_other_missing_modules_keep_their_traceback(tmp_path):
    """Only the extras' own modules become the one line: a typo stays a traceback."""
    proc = run_without(tmp_path, "nothing", ["-c", "import cleanrl_utils, no_such_module"])
    assert proc.returncode == 1 and "Traceback" in proc.stderr


def test_the_install_commands_are_the_requirements_files_own():
    """Each command is the first line of its requirements file, and the README shows them."""
    readme = (REPO_ROOT / "README.md").read_text()
    for extra, command in extras.INSTALL.items():
        path = re.search(r"requirements/(\S+\.txt)", command)[0]
        first = (REPO_ROOT / path).read_text().splitlines()[0]
        assert first.startswith(f"# {command}"), (extra, first)
        assert command in readme, f"README.md does not show {command}"
    declared = set(extras.EXTRA_OF.values())
    assert declared <= set(extras.INSTALL)


def test_capture_video_without_the_video_extra_is_refused_before_any_work(
    tmp_path, monkeypatch, capsys
):
    """The videos are recorded after training (hours, for a long run): the flag's extra is
    checked when the run is made, in-process with the same finder as the other tests."""
    from cleanrl.ppo_atari_envpool import Args
    from cleanrl_utils.run import Run

    monkeypatch.setenv("CLEANRL_TEST_MISSING", "imageio_ffmpeg")
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))  # (given back after the test)
    monkeypatch.delitem(sys.modules, "imageio_ffmpeg", raising=False)
    exec(BLOCKER, {})
    with pytest.raises(SystemExit) as exit_info, entry_point():
        Run(Args(capture_video=True), "ppo_atari_envpool.py", runs_dir=str(tmp_path / "runs"))
    assert exit_info.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == (
        "error: --capture-video needs the `video` extra (no module named 'imageio_ffmpeg'); "
        f"install it from the repository root with: {extras.INSTALL['video']}"
    )
    assert not (tmp_path / "runs").exists()
    Run(Args(), "ppo_atari_envpool.py", runs_dir=str(tmp_path / "runs"))  # (no video: no need)


def test_every_script_imports_the_entry_before_its_libraries():
    """The scripts of `cleanrl/` (and the sweep's stand-in) import `cleanrl_utils.entry` before
    any other package: the import that makes a missing extra one line, and a stop signal or a
    lost stdout during the imports safe. (A linter sees the import as unused: it must stay.)"""
    import ast

    scripts = sorted((REPO_ROOT / "cleanrl").glob("ppo_*.py")) + [
        REPO_ROOT / "tests" / "sweep_run.py"
    ]
    assert len(scripts) == 10
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    for script in scripts:
        tree = ast.parse(script.read_text())
        names = [
            alias.name if isinstance(node, ast.Import) else node.module
            for node in tree.body
            if isinstance(node, (ast.Import, ast.ImportFrom))
            for alias in (node.names if isinstance(node, ast.Import) else node.names[:1])
        ]
        others = [n for n in names if n.split(".")[0] not in stdlib]
        assert others and others[0] == "cleanrl_utils.entry", (script.name, others[:3])
