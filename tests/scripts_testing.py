"""Helpers for the tests that run the repository's scripts and tools as processes: where the
repository is, the environment a script runs in, starting and finishing a process, what a failed
one said, its run folders, and the runs a test module starts at once (`module_runs`)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import preload_testing
from logs_testing import read_scalars

REPO_ROOT = Path(__file__).resolve().parent.parent
PPO_ATARI_ENVPOOL = REPO_ROOT / "cleanrl" / "ppo_atari_envpool.py"

DEFAULT_TIMEOUT_S = 600


def script_env(cwd: str | os.PathLike, **extra: str) -> dict[str, str]:
    """The environment a script runs in during tests: W&B offline and silent, writing only under
    `cwd`; no terminal (so progress is printed as plain lines); wide help output."""
    env = dict(os.environ)
    env.pop("WANDB_DIR", None)  # W&B then writes `wandb/` under the cwd
    for name in ("WANDB_API_KEY", "WANDB_PROJECT", "WANDB_ENTITY", "WANDB_RUN_ID"):
        env.pop(name, None)
    wandb_home = Path(cwd) / ".wandb-home"
    env.update(
        WANDB_MODE="offline",
        WANDB_SILENT="true",
        WANDB_CONFIG_DIR=str(wandb_home / "config"),
        WANDB_CACHE_DIR=str(wandb_home / "cache"),
        WANDB_DATA_DIR=str(wandb_home / "data"),
        COLUMNS="200",
        PYTHONUNBUFFERED="1",
        # one torch thread: on a small, busy machine more threads only fight each other (a smoke
        # run takes 3x longer with the default), and several test runs may share the cores
        OMP_NUM_THREADS="1",
    )
    env.update(extra)
    return env


def start_script(
    args: list[str],
    cwd: str | os.PathLike,
    *,
    script: str | os.PathLike = PPO_ATARI_ENVPOOL,
    module: str | None = None,
    env: dict[str, str] | None = None,
    fresh: bool = False,
) -> subprocess.Popen:
    """Start `python SCRIPT ARGS` (or `python -m MODULE ARGS`) in `cwd`; `finish_script` waits
    for it. For runs that go on while other tests run. Output goes to temporary files, not
    pipes, so a chatty process never blocks on a full pipe while nobody reads it. The process
    is a fork of a preloaded interpreter where it can be (tests/preload_testing.py); `fresh`: a
    new interpreter, for a test of what happens while the script imports its libraries."""
    target = ["-m", module] if module is not None else [str(script)]
    command = [sys.executable, *target, *map(str, args)]
    env = script_env(cwd) if env is None else env
    stdout, stderr = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
    server_env = script_env(tempfile.gettempdir())
    if not fresh and preload_testing.ENABLED and preload_testing.preloadable(env, server_env):
        proc = preload_testing.start(command, cwd, env, stdout, stderr, server_env)
    else:
        proc = subprocess.Popen(
            command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr
        )
    proc.output_files = (stdout, stderr)
    return proc


def finish_script(
    proc: subprocess.Popen, timeout: float = DEFAULT_TIMEOUT_S
) -> subprocess.CompletedProcess:
    """Wait for a started script and collect its output; kill it (and fail the test) when it
    runs past `timeout` seconds."""
    try:
        proc.wait(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        timed_out = True
    outputs = []
    for file in proc.output_files:
        file.seek(0)
        outputs.append(file.read())
        file.close()
    stdout, stderr = outputs
    if timed_out:
        raise AssertionError(
            f"{proc.args} ran past {timeout} s\n--- stdout ---\n{stdout[-4000:]}\n"
            f"--- stderr ---\n{stderr[-4000:]}"
        )
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def run_script(
    args: list[str],
    cwd: str | os.PathLike,
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
    **kw,
) -> subprocess.CompletedProcess:
    """Run `python SCRIPT ARGS` (or `python -m MODULE ARGS`, with `module=`) in `cwd` to its end,
    capturing text output; `script`, `module` and `env` as in `start_script`.

    Never raises on a non-zero exit: the caller asserts on `returncode`, `stdout`, `stderr`.
    """
    return finish_script(start_script(args, cwd, **kw), timeout)


def describe(proc: subprocess.CompletedProcess) -> str:
    """A failure message showing what the process said."""
    err = proc.stderr or ""
    # a long stderr (torchrun's tracebacks) keeps its head, where the first failure is, and its
    # tail; the `error:` lines (a rank's, which says what failed first) are repeated at the end
    errors = [line for line in err.splitlines() if line.startswith(("error:", "[rank"))][:20]
    if len(err) > 8000:
        err = f"{err[:3000]}\n[...]\n{err[-5000:]}"
    return (
        f"command: {proc.args}\nexit code: {proc.returncode}\n"
        f"--- stdout ---\n{proc.stdout[-4000:]}\n--- stderr ---\n{err}\n"
        + ("--- error lines ---\n" + "\n".join(errors) if errors else "")
    )


def run_dirs(cwd: str | os.PathLike) -> list[Path]:
    """The run folders under `cwd/runs/` (not the hidden `.claims/` of a sweep's runs)."""
    runs = Path(cwd) / "runs"
    if not runs.is_dir():
        return []
    return sorted(p for p in runs.iterdir() if p.is_dir() and not p.name.startswith("."))


class ScriptProcess:
    """A script run started in its own working folder; `proc` waits for it to finish (and, with
    `check`, asserts that it succeeded)."""

    def __init__(
        self,
        cwd: Path,
        script: str | os.PathLike,
        args: list[str],
        check: bool = False,
        env: dict[str, str] | None = None,
    ):
        """`env`: variables added to `script_env`'s."""
        self.cwd, self.args, self.check = cwd, args, check
        self.popen = start_script(args, cwd, script=script, env=script_env(cwd, **(env or {})))
        self._proc = None

    @property
    def proc(self) -> subprocess.CompletedProcess:
        if self._proc is None:
            self._proc = finish_script(self.popen)
        if self.check:
            assert self._proc.returncode == 0, describe(self._proc)
        return self._proc

    def ok(self) -> ScriptProcess:
        assert self.proc.returncode == 0, describe(self.proc)
        return self

    @property
    def run_dir(self) -> Path:
        self.proc  # noqa: B018  (the run must be over)
        dirs = run_dirs(self.cwd)
        assert len(dirs) == 1, f"expected one run folder, found {dirs}"
        return dirs[0]

    @property
    def scalars(self) -> dict[str, list[tuple[int, float]]]:
        return read_scalars(self.run_dir)

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
        if self._proc is None:
            finish_script(self.popen)


def module_runs(request, tmp_path_factory, runs: dict, script=PPO_ATARI_ENVPOOL, check=False):
    """For a module-scoped fixture (`yield from module_runs(...)`): starts, all at once, the runs
    of `runs` (name -> args, name -> (script, args), or name -> (script, args, extra environment
    variables)) that the module's selected tests use as
    fixtures of the same name, so that they overlap with each other and with the quick tests;
    yields {name: ScriptProcess}; kills whatever is still running at the end."""
    wanted = {
        name
        for item in request.session.items
        if getattr(item, "module", None) is request.module
        for name in item.fixturenames
        if name in runs
    }
    started = {}
    for name in sorted(wanted):
        spec = runs[name]
        run_script_path, args, *env = spec if isinstance(spec, tuple) else (script, spec)
        cwd = tmp_path_factory.mktemp(name)
        started[name] = ScriptProcess(cwd, run_script_path, args, check, *env)
    yield started
    for run in started.values():
        run.stop()


def assert_usage_error(proc, cwd: Path, expected: list[str]) -> None:
    """Exit 2 with one `error:` line naming `expected`, before any run folder was made."""
    assert proc.returncode == 2, describe(proc)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), describe(proc)
    for word in expected:
        assert word in lines[0], f"{word!r} not in {lines[0]!r}"
    assert "Traceback" not in proc.stdout + proc.stderr
    for folder in ("runs", "videos", "wandb"):
        assert not (cwd / folder).exists(), f"{folder}/ was created before the input was checked"
