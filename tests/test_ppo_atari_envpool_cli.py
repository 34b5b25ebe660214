"""End-to-end tests of `python cleanrl/ppo_atari_envpool.py` and of the evaluator that reads its
saved models: the real script, in a subprocess, on the real Breakout emulator, at smoke size.

The training runs are started together, once per module, and shared by the tests that read
them: few processes, running side by side and alongside the quick tests.
"""

from __future__ import annotations

import json
import math
import os
import re
import runpy
import signal
import time
from pathlib import Path

import pytest
import torch
from logs_testing import LOGGED_EVERY_ITERATION, read_scalars, read_texts
from scripts_testing import (
    PPO_ATARI_ENVPOOL,
    ScriptProcess,
    assert_usage_error,
    describe,
    finish_script,
    module_runs,
    run_script,
    start_script,
)

from cleanrl_utils.envs.protocols import MACHADO, PUBLISHED
from cleanrl_utils.files.model_file import read_model

# The module's fixtures start its runs once: its tests share one xdist worker.
pytestmark = pytest.mark.xdist_group(__name__)

SMOKE = ["--num-envs", "8", "--num-steps", "32", "--total-timesteps", "256"]
RUN_NAME = re.compile(r"Breakout-v5__ppo_atari_envpool__1__\d+")
MODEL_FILE = "ppo_atari_envpool.cleanrl_model"


def assert_ok(run: ScriptProcess) -> None:
    assert run.proc.returncode == 0, describe(run.proc)


def assert_non_negative_integers(points, tag) -> None:
    for step, value in points:
        assert value >= 0 and float(value).is_integer(), f"{tag} at step {step}: {value}"


def leftover_temp_files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.name.startswith(".") or ".tmp" in p.name]


SEED3 = ["--seed", "3", "--num-envs", "8", "--num-steps", "32", "--total-timesteps", "512"]
TRAINING_RUNS = {
    # the command users know: one iteration of 8 envs x 32 steps, seed 1
    "smoke_run": SMOKE,
    # 256 steps per env, long enough for a random Breakout game to end (after ~120-300 steps),
    # then a saved model and two recorded evaluation games; one cheap update epoch; under Machado
    # et al.'s protocol (sticky actions, 18 actions, no episodic life, no no-op starts)
    "long_eval_run": [
        *["--num-envs", "4", "--num-steps", "256", "--total-timesteps", "1024"],
        *["--update-epochs", "1", "--save-model", "--capture-video", "--eval-episodes", "2"],
        *["--protocol", "machado"],
    ],
    "seed3_run_a": SEED3,
    # the same run, tracked with W&B (offline): tracking must not change what is trained
    "seed3_tracked_run": [*SEED3, "--track"],
}


@pytest.fixture(scope="module")
def training_runs(request, tmp_path_factory):
    """The training runs that the selected tests of this module use, started all at once."""
    yield from module_runs(request, tmp_path_factory, TRAINING_RUNS)


@pytest.fixture(scope="module")
def smoke_run(training_runs) -> ScriptProcess:
    return training_runs["smoke_run"]


@pytest.fixture(scope="module")
def long_eval_run(training_runs) -> ScriptProcess:
    return training_runs["long_eval_run"]


@pytest.fixture(scope="module")
def seed3_run_a(training_runs) -> ScriptProcess:
    return training_runs["seed3_run_a"]


@pytest.fixture(scope="module")
def seed3_tracked_run(training_runs) -> ScriptProcess:
    return training_runs["seed3_tracked_run"]


@pytest.mark.slow
def test_user_known_smoke_command_runs(smoke_run, long_eval_run):
    assert_ok(smoke_run)
    run_dir = smoke_run.run_dir
    assert RUN_NAME.fullmatch(run_dir.name), run_dir.name
    assert not (smoke_run.cwd / "videos").exists()
    assert not (run_dir / MODEL_FILE).exists()
    assert not leftover_temp_files(run_dir)

    config = json.loads((run_dir / "config.json").read_text())
    assert config["run_name"] == run_dir.name
    assert config["args"]["batch_size"] == 256
    assert config["args"]["minibatch_size"] == 64
    assert config["args"]["num_iterations"] == 1
    assert config["command"][1:] == SMOKE
    assert isinstance(config["git"]["commit"], str) and config["git"]["commit"]
    assert "dirty" in config["git"]
    assert config["protocol"] == {"name": "published", **PUBLISHED}  # 108,000 agent steps
    assert config["device"]["type"] == ("cuda" if torch.cuda.is_available() else "cpu")
    assert config["args"]["cuda"] is torch.cuda.is_available()  # (--cuda is on by default)
    assert {"torch", "envpool", "numpy"} <= set(config["packages"])

    scalars = read_scalars(run_dir)
    for tag in LOGGED_EVERY_ITERATION:
        assert [step for step, _ in scalars.get(tag, [])] == [256], (tag, sorted(scalars))
    assert scalars["charts/learning_rate"][0][1] == pytest.approx(2.5e-4)
    hyperparameters = read_texts(run_dir).get("hyperparameters")
    assert hyperparameters is not None
    assert "|batch_size|256|" in hyperparameters

    # a run long enough for games to end logs their real (unclipped) scores and lengths
    assert_ok(long_eval_run)
    scalars = read_scalars(long_eval_run.run_dir)
    for tag in ("charts/episodic_return", "charts/episodic_length", "charts/avg_episodic_return"):
        assert scalars.get(tag), f"no {tag} logged; tags: {sorted(scalars)}"
    assert_non_negative_integers(scalars["charts/episodic_return"], "charts/episodic_return")
    for step, length in scalars["charts/episodic_length"]:
        assert 0 < step <= 1024
        assert length > 0 and float(length).is_integer(), (step, length)
    returns = [value for _, value in scalars["charts/episodic_return"]]
    assert scalars["charts/avg_episodic_return"][-1][1] == pytest.approx(
        sum(returns[-20:]) / len(returns[-20:])
    )


