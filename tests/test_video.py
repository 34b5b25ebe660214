"""The mp4 writer (`cleanrl_utils.envs.video`): real ffmpeg, real files read back; it starts ffmpeg
without forking, so a JAX process (whose threads a fork would copy half-way) records videos
without JAX's "os.fork() was called" warning."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from scripts_testing import REPO_ROOT, script_env

from cleanrl_utils.envs.video import VideoWriter

pytest.importorskip("imageio_ffmpeg")


def frames(n: int, height: int = 210, width: int = 160) -> list[np.ndarray]:
    return [np.full((height, width, 3), 10 * i, np.uint8) for i in range(n)]


def read_frames(path) -> list[np.ndarray]:
    import imageio

    with warnings.catch_warnings():
        # imageio's reader forks (a `preexec_fn`); JAX warns of that when an earlier test of the
        # session imported it. The test of the writer, which must not fork, is the last one here
        warnings.filterwarnings("ignore", "os.fork", RuntimeWarning)
        reader = imageio.get_reader(path, format="ffmpeg")
        try:
            return [frame for frame in reader]  # (list() asks its len(): infinite)
        finally:
            reader.close()


def test_a_video_holds_every_frame_and_appears_only_when_closed(tmp_path):
    path = tmp_path / "videos" / "eval-episode-0.mp4"
    video = VideoWriter(path)
    for frame in frames(20):
        video.append(frame)
    assert not path.exists()
    assert video.close() == path
    read = read_frames(path)
    assert len(read) == 20 and read[0].shape == (210, 160, 3)
    # H.264 is lossy: a flat frame comes back flat to within a step or two
    assert [round(float(f.mean()) / 10) for f in read] == list(range(20))
    assert sorted(p.name for p in path.parent.iterdir()) == ["eval-episode-0.mp4"]


def test_odd_sized_frames_are_padded_and_a_discarded_video_leaves_nothing(tmp_path):
    video = VideoWriter(tmp_path / "odd.mp4")
    for frame in frames(3, 211, 161):
        video.append(frame)
    assert read_frames(video.close())[0].shape == (212, 162, 3)
    discarded = VideoWriter(tmp_path / "discarded.mp4")
    discarded.append(frames(1)[0])
    discarded.discard()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["odd.mp4"]


def test_a_jax_process_records_a_video_without_forking(tmp_path):
    """JAX warns at every fork once its backend runs (an `os.register_at_fork` hook). imageio's
    writer starts ffmpeg with subprocess and a `preexec_fn` (its own process group), which makes
    subprocess fork the whole process and run Python in the child: the warning came after every
    JAX run with --capture-video."""
    pytest.importorskip("jax")
    code = (
        "import jax, numpy as np\n"
        "from cleanrl_utils.envs.video import VideoWriter\n"
        "jax.numpy.zeros(1).block_until_ready()  # the backend's threads run from here on\n"
        "video = VideoWriter('v.mp4')\n"
        "video.append(np.zeros((210, 160, 3), np.uint8))\n"
        "video.close()\n"
        "import os, subprocess, sys\n"
        "print('--- the premise: a fork now is warned of', file=sys.stderr, flush=True)\n"
        "subprocess.run(['true'], preexec_fn=os.setpgrp)  # as imageio-ffmpeg starts ffmpeg\n"
    )
    env = script_env(tmp_path, PYTHONPATH=str(REPO_ROOT))
    proc = subprocess.run(
        [sys.executable, "-W", "always", "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "v.mp4").stat().st_size > 0
    recording, premise = proc.stderr.split("--- the premise")
    assert "fork" not in recording, proc.stderr
    assert "os.fork() was called" in premise, proc.stderr


# -- where the videos go, checked before any work (docs/faults.md) ---------------------------


def test_videos_a_file_is_one_line_before_a_run_starts_or_resumes(tmp_path, monkeypatch):
    """It trained, saved the model, then died in `NotADirectoryError` (and on every resume)."""
    from run_testing import SCRIPT, open_run, torch_script

    from cleanrl_utils.console.errors import DISK_EXIT, RunError
    from cleanrl_utils.run import Run

    monkeypatch.chdir(tmp_path)
    run = open_run(Path("runs"), checkpoint_every=1)
    run.restore({})
    run.end_iteration(1, 8, [], {})
    run.finish()
    (tmp_path / "videos").write_text("not a folder")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    for flags in (dict(save_model=True), dict(resume=str(run.dir))):
        with pytest.raises(RunError) as error:
            Run(torch_script.Args(**flags, capture_video=True), SCRIPT, runs_dir="runs", argv=[])
        assert error.value.code == DISK_EXIT
        name = run.name if "resume" in flags else error.value.message.split("/")[1]
        assert error.value.message == (
            f"--capture-video: cannot write the evaluation's videos in videos/{name}/: videos "
            "is a file, not a folder"
        )
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


@pytest.mark.parametrize("module", ["cleanrl_utils.evals", "cleanrl_utils.enjoy"])
def test_an_evaluation_s_video_dir_that_is_a_file_is_one_line_before_any_work(
    tmp_path, capsys, module
):
    import importlib

    from cleanrl_utils.console.errors import DISK_EXIT

    taken = tmp_path / "taken"
    taken.write_text("not a folder")
    argv = ["--model-path", str(tmp_path / "missing.cleanrl_model"), "--capture-video"]
    with pytest.raises(SystemExit) as exit_info:
        importlib.import_module(module).main([*argv, "--video-dir", str(taken)])
    assert exit_info.value.code == DISK_EXIT
    assert capsys.readouterr().err == (
        f"error: --video-dir {taken}: cannot write there: {taken} is a file, not a folder\n"
    )


def test_an_evaluation_s_videos_on_a_full_disk_are_one_line_and_exit_code_74(
    tmp_path, capsys, monkeypatch
):
    """`python -m cleanrl_utils.evals --capture-video` with the video's file on a full disk
    (/dev/full): one line naming the folder and the cause, exit code 74 (it was ffmpeg's broken
    pipe, a traceback)."""
    from types import SimpleNamespace

    import gymnasium as gym

    from cleanrl_utils import evals
    from cleanrl_utils.console.errors import DISK_EXIT
    from cleanrl_utils.files.model_file import save_torch_model
    from cleanrl_utils.files.scripts import load_script

    script = load_script("ppo_atari_envpool")
    agent = script.Agent(SimpleNamespace(single_action_space=gym.spaces.Discrete(4)))
    model = tmp_path / "ppo_atari_envpool.cleanrl_model"
    save_torch_model(model, agent, script.Args(), script.__file__)
    videos = tmp_path / "videos" / "eval"
    videos.mkdir(parents=True)
    (videos / ".eval-episode-0.tmp.mp4").symlink_to("/dev/full")  # (the file ffmpeg writes)
    # (a new folder each evaluation, which the test could not have made first)
    monkeypatch.setattr(evals, "evaluation_video_dir", lambda model, video_dir: videos)
    argv = ["--model-path", str(model), "--capture-video", "--video-dir", str(videos.parent)]
    with pytest.raises(SystemExit) as exit_info:
        evals.main([*argv, "--eval-episodes", "1", "--no-cuda"])
    assert exit_info.value.code == DISK_EXIT
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"error: --capture-video: cannot write the videos in {videos}/: no space left on device "
        "(ENOSPC)"
    )


def test_the_end_of_a_run_says_where_its_videos_are(tmp_path, monkeypatch, capsys):
    """`--capture-video`: the run's last lines name the videos' folder, then the run folder."""
    from run_testing import open_run

    from cleanrl_utils.after_training import finish_training

    monkeypatch.chdir(tmp_path)
    run = open_run(Path("runs"), capture_video=True, eval_episodes=2)
    run.restore({})
    run.end_iteration(run.args.num_iterations, 8 * run.args.num_iterations, [], {})
    video = VideoWriter(Path("videos", run.name, "train-episode-0.mp4"))  # (as `RecordGames`)
    video.append(frames(1)[0])
    video.close()
    played = []
    finish_training(run, None, lambda **games: played.append(games["video_dir"]) or [1.0, 2.0])
    assert run.finish() == 0
    assert played == [f"videos/{run.name}"]
    *_, videos, folder = capsys.readouterr().out.splitlines()
    assert videos == (
        f"videos: videos/{run.name}/ (2 evaluation games: eval-episode-N.mp4, 1 training game: "
        "train-episode-N.mp4)"
    )
    assert folder.startswith(f"run folder: runs/{run.name}/")
