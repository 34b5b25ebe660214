"""Helpers for the tests of the gymnasium Atari scripts (`cleanrl/ppo_atari.py`,
`cleanrl/ppo_atari_lstm.py`) and their wrappers: real emulators, no mocks."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import describe, finish_script, run_dirs, start_script

BREAKOUT = "BreakoutNoFrameskip-v4"
NOOP, FIRE, RIGHT, LEFT = 0, 1, 2, 3  # Breakout's minimal action set


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """In-process forward passes on a small, busy machine: one thread is several times faster."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def wrapper_chain(env) -> list[str]:
    """The class names of a single env's wrappers, outermost first, down to the emulator."""
    names = []
    while True:
        names.append(type(env).__name__)
        if not hasattr(env, "env"):
            return names
        env = env.env


def find_wrapper(env, name: str):
    while type(env).__name__ != name:
        env = env.env
    return env


class Run:
    """A script run started in its own working folder; `proc` waits for it to finish."""

    def __init__(self, cwd: Path, script: Path, args: list[str]):
        self.cwd, self.args = cwd, args
        self.popen = start_script(args, cwd, script=script)
        self._proc = None

    @property
    def proc(self):
        if self._proc is None:
            self._proc = finish_script(self.popen)
        return self._proc

    def ok(self) -> Run:
        assert self.proc.returncode == 0, describe(self.proc)
        return self

    @property
    def run_dir(self) -> Path:
        self.proc  # noqa: B018  (the run must be over)
        dirs = run_dirs(self.cwd)
        assert len(dirs) == 1, f"expected one run folder, found {dirs}"
        return dirs[0]

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
        if self._proc is None:
            finish_script(self.popen)


def start_runs(request, tmp_path_factory, script: Path, runs: dict[str, list[str]]):
    """Start, all at once, the runs in `runs` that the selected tests of the calling module use
    (as fixtures named like the runs), so that they overlap with each other and the quick tests."""
    wanted = {
        name
        for item in request.session.items
        if getattr(item, "module", None) is request.module
        for name in item.fixturenames
        if name in runs
    }
    return {name: Run(tmp_path_factory.mktemp(name), script, runs[name]) for name in sorted(wanted)}


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


def decoded_frames(path: Path) -> list:
    import imageio

    reader = imageio.get_reader(path, format="ffmpeg")
    try:
        return [frame for frame in reader]  # (not list(reader): its length hint is infinite)
    finally:
        reader.close()