@pytest.mark.slow
def test_save_model_then_evaluate(long_eval_run):
    assert_ok(long_eval_run)
    run_dir = long_eval_run.run_dir
    model = run_dir / MODEL_FILE
    assert model.is_file()
    assert f"model saved to runs/{run_dir.name}/{MODEL_FILE}" in long_eval_run.proc.stdout
    assert not leftover_temp_files(run_dir)

    evals = read_scalars(run_dir).get("eval/episodic_return")
    assert evals is not None and [step for step, _ in evals] == [1024, 1024], evals  # the last
    assert_non_negative_integers(evals, "eval/episodic_return")
    machado = {"name": "machado", **MACHADO}
    assert json.loads((run_dir / "config.json").read_text())["protocol"] == machado
    assert read_model(model).protocol == machado

    # the run folder stands for its model file; the videos go to a folder of this evaluation's own
    args = ["--model-path", run_dir.relative_to(long_eval_run.cwd), "--eval-episodes", "2"]
    proc = run_script([*args, "--capture-video"], long_eval_run.cwd, module="cleanrl_utils.evals")
    assert proc.returncode == 0, describe(proc)
    assert proc.stdout.startswith(f"runs/{run_dir.name}/{MODEL_FILE}: ppo_atari_envpool on ")
    assert "under the machado protocol" in proc.stdout and "(the one it was trained with)" in (
        proc.stdout
    )
    printed = re.findall(r"^eval_episode=(\d+), episodic_return=([\d.]+)", proc.stdout, re.M)
    assert [int(i) for i, _ in printed] == [0, 1], proc.stdout
    assert all(float(r).is_integer() for _, r in printed), proc.stdout
    assert re.search(r"mean episodic_return=[\d.]+ \+- [\d.]+ over 2 games", proc.stdout)
    videos = long_eval_run.cwd / "videos" / "eval" / run_dir.name
    assert proc.stdout.splitlines()[-1] == f"videos: videos/eval/{run_dir.name}/"
    assert sorted(p.name for p in videos.iterdir()) == ["eval-episode-0.mp4", "eval-episode-1.mp4"]


@pytest.mark.slow
def test_capture_video_writes_decodable_mp4(long_eval_run):
    import imageio

    assert_ok(long_eval_run)
    video_dir = long_eval_run.cwd / "videos" / long_eval_run.run_dir.name
    videos = sorted(p.name for p in video_dir.iterdir())
    assert videos == ["eval-episode-0.mp4", "eval-episode-1.mp4"], videos
    assert not leftover_temp_files(long_eval_run.cwd / "videos")
    # the run's end says where they are, beside its folder
    name = long_eval_run.run_dir.name
    said = f"videos: videos/{name}/ (2 evaluation games: eval-episode-N.mp4)"
    assert said in long_eval_run.proc.stdout.splitlines(), long_eval_run.proc.stdout

    reader = imageio.get_reader(video_dir / "eval-episode-0.mp4", format="ffmpeg")
    try:
        shapes = [frame.shape for frame in reader]
    finally:
        reader.close()
    assert set(shapes) == {(210, 160, 3)}
    num_frames = len(shapes)
    assert num_frames > 10


@pytest.mark.slow
def test_track_writes_offline_wandb_run(seed3_tracked_run):
    run = seed3_tracked_run
    assert_ok(run)
    offline_runs = list((run.cwd / "wandb").glob("offline-run-*"))
    assert len(offline_runs) == 1, offline_runs
    assert list(offline_runs[0].glob("*.wandb")), sorted(offline_runs[0].rglob("*"))
    assert run.run_dir.name.startswith("Breakout-v5__ppo_atari_envpool__3__")


