"""Checkpoints, resume and preemption (cleanrl_utils/run/lifecycle.py), with real script processes.

The central test runs every script straight to iteration 4, then resumes it from its checkpoint
at iteration 2. The resumed run plays new games (emulators cannot be saved), so its weights differ
from the straight run's; everything that does not depend on the games must come out exactly as in
the straight run: the iteration and step, the optimizer's step count, the random number
generators (actions, shuffles, JAX keys), the learning-rate schedule and the TensorBoard steps.
That a restored state continues training bit for bit is shown in-process in test_run.py.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import time
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from logs_testing import read_scalars
from resume_testing import game_independent_state
from scripts_testing import REPO_ROOT, describe, finish_script, run_dirs, run_script, start_script

from cleanrl_utils.console.errors import CHECKPOINT_EXIT, INTERRUPTED
from cleanrl_utils.files.state_file import (
    CorruptCheckpoint,
    list_checkpoints,
    read_checkpoint,
    write_checkpoint,
)
from cleanrl_utils.run.resume import games_seed

# The module's fixtures start its runs once: its tests share one xdist worker.
pytestmark = pytest.mark.xdist_group(__name__)

SCRIPTS = {
    "ppo_atari_envpool": "Breakout-v5",
    "ppo_atari": "BreakoutNoFrameskip-v4",
    "ppo_atari_lstm": "BreakoutNoFrameskip-v4",
    "ppo_atari_envpool_xla_jax": "Breakout-v5",
    "ppo_atari_envpool_xla_jax_scan": "Breakout-v5",
}
BATCH = 32  # 2 envs x 16 steps
TINY = ["--num-envs", "2", "--num-steps", "16", "--num-minibatches", "2", "--update-epochs", "2"]
ITERATIONS = 4


def script_path(name: str) -> Path:
    return REPO_ROOT / "cleanrl" / f"{name}.py"


def tiny_args(name: str, iterations: int = ITERATIONS, every: int = 2) -> list[str]:
    return [
        "--env-id",
        SCRIPTS[name],
        *TINY,
        "--total-timesteps",
        str(iterations * BATCH),
        "--checkpoint-every",
        str(every),
    ]


def steps_of(run_dir: Path, tag: str = "losses/value_loss") -> list[int]:
    return [step for step, _ in read_scalars(run_dir, files=None).get(tag, [])]


RESUME_TEST = "test_a_resumed_run_carries_on_where_its_checkpoint_left_off"
STOP_TEST = "test_a_stop_signal_writes_a_checkpoint_and_the_run_resumes"
REPORT_TEST = "test_the_report_calls_a_run_stopped_by_sigterm_resumable"
STOP_CASES = {  # id: script, signal, exit code
    "envpool-SIGTERM": ("ppo_atari_envpool", signal.SIGTERM, CHECKPOINT_EXIT),
    "gymnasium-SIGUSR1": ("ppo_atari", signal.SIGUSR1, CHECKPOINT_EXIT),
    "envpool-Ctrl-C": ("ppo_atari_envpool", signal.SIGINT, INTERRUPTED),
}
STOPPED_ITERATIONS = 6


def straight_then_resumed(name: str, cwd: Path, resume: bool) -> types.SimpleNamespace:
    """`name` run straight to iteration 4 (checkpoints at 2 and 4), its folder kept as it was
    then in `straight_dir`; with `resume`, the run then resumed from its checkpoint of
    iteration 2."""
    straight = run_script(tiny_args(name), cwd, script=script_path(name))
    out = types.SimpleNamespace(straight=straight, straight_dir=None, run_dir=None, resumed=None)
    if straight.returncode != 0:
        return out
    (out.run_dir,) = run_dirs(cwd)
    kept = cwd.parent / f"{cwd.name}-straight" / "runs" / out.run_dir.name
    out.straight_dir = Path(shutil.copytree(out.run_dir, kept))
    if resume:
        checkpoint = out.run_dir / "checkpoint_0000002.ckpt"
        out.resumed = run_script(["--resume", str(checkpoint)], cwd, script=script_path(name))
    return out


def stopped_then_resumed(name: str, signum: int, cwd: Path) -> types.SimpleNamespace:
    """`name` stopped by `signum` once its first iteration is done, its folder kept as it was
    then in `stopped_dir`; after Ctrl-C, the run then resumed to its end."""
    proc = start_script(tiny_args(name, STOPPED_ITERATIONS, every=0), cwd, script=script_path(name))
    deadline = time.time() + 300
    stderr = proc.output_files[1].fileno()
    while b"step " not in os.pread(stderr, 1 << 16, 0):  # a progress line: iteration 1 is done
        assert proc.poll() is None, describe(finish_script(proc))
        assert time.time() < deadline, "no iteration done after 300 s"
        time.sleep(0.1)
    proc.send_signal(signum)
    out = types.SimpleNamespace(done=finish_script(proc, timeout=120), run_dir=None, resumed=None)
    found = run_dirs(cwd)
    if len(found) != 1:
        return out
    (out.run_dir,) = found
    kept = cwd.parent / f"{cwd.name}-stopped" / "runs" / out.run_dir.name
    out.stopped_dir = Path(shutil.copytree(out.run_dir, kept))
    if signum == signal.SIGINT:
        resume = ["--resume", f"runs/{out.run_dir.name}"]
        out.resumed = run_script(resume, cwd, script=script_path(name))
    return out


@pytest.fixture(scope="module")
def background_runs(request, tmp_path_factory):
    """The runs that this module's selected tests check, each with what follows it (a resumption),
    started all at once when the first test needs one, each in a thread of its own: a process
    start (torch, EnvPool, JAX and its compilations) costs seconds, and on a small machine the
    scripts' processes overlap each other and the module's other tests. The EnvPool script's
    straight run is also `finished_run`, and its run stopped by SIGTERM the report's. Keys: a
    script's name (straight to iteration 4, then, for `RESUME_TEST`, resumed from iteration 2),
    or a `STOP_CASES` id."""
    items = [i for i in request.session.items if getattr(i, "module", None) is request.module]
    resumed = {i.callspec.params["name"] for i in items if i.originalname == RESUME_TEST}
    straight = set(resumed)
    if any("finished_run" in i.fixturenames for i in items):
        straight.add("ppo_atari_envpool")
    stopped = {i.callspec.id for i in items if i.originalname == STOP_TEST}
    if any(i.originalname == REPORT_TEST for i in items):
        stopped.add("envpool-SIGTERM")
    with ThreadPoolExecutor(max_workers=max(1, len(straight) + len(stopped))) as threads:
        futures = {
            name: threads.submit(
                straight_then_resumed, name, tmp_path_factory.mktemp(name), name in resumed
            )
            for name in sorted(straight)
        }
        for case in sorted(stopped):
            name, signum, _ = STOP_CASES[case]
            cwd = tmp_path_factory.mktemp(case)
            futures[case] = threads.submit(stopped_then_resumed, name, signum, cwd)
        yield futures


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SCRIPTS))
def test_a_resumed_run_carries_on_where_its_checkpoint_left_off(name, background_runs):
    runs = background_runs[name].result()
    assert runs.straight.returncode == 0, describe(runs.straight)
    straight_dir, run_dir = runs.straight_dir, runs.run_dir
    assert [p.name for p in list_checkpoints(straight_dir)] == [
        "checkpoint_0000004.ckpt",
        "checkpoint_0000002.ckpt",
    ]
    at_2 = read_checkpoint(straight_dir / "checkpoint_0000002.ckpt")
    at_4 = read_checkpoint(straight_dir / "checkpoint_0000004.ckpt")
    assert (at_2["iteration"], at_2["global_step"]) == (2, 2 * BATCH)
    assert "lstm_state" not in at_4["state"]  # (games restart: no resume would read it)
    learning_rates = read_scalars(straight_dir)["charts/learning_rate"]

    resumed = runs.resumed
    assert resumed.returncode == 0, describe(resumed)
    assert "resuming" in resumed.stdout and "iteration 2 of 4" in resumed.stdout
    assert run_dirs(run_dir.parent.parent) == [run_dir]  # the same run folder carries on
    again = read_checkpoint(run_dir / "checkpoint_0000004.ckpt")
    assert game_independent_state(again) == game_independent_state(at_4)
    # TensorBoard: the resumed run's iterations 3 and 4 replace the straight run's, once each
    assert steps_of(run_dir) == [BATCH * i for i in range(1, ITERATIONS + 1)]
    assert read_scalars(run_dir, files=None)["charts/learning_rate"] == learning_rates
    config = json.loads((run_dir / "config.json").read_text())
    assert len(config["resumes"]) == 1 and "--resume" in config["resumes"][0]["command"]


@pytest.mark.slow
def test_kill_9_then_resume_auto_ends_at_total_timesteps(tmp_path):
    name, iterations = "ppo_atari_envpool", 12
    args = [*tiny_args(name, iterations, every=3), "--track"]
    proc = start_script(args, tmp_path, script=script_path(name))
    deadline = time.time() + 300
    while not list(tmp_path.glob("runs/*/checkpoint_0000006.ckpt")):
        assert proc.poll() is None, describe(finish_script(proc))
        assert time.time() < deadline, "no checkpoint at iteration 6 after 300 s"
        time.sleep(0.02)
    proc.kill()  # SIGKILL: no handler runs, whatever was not flushed is lost
    assert finish_script(proc).returncode == -signal.SIGKILL
    (run_dir,) = run_dirs(tmp_path)
    killed_at = max(steps_of(run_dir))
    assert killed_at >= 6 * BATCH

    resumed = run_script([*args, "--resume", "auto"], tmp_path, script=script_path(name))
    assert resumed.returncode == 0, describe(resumed)
    assert f"resuming {run_dir.name}" in resumed.stdout
    assert run_dirs(tmp_path) == [run_dir]
    assert steps_of(run_dir) == [BATCH * i for i in range(1, iterations + 1)]
    assert steps_of(run_dir, "charts/SPS")[-1] == iterations * BATCH
    # games: none after the checkpoint's step survives from the killed run
    games = steps_of(run_dir, "charts/episodic_return")
    assert games == sorted(games) and all(step <= iterations * BATCH for step in games)
    # W&B offline: the resumed process logs to the same run id
    config = json.loads((run_dir / "config.json").read_text())
    offline = sorted((tmp_path / "wandb").glob("offline-run-*"))
    assert len(offline) == 2, offline
    assert all(list(d.glob(f"run-{config['wandb_id']}.wandb")) for d in offline), offline

    # the finished run, named: nothing to do; `auto` would now start a new run (test_run.py)
    again = run_script([*args, "--resume", str(run_dir)], tmp_path, script=script_path(name))
    assert again.returncode == 0, describe(again)
    assert "already finished (12 iterations, 384 steps)" in again.stdout
    assert len(list(run_dir.glob("events.out.tfevents.*"))) == 2  # nothing started


@pytest.mark.slow
@pytest.mark.parametrize("case", list(STOP_CASES))
def test_a_stop_signal_writes_a_checkpoint_and_the_run_resumes(case, background_runs):
    _, signum, code = STOP_CASES[case]
    runs = background_runs[case].result()
    done = runs.done
    assert done.returncode == code, describe(done)
    name_in_messages = "Ctrl-C" if signum == signal.SIGINT else signum.name
    assert f"received {name_in_messages}: finishing this iteration" in done.stderr
    assert "Traceback" not in done.stderr
    assert runs.run_dir is not None, describe(done)
    (checkpoint,) = list_checkpoints(runs.stopped_dir)
    payload = read_checkpoint(checkpoint)
    # the checkpoint is of the last iteration logged: nothing is lost, nothing logged twice
    assert payload["global_step"] == max(steps_of(runs.stopped_dir)) == payload["iteration"] * BATCH
    assert payload["iteration"] < STOPPED_ITERATIONS
    assert f"--resume runs/{runs.run_dir.name})" in done.stderr  # the command that continues it
    if signum != signal.SIGINT:
        return
    assert runs.resumed.returncode == 0, describe(runs.resumed)
    assert steps_of(runs.run_dir) == [BATCH * i for i in range(1, STOPPED_ITERATIONS + 1)]


@pytest.fixture(scope="module")
def finished_run(background_runs):
    """A finished 4-iteration run of the EnvPool script, checkpoints at iterations 2 and 4."""
    runs = background_runs["ppo_atari_envpool"].result()
    assert runs.straight.returncode == 0, describe(runs.straight)
    return runs.straight_dir


def copy_run(run_dir: Path, tmp_path: Path) -> Path:
    target = tmp_path / "runs" / run_dir.name
    shutil.copytree(run_dir, target)
    return target


@pytest.mark.slow
def test_a_corrupt_newest_checkpoint_falls_back_to_the_one_before(finished_run, tmp_path):
    run_dir = copy_run(finished_run, tmp_path)
    newest = run_dir / "checkpoint_0000004.ckpt"
    newest.write_bytes(newest.read_bytes()[:1000])  # cut off mid-write by a dying node
    resumed = run_script(["--resume", str(run_dir)], tmp_path)
    assert resumed.returncode == 0, describe(resumed)
    assert f"warning: checkpoint {newest} is corrupt: checksum mismatch" in resumed.stderr
    assert "iteration 2 of 4" in resumed.stdout
    assert read_checkpoint(newest)["iteration"] == 4  # rewritten whole
    assert steps_of(run_dir) == [BATCH * i for i in range(1, ITERATIONS + 1)]


@pytest.mark.slow
def test_a_contradicting_flag_on_resume_is_one_clear_error(finished_run, tmp_path):
    """The whole table of unusable resumes runs in-process in test_run.py."""
    run_dir = copy_run(finished_run, tmp_path)
    done = run_script(["--resume", str(run_dir), "--num-envs", "4"], tmp_path)
    assert done.returncode == 2, describe(done)
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        "error: --resume: the checkpoint was made with --num-envs 2, this command gives 4 "
        "(drop --num-envs or start a new run)"
    ], describe(done)
    # a flag given at its default is given all the same: the checkpoint's 2 minibatches differ
    done = run_script(["--resume", str(run_dir), "--num-minibatches=4"], tmp_path)
    assert done.returncode == 2, describe(done)
    assert "made with --num-minibatches 2, this command gives 4" in done.stderr, describe(done)


@pytest.mark.slow
def test_the_report_calls_a_run_stopped_by_sigterm_resumable(background_runs):
    """The real run that SIGTERM stopped after its first iteration (the stop test's): the report
    calls it resumable and names the folder to pass to `--resume`."""
    runs = background_runs["envpool-SIGTERM"].result()
    assert runs.done.returncode == CHECKPOINT_EXIT, describe(runs.done)
    cwd = runs.stopped_dir.parent.parent
    proc = run_script(
        ["runs", "--output-dir", "report", "--running-minutes", "0", "--include-unfinished"],
        cwd,
        module="cleanrl_utils.report",
    )
    assert proc.returncode == 0, describe(proc)
    notes = (cwd / "report" / "notes.md").read_text()
    # the checkpoint is of the last iteration logged: nothing to play again
    name = runs.stopped_dir.name
    resume = f"checkpointed): `--resume runs/{name}` continues it"
    assert f"`{name}`: stopped, resumable (" in notes and resume in notes, notes
    assert "crashed or killed" not in notes
    (row,) = csv.DictReader((cwd / "report" / "runs.csv").open())
    assert row["status"] == "resumable"


def test_checkpoint_files_round_trip_and_detect_damage(tmp_path):
    path = tmp_path / "checkpoint_0000001.ckpt"
    payload = {"iteration": 1, "state": {"w": np.arange(5.0)}}
    write_checkpoint(path, payload)
    np.testing.assert_array_equal(read_checkpoint(path)["state"]["w"], np.arange(5.0))
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temp file left
    raw = path.read_bytes()
    for damaged, why in [
        (raw[:-1], "checksum mismatch"),
        (raw[:-3] + b"xyz", "checksum mismatch"),
        (b"PK\x03\x04" + raw[4:], "wrong header"),
        (b"", "wrong header"),
    ]:
        path.write_bytes(damaged)
        with pytest.raises(CorruptCheckpoint, match=why):
            read_checkpoint(path)


def test_games_seed_is_the_run_seed_at_the_start_and_new_after_a_resume():
    assert games_seed(7, 1) == 7
    later = {games_seed(7, i) for i in range(2, 200)} | {games_seed(8, i) for i in range(2, 200)}
    assert len(later) == 2 * 198 and all(0 <= s < 2**31 for s in later)
    assert games_seed(7, 5) == games_seed(7, 5)


def test_report_reads_a_resumed_run_once(finished_run, tmp_path):
    """The report tool's own event reader honours TensorBoard's purge marker."""
    from cleanrl_utils.report import load_run

    run_dir = copy_run(finished_run, tmp_path)
    # a second event file as a resumed run writes it: purge from the checkpoint's step on
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(run_dir), purge_step=2 * BATCH + 1)
    for i in (3, 4):
        writer.add_scalar("charts/SPS", 1000.0 + i, i * BATCH)
    writer.add_scalar("charts/episodic_return", 99.0, 4 * BATCH)
    writer.close()
    run = load_run(run_dir, running_minutes=10, now=time.time())
    assert run.status == "finished" and run.last_step == ITERATIONS * BATCH
    assert run.sps == 1004.0
    assert list(run.returns[run.steps > 2 * BATCH]) == [99.0]
    assert "resumed from a checkpoint (1 time)" in run.problems
    tensorboard = read_scalars(run_dir, files=None)["charts/episodic_return"]
    assert list(run.steps) == [step for step, _ in tensorboard]


SWEEP_RUN = REPO_ROOT / "tests" / "sweep_run.py"  # a real run whose iterations only log


def test_a_resume_from_an_older_checkpoint_rewinds_the_run_for_every_later_resume(tmp_path):
    """A finished run of 60 iterations keeps checkpoints 40 and 60; `--resume
    runs/RUN/checkpoint_0000040.ckpt`, then SIGTERM a few iterations on: checkpoint 60 is set
    aside (kept, named), config.json records the rewind and voids `finished`; `--resume auto`
    (a SLURM requeue's) then continues the new line to the end, and the report and TensorBoard
    draw each step once: the abandoned steps after 40 nowhere. (It was: 40 deleted by the stop,
    60 kept and resumed from, the run "already finished".)"""
    from cleanrl_utils.report import load_run

    budget = ["--total-timesteps", "480", "--checkpoint-every", "20"]  # 60 iterations of 8
    first = run_script(budget, tmp_path, script=SWEEP_RUN)
    assert first.returncode == 0, describe(first)
    (run,) = run_dirs(tmp_path)
    assert [p.name for p in list_checkpoints(run)] == [
        "checkpoint_0000060.ckpt",
        "checkpoint_0000040.ckpt",
    ]
    abandoned = (run / "checkpoint_0000060.ckpt").read_bytes()

    (tmp_path / "slow").touch()  # (sweep_run.py: 0.1 s an iteration)
    older = Path("runs", run.name, "checkpoint_0000040.ckpt")
    proc = start_script(["--resume", older], tmp_path, script=SWEEP_RUN)
    wait_for_output(proc, b"rewound to iteration 40: the run goes on from there", stream=1)
    time.sleep(1.0)  # (a few iterations of the new line)
    proc.send_signal(signal.SIGTERM)
    stopped = finish_script(proc)
    assert stopped.returncode == CHECKPOINT_EXIT, describe(stopped)
    kept = list_checkpoints(run)
    at = read_checkpoint(kept[0])["iteration"]
    assert 40 < at < 60 and [p.name for p in kept[1:]] == ["checkpoint_0000040.ckpt"]
    assert (run / "rewound_to_0000040" / "checkpoint_0000060.ckpt").read_bytes() == abandoned
    config = json.loads((run / "config.json").read_text())
    (rewind,) = config["rewinds"]
    assert (rewind["from_iteration"], rewind["to_iteration"]) == (60, 40)
    assert rewind["set_aside"] == ["rewound_to_0000040/checkpoint_0000060.ckpt"]
    assert config["finished"] is None and config["stopped"]["signal"] == "SIGTERM"

    (tmp_path / "slow").unlink()
    again = run_script(["--resume", "auto"], tmp_path, script=SWEEP_RUN)
    assert again.returncode == 0, describe(again)
    assert f"the newest unfinished run is {run.name}" in again.stderr, describe(again)
    assert json.loads((run / "config.json").read_text())["finished"]
    assert run_dirs(tmp_path) == [run]
    # each step once, each from the process that logged it on the run's line (its return: the
    # iteration it started at); the first process's steps after 40 are drawn nowhere
    lines = [1.0] * 40 + [41.0] * (at - 40) + [float(at + 1)] * (60 - at)
    report = load_run(run, running_minutes=10, now=time.time())
    assert list(report.steps) == list(range(8, 481, 8)) and list(report.returns) == lines
    assert report.status == "finished"
    tensorboard = read_scalars(run, files=3)["charts/episodic_return"]
    assert tensorboard == list(zip(range(8, 481, 8), lines))


def wait_for_output(proc, text: bytes, stream: int = 0, timeout: float = 300) -> None:
    """Waits until `proc` has written `text` (stream 0: stdout, 1: stderr)."""
    deadline, fd = time.time() + timeout, proc.output_files[stream].fileno()
    while text not in os.pread(fd, 1 << 20, 0):
        assert proc.poll() is None, describe(finish_script(proc))
        assert time.time() < deadline, f"no {text!r} after {timeout} s"
        time.sleep(0.05)


@pytest.mark.slow
def test_a_stop_in_the_last_iteration_or_after_it_leaves_a_copy_that_resumes_to_its_model(
    tmp_path,
):
    """SIGTERM in the last iteration of a `--save-model` run: 75, no model yet. The folder
    copied (`cp -a`) and resumed, twice: Ctrl-C during the evaluation stops at once (130); the
    next resume writes the model and evaluates, into the copy alone, printing its paths as the
    first run did."""
    name = "ppo_atari_envpool"
    args = ["--env-id", SCRIPTS[name], "--num-envs", "2", "--num-steps", "256"]
    args += ["--num-minibatches", "1", "--update-epochs", "1", "--total-timesteps", "1024"]
    args += ["--checkpoint-every", "0", "--save-model", "--eval-episodes", "2"]
    proc = start_script([*args, "--max-episode-steps", "400"], tmp_path, script=script_path(name))
    wait_for_output(proc, b"step ", stream=1)  # iteration 1 of 2 is done
    proc.send_signal(signal.SIGTERM)
    stopped = finish_script(proc, timeout=120)
    assert stopped.returncode == CHECKPOINT_EXIT, describe(stopped)
    (run_dir,) = run_dirs(tmp_path)
    model = f"{name}.cleanrl_model"
    assert [p.name for p in list_checkpoints(run_dir)] == ["checkpoint_0000002.ckpt"]
    assert json.loads((run_dir / "config.json").read_text())["finished"] is None
    original = {p.name: p.read_bytes() for p in run_dir.iterdir()}

    copy = f"runs/{run_dir.name}-copy"
    subprocess.run(["cp", "-a", f"runs/{run_dir.name}", copy], cwd=tmp_path, check=True)
    proc = start_script(["--resume", copy], tmp_path, script=script_path(name))
    wait_for_output(proc, b"evaluating on 2 games")
    proc.send_signal(signal.SIGINT)
    interrupted = finish_script(proc, timeout=60)
    assert interrupted.returncode == INTERRUPTED, describe(interrupted)
    (line,) = interrupted.stderr.strip().splitlines()
    assert line.startswith("received Ctrl-C during the steps after training: stopping now")
    assert line.endswith(f"--resume {copy}")

    resumed = run_script(["--resume", copy], tmp_path, script=script_path(name))
    assert resumed.returncode == 0, describe(resumed)
    assert f"resuming {run_dir.name}-copy from {copy}/checkpoint_0000002.ckpt (the steps" in (
        resumed.stdout
    )
    assert f"logging to {copy}/ (see it with: tensorboard --logdir runs)" in resumed.stdout
    assert (tmp_path / copy / model).is_file() and not (run_dir / model).exists()
    assert len(read_scalars(tmp_path / copy, files=None)["eval/episodic_return"]) == 2
    assert json.loads((tmp_path / copy / "config.json").read_text())["finished"]
    assert {p.name: p.read_bytes() for p in run_dir.iterdir()} == original  # untouched
    assert run_dirs(tmp_path) == [run_dir, tmp_path / copy]


STARTUP_STOPS = {  # signal: when (seconds after the start, or after the first line)
    signal.SIGTERM: 1.5,
    signal.SIGINT: 3.0,
    signal.SIGUSR1: "first line",
}


@pytest.mark.slow
def test_a_stop_during_start_up_ends_the_run_in_one_line_with_75_or_130(tmp_path):
    """While a script imports torch, EnvPool and JAX (seconds), and while its envs are built:
    SIGTERM and SIGUSR1 end it with 75, which the SLURM templates requeue (not 143 or 138),
    Ctrl-C with 130 (never swallowed by a library's callback: the run does not train on)."""
    name, procs = "ppo_atari_envpool", {}
    for signum in STARTUP_STOPS:
        cwd = tmp_path / signal.Signals(signum).name
        cwd.mkdir()
        procs[signum] = start_script(tiny_args(name), cwd, script=script_path(name), fresh=True)
    started = time.time()
    for signum, when in sorted(STARTUP_STOPS.items(), key=lambda item: str(item[1])):
        if when == "first line":
            wait_for_output(procs[signum], b"\n")
        else:
            time.sleep(max(0.0, started + when - time.time()))
        procs[signum].send_signal(signum)
    for signum, proc in procs.items():
        done = finish_script(proc, timeout=120)
        code = INTERRUPTED if signum == signal.SIGINT else CHECKPOINT_EXIT
        assert done.returncode == code, describe(done)
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith("received ") and "before training began: stopping" in line, line
        assert not list((tmp_path / signal.Signals(signum).name).glob("runs/*/*.ckpt"))