def truncated_model(path: Path) -> Path:
    """A real torch checkpoint cut in half, as a crash mid-copy would leave it."""
    import io

    import torch

    buffer = io.BytesIO()
    torch.save({"script": "cleanrl.ppo_atari_envpool", "w": torch.zeros(4096)}, buffer)
    path.write_bytes(buffer.getvalue()[: len(buffer.getvalue()) // 2])
    return path


def test_bad_training_input_fails_fast(tmp_path):
    # the script as a process: exit code 2 and one error line before any folder is made; the
    # whole table of bad input (env ids, batch arithmetic) is in test_checks.py, in-process
    proc = run_script([*SMOKE, "--num-minibatches", "3"], tmp_path, timeout=120)
    assert_usage_error(proc, tmp_path, ["--num-minibatches", "256"])


@pytest.mark.parametrize("problem", ["missing", "truncated"])
def test_evaluator_rejects_bad_model_file(tmp_path, problem):
    model = tmp_path / f"{problem}.cleanrl_model"
    if problem == "truncated":
        truncated_model(model)
    args = ["--model-path", model.name, "--eval-episodes", "2"]
    proc = run_script(args, tmp_path, module="cleanrl_utils.evals", timeout=120)
    assert_usage_error(proc, tmp_path, [model.name])
    assert "episodic_return" not in proc.stdout


@pytest.mark.slow
def test_same_seed_gives_identical_losses(seed3_run_a, seed3_tracked_run, smoke_run):
    first, second = seed3_run_a, seed3_tracked_run
    assert_ok(first)
    assert_ok(second)
    a, b = read_scalars(first.run_dir), read_scalars(second.run_dir)
    loss_tags = sorted(tag for tag in a if tag.startswith("losses/"))
    assert loss_tags == sorted(t for t in LOGGED_EVERY_ITERATION if t.startswith("losses/"))
    assert loss_tags == sorted(tag for tag in b if tag.startswith("losses/"))

    def same(x, y):
        return x == y or (math.isnan(x) and math.isnan(y))

    for tag in loss_tags:
        assert [step for step, _ in a[tag]] == [256, 512], (tag, a[tag])
        assert len(a[tag]) == len(b[tag])
        for (step_a, x), (step_b, y) in zip(a[tag], b[tag]):
            assert step_a == step_b and same(x, y), f"{tag}: {a[tag]} != {b[tag]} (tracked)"

    # another seed (the smoke run: seed 1, same batch, same learning rate in iteration 1)
    assert_ok(smoke_run)
    other = read_scalars(smoke_run.run_dir)
    differ = [
        tag for tag in loss_tags if not same(other[tag][0][1], dict(a[tag])[other[tag][0][0]])
    ]
    assert differ, f"seed 1 and seed 3 logged the same losses at step 256: {other}"


@pytest.mark.slow
def test_progress_prints_plain_lines_when_not_a_terminal(smoke_run):
    assert_ok(smoke_run)
    line = re.compile(r"^step 256/256 \(100\.0%\) SPS=\d+ avg_return=\S+", re.M)
    assert line.search(smoke_run.proc.stderr), describe(smoke_run.proc)
    assert "\r" not in smoke_run.proc.stderr  # no tqdm bar redraws in a log file


def test_help_shows_arg_docstrings(tmp_path, monkeypatch, capsys):
    """The script's `__main__` in this process, which has imported what it imports already: a
    process of its own would spend seconds importing them again for the help alone."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setattr("sys.argv", [str(PPO_ATARI_ENVPOOL), "--help"])
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_path(str(PPO_ATARI_ENVPOOL), run_name="__main__")
    assert exit_info.value.code in (0, None)
    text = " ".join(capsys.readouterr().out.split())
    assert "the surrogate clipping coefficient" in text
    assert "--num-minibatches" in text
    assert "--total-timesteps" in text
    assert not list(tmp_path.iterdir())  # no runs/, videos/, wandb/


@pytest.mark.slow
def test_ctrl_c_stops_the_evaluator_with_one_line_and_exit_130(long_eval_run):
    run = long_eval_run
    assert_ok(run)
    model = run.run_dir / MODEL_FILE
    args = ["--model-path", model, "--eval-episodes", "1000"]
    proc = start_script(args, run.cwd, module="cleanrl_utils.evals")
    deadline = time.time() + 300
    while b"eval_episode=" not in os.pread(proc.output_files[0].fileno(), 1 << 16, 0):
        assert proc.poll() is None, describe(finish_script(proc))
        assert time.time() < deadline, "no game played after 300 s"
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    done = finish_script(proc, timeout=60)
    assert done.returncode == 130, describe(done)
    assert done.stderr.strip().splitlines()[-1] == "interrupted (Ctrl-C)"
    assert "Traceback" not in done.stderr
