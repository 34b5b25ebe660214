"""The data-parallel scripts as users run them: under torchrun (2 gloo ranks on this machine)
and as srun starts 2 ranks, eager and compiled, alone, on two loopback "nodes"; the run lifecycle
across ranks (a stop signal to one rank, a resume, a rank killed with -9); bad input on every
rank. The update itself is proven equal to the single-process update in test_distributed.py."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from logs_testing import LOGGED_EVERY_ITERATION, read_scalars
from ports import free_port
from resume_testing import game_independent_state
from scripts_testing import (
    REPO_ROOT,
    assert_usage_error,
    describe,
    finish_script,
    run_dirs,
    run_script,
    script_env,
    start_script,
)

from cleanrl_utils.files.state_file import list_checkpoints, read_checkpoint
from cleanrl_utils.report.loading import load_run

# The module's fixtures start its runs once: its tests share one xdist worker.
pytestmark = pytest.mark.xdist_group(__name__)

ENVPOOL = REPO_ROOT / "cleanrl" / "ppo_atari_envpool_multigpu.py"
GYM = REPO_ROOT / "cleanrl" / "ppo_atari_multigpu.py"
MULTINODE_TEMPLATE = REPO_ROOT / "benchmark" / "cleanrl_multinode.slurm_template"
LOCAL_ENVS, STEPS = 2, 16
BATCH = 2 * LOCAL_ENVS * STEPS  # two ranks
MAX_EPISODE_STEPS = 20  # games end (truncated) every 20 steps: each env finishes some
TINY = [
    "--local-num-envs",
    str(LOCAL_ENVS),
    "--num-steps",
    str(STEPS),
    "--num-minibatches",
    "2",
    "--update-epochs",
    "2",
    "--checkpoint-every",
    "2",
]


def envpool_args(iterations: int, batch: int = BATCH) -> list[str]:
    return [
        *TINY,
        "--max-episode-steps",
        str(MAX_EPISODE_STEPS),
        "--total-timesteps",
        str(iterations * batch),
    ]


def env_of(cwd, **extra) -> dict[str, str]:
    """The test session's PYTHONPATH (the project installed, or named there), as for every script
    the suite starts: another one would need a new interpreter (tests/preload_testing.py)."""
    return script_env(cwd, **extra)


def start(command: list[str], cwd: Path, env: dict | None = None, **popen) -> subprocess.Popen:
    """A command (torchrun, or one rank) in `cwd`, in its own process group (a new session: the
    stop tests signal it, or its group, as a terminal would), output to files; a new
    interpreter."""
    import tempfile

    out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
    proc = subprocess.Popen(
        command,
        cwd=cwd,
        env=env or env_of(cwd),
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=err,
        text=True,
        start_new_session=True,
        **popen,
    )
    proc.output_files = (out, err)
    return proc


def start_forked(command: list[str], cwd: Path, env: dict | None = None):
    """A command (`python SCRIPT ...` or `python -m MODULE ...`: a rank, torchrun) that no test
    signals as a group, in `cwd`: a process of its own forked from the preloaded interpreter
    (tests/preload_testing.py), a new interpreter where its environment needs one. Its Popen
    handle's pid is the process's own (torchrun's workers are its children)."""
    target = {"module": command[2]} if command[1] == "-m" else {"script": command[1]}
    args = command[3:] if command[1] == "-m" else command[2:]
    return start_script(args, cwd, env=env or env_of(cwd), **target)


def torchrun(
    script: Path,
    args: list[str],
    nproc: int = 2,
    launcher: list[str] | None = None,
    module: str = "torch.distributed.run",
):
    launcher = launcher or ["--standalone", f"--nproc_per_node={nproc}"]
    return [sys.executable, "-m", module, *launcher, str(script), *args]


def ours(script: Path, args: list[str], launcher: list[str] | None = None) -> list[str]:
    """`python -m cleanrl_utils.torchrun`: torchrun that exits with the run's code."""
    return torchrun(script, args, launcher=launcher, module="cleanrl_utils.torchrun")


def last_line(proc: subprocess.CompletedProcess) -> str:
    return proc.stderr.strip().splitlines()[-1]


def rank_command(script: Path, args: list[str]) -> list[str]:
    return [sys.executable, str(script), *args]


def rank_env(cwd, rank: int, port: int, **extra) -> dict[str, str]:
    """What torchrun would set for rank `rank` of 2 (a launch without torchrun, as srun can)."""
    return env_of(
        cwd,
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE="2",
        LOCAL_WORLD_SIZE="2",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        **extra,
    )


def worker_pids(launcher_pid: int) -> dict[int, int]:
    """rank -> pid of torchrun's workers."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) != launcher_pid:
                continue
            environ = (stat.parent / "environ").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        for item in environ:
            if item.startswith(b"RANK="):
                found[int(item[5:])] = int(stat.parent.name)
    return found


def wait_for(path_glob: str, cwd: Path, proc: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.time() + timeout
    while not list(cwd.glob(path_glob)):
        assert proc.poll() is None, describe(finish_script(proc))
        assert time.time() < deadline, f"no {path_glob} after {timeout} s"
        time.sleep(0.05)


def wait_for_output(text: bytes, proc: subprocess.Popen, timeout: float = 300) -> None:
    """Until `text` is in what `proc` (from `start`) wrote to stderr."""
    deadline = time.time() + timeout
    stderr = proc.output_files[1]
    stderr.flush()
    while text not in os.pread(stderr.fileno(), 1 << 20, 0):
        assert proc.poll() is None, describe(finish_script(proc))
        assert time.time() < deadline, f"no {text!r} on stderr after {timeout} s"
        time.sleep(0.05)


def games(run_dir: Path) -> list[tuple[int, float]]:
    return read_scalars(run_dir, files=None).get("charts/episodic_length", [])


def shims(folder: Path, srun_body: str) -> dict[str, str]:
    """`srun` and `scontrol` as a 2-node allocation of this one host would run them: `srun`
    starts its command once per node (`srun_body` says how), `scontrol show hostnames` names
    the nodes, `scontrol requeue` is recorded in `requeued`. The environment of an array task."""
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(f"#!/bin/bash\nshift  # --kill-on-bad-exit=1\n{srun_body}\n")
    (bin_dir / "scontrol").write_text(
        '#!/bin/bash\nif [ "$1" = requeue ]; then echo "$2" >> requeued; exit 0; fi\n'
        'printf "127.0.0.1\\n127.0.0.1\\n"\n'
    )
    for shim in bin_dir.iterdir():
        shim.chmod(0o755)
    venv_bin = Path(sys.executable).parent
    return env_of(
        folder,
        PATH=f"{bin_dir}:{venv_bin}:/usr/bin:/bin",
        SLURM_JOB_ID="7",
        SLURM_ARRAY_JOB_ID="7",
        SLURM_ARRAY_TASK_ID="0",
        SLURM_JOB_NODELIST="node[0-1]",
        SLURM_JOB_NUM_NODES="2",
    )


def render_multinode(cwd: Path, args: list[str]) -> Path:
    command = f"python {ENVPOOL} {' '.join(args)}"
    rendered = run_script(
        ["--slurm-template-path", str(MULTINODE_TEMPLATE), "--no-auto-tag", "--env-ids",
         "Breakout-v5", "--num-seeds", "1", "--command", command, "--slurm-nodes", "2",
         "--slurm-gpus-per-task", "1", "--slurm-total-cpus", "2"],
        cwd, module="cleanrl_utils.benchmark", env=env_of(cwd), timeout=60,
    )  # fmt: skip
    assert rendered.returncode == 0, rendered.stdout + rendered.stderr
    (path,) = (cwd / "slurm").glob("*.slurm")
    return path


def start_multinode_task(cwd: Path, args: list[str]) -> subprocess.Popen:
    """Array task 0 of the rendered multi-node template, run by bash as slurmd would, on two
    "nodes" of this host: two torchrun processes meeting at a c10d rendezvous on loopback."""
    path = render_multinode(cwd, args)
    srun = 'for node in 0 1; do SLURM_NODEID=$node "$@" & done; wait -n; a=$?; wait -n; exit $(( a | $? ))'
    port = free_port()  # (not the template's default: another run may hold it)
    return start(["bash", str(path)], cwd, shims(cwd, srun) | {"RDZV_PORT": str(port)})


def start_two_ranks(script: Path, args: list[str], cwd: Path, **extra) -> list:
    """Ranks 0 and 1 of a run, started as srun can (no torchrun): forks of the preloaded
    interpreter with torchrun's variables, not a launcher and 2 new interpreters."""
    port = free_port()
    return [
        start_forked(rank_command(script, args), cwd, rank_env(cwd, r, port, **extra))
        for r in (0, 1)
    ]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The module's runs, started at once so that they overlap: 2 ranks under torchrun (4
    iterations), the same alone, the gymnasium script on 2 ranks and alone, 2 ranks on two
    loopback nodes, 2 compiled ranks (dynamo saying what it traces). A run of 2 ranks without
    torchrun ("gym_two", "compiled": what they prove reads no launcher variable; "two" and the
    stop tests are torchrun's) is there by its rank 0, and by its rank 1 as "NAME rank 1"."""
    gym_args = [*TINY, "--total-timesteps", str(BATCH)]
    specs = {
        "two": torchrun(ENVPOOL, envpool_args(4)),
        "alone": rank_command(ENVPOOL, envpool_args(2, BATCH // 2)),
        "single": rank_command(
            REPO_ROOT / "cleanrl" / "ppo_atari_envpool.py",
            [
                *(arg if arg != "--local-num-envs" else "--num-envs" for arg in TINY),
                "--max-episode-steps",
                str(MAX_EPISODE_STEPS),
                "--total-timesteps",
                str(BATCH),
            ],
        ),
        "gym_alone": rank_command(GYM, [*TINY, "--total-timesteps", str(BATCH // 2)]),
    }
    cwds = {name: tmp_path_factory.mktemp(name) for name in [*specs, "gym_two", "slurm"]}
    procs = {name: start_forked(command, cwds[name]) for name, command in specs.items()}
    procs["gym_two"], procs["gym_two rank 1"] = start_two_ranks(GYM, gym_args, cwds["gym_two"])
    procs["slurm"] = start_multinode_task(cwds["slurm"], envpool_args(4))
    cwds["compiled"] = tmp_path_factory.mktemp("compiled")
    compiled = [*envpool_args(4), "--compile"]  # as "two": the same lr schedule
    procs["compiled"], procs["compiled rank 1"] = start_two_ranks(
        ENVPOOL, compiled, cwds["compiled"], TORCH_LOGS="dynamo,recompiles"
    )
    for name in ("gym_two", "compiled"):
        cwds[f"{name} rank 1"] = cwds[name]
    done = {name: finish_script(proc, timeout=600) for name, proc in procs.items()}
    yield {name: (cwds[name], done[name]) for name in done}


@pytest.mark.slow
def test_two_ranks_under_torchrun_log_every_ranks_games_on_rank_0(runs):
    cwd, proc = runs["two"]
    assert proc.returncode == 0, describe(proc)
    (run_dir,) = run_dirs(cwd)
    scalars = read_scalars(run_dir)
    assert [s for s, _ in scalars["losses/value_loss"]] == [BATCH * i for i in (1, 2, 3, 4)]
    # 4 envs (2 a rank) of 64 steps each, games cut at 20 steps: 3 games an env, 12 in all;
    # rank 0's envs alone would be 6
    assert len(games(run_dir)) == 12, games(run_dir)
    assert all(length <= MAX_EPISODE_STEPS for _, length in games(run_dir))
    checkpoint = read_checkpoint(run_dir / "checkpoint_0000004.ckpt")
    assert checkpoint["world_size"] == 2 and len(checkpoint["ranks_rng"]) == 2
    torch_states = [str(r["torch"].tolist()) for r in checkpoint["ranks_rng"]]
    assert torch_states[0] != torch_states[1]  # each rank samples its own actions
    assert [p.name for p in cwd.iterdir() if not p.name.startswith(".")] == ["runs"]


@pytest.mark.slow
def test_alone_it_is_a_one_process_run(runs):
    cwd, proc = runs["alone"]
    assert proc.returncode == 0, describe(proc)
    (run_dir,) = run_dirs(cwd)
    assert [s for s, _ in read_scalars(run_dir)["losses/value_loss"]] == [BATCH // 2, BATCH]
    assert "world_size" not in read_checkpoint(run_dir / "checkpoint_0000002.ckpt")
    # the same draws and the same update as ppo_atari_envpool.py with as many envs
    single_cwd, single = runs["single"]
    assert single.returncode == 0, describe(single)
    (single_dir,) = run_dirs(single_cwd)
    ours, theirs = read_scalars(run_dir), read_scalars(single_dir)
    for tag in (
        "losses/value_loss",
        "losses/policy_loss",
        "losses/approx_kl",
        "charts/episodic_return",
    ):
        assert ours[tag] == theirs[tag], tag


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gym_two", "gym_alone"])
def test_the_gymnasium_script_runs_on_two_ranks_and_alone(runs, name):
    """(Its ranks set up as the EnvPool script's, which runs under torchrun above.)"""
    cwd, proc = runs[name]
    assert proc.returncode == 0, describe(proc)
    if name == "gym_two":
        rank1 = runs["gym_two rank 1"][1]
        assert rank1.returncode == 0, describe(rank1)
    (run_dir,) = run_dirs(cwd)
    batch = BATCH if name == "gym_two" else BATCH // 2
    assert [s for s, _ in read_scalars(run_dir)["losses/value_loss"]] == [batch]


COMPILED = ("get_action_and_value", "compute_advantages", "ppo_loss")


@pytest.mark.slow
def test_two_compiled_ranks_learn_what_two_eager_ranks_learn_and_compile_only_once(runs):
    """Each rank's share of a minibatch has one shape (padded), so each compiled function is
    traced once on each rank, in the first iteration, and never again."""
    cwd, proc = runs["compiled"]
    rank1 = runs["compiled rank 1"][1]
    assert proc.returncode == 0 and rank1.returncode == 0, describe(proc) + describe(rank1)
    stderr = proc.stderr + rank1.stderr
    traced = re.findall(r"\[rank(\d)\]:.* torchdynamo start tracing (\w+)", stderr)
    assert sorted(traced) == sorted((r, f) for r in "01" for f in COMPILED), traced
    assert "Recompiling" not in stderr, describe(proc) + describe(rank1)
    (run_dir,) = run_dirs(cwd)
    (eager_dir,) = run_dirs(runs["two"][0])
    # the same seed samples the same actions: the same losses, up to float rounding
    compiled, eager = read_scalars(run_dir), read_scalars(eager_dir)
    for tag in (t for t in LOGGED_EVERY_ITERATION if t.startswith("losses/")):
        assert [s for s, _ in compiled[tag]] == [BATCH * i for i in (1, 2, 3, 4)], tag
        # explained variance, 1 - var(returns - values) / var(returns), magnifies the values'
        # float rounding (compiled kernels sum in another order) where the returns vary little
        rel = 5e-3 if tag == "losses/explained_variance" else 1e-3
        for (_, x), (_, y) in zip(compiled[tag], eager[tag]):
            assert x == pytest.approx(y, rel=rel, abs=1e-6, nan_ok=True), (tag, x, y)


@pytest.mark.slow
def test_the_multinode_template_on_two_loopback_nodes_gives_the_losses_of_one_node(runs):
    cwd, task = runs["slurm"]
    assert task.returncode == 0, describe(task)
    rendered = next((cwd / "slurm").glob("*.slurm")).read_text()
    assert "--nproc_per_node=1 " in rendered and f"--no-python python {ENVPOOL}" in rendered
    assert "rendezvous 127.0.0.1:" in task.stdout
    assert not (cwd / "requeued").exists()
    (run_dir,) = run_dirs(cwd)  # rank 0 alone wrote, whichever node it was on
    (one_node,) = run_dirs(runs["two"][0])
    for tag in ("losses/value_loss", "losses/policy_loss", "losses/approx_kl"):
        assert read_scalars(run_dir)[tag] == read_scalars(one_node)[tag], tag


@pytest.mark.slow
def test_a_resumed_two_rank_run_carries_on_as_the_run_never_stopped(runs, tmp_path):
    straight_cwd, proc = runs["two"]
    assert proc.returncode == 0, describe(proc)
    (straight,) = run_dirs(straight_cwd)
    run_dir = tmp_path / "runs" / straight.name
    shutil.copytree(straight, run_dir)
    (run_dir / "checkpoint_0000004.ckpt").unlink()
    for events in run_dir.glob("events.out.tfevents.*"):
        events.unlink()  # (the resumed run's own events only)
    # the 2 ranks started as srun can (no torchrun: forks of the preloaded interpreter, not 2 new
    # ones): what a rank restores reads no launcher's variable, and the runs under torchrun are
    # the other tests'
    port = free_port()
    resumed, rank1 = [
        finish_script(p)
        for p in [
            start_forked(
                rank_command(ENVPOOL, ["--resume", str(run_dir)]),
                tmp_path,
                rank_env(tmp_path, r, port),
            )
            for r in (0, 1)
        ]
    ]
    assert resumed.returncode == 0 and rank1.returncode == 0, describe(resumed) + describe(rank1)
    assert "resuming" in resumed.stdout and "iteration 2 of 4" in resumed.stdout
    again = read_checkpoint(run_dir / "checkpoint_0000004.ckpt")
    at_4 = read_checkpoint(straight / "checkpoint_0000004.ckpt")
    assert game_independent_state(again) == game_independent_state(at_4)
    ranks = [{"python": r["python"], "torch": r["torch"].tolist()} for r in again["ranks_rng"]]
    assert ranks == [
        {"python": r["python"], "torch": r["torch"].tolist()} for r in at_4["ranks_rng"]
    ]

    alone = run_script(["--resume", str(run_dir)], tmp_path, script=ENVPOOL)
    assert alone.returncode == 2 and "2 process(es), this one has 1" in alone.stderr, describe(
        alone
    )


def sighup_not_ignored() -> None:
    """In the child: SIGHUP as a closed terminal delivers it (not ignored, as it would be in a
    test session started with `nohup`)."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


STOPS = {  # how: (exit code, the signal as the stop's line names it)
    "SIGUSR1 to rank 1": (75, "SIGUSR1"),
    "Ctrl-C to torchrun": (130, "Ctrl-C"),
    "SIGHUP to the process group (a closed terminal)": (75, "SIGHUP"),
}


@pytest.mark.slow
@pytest.mark.parametrize("how", list(STOPS))
def test_a_stop_signal_stops_every_rank_after_the_same_iteration(tmp_path, how):
    command = ours(ENVPOOL, envpool_args(40))
    if how.startswith("SIGHUP"):  # a new session, whose group a closed terminal signals
        proc = start(command, tmp_path, preexec_fn=sighup_not_ignored)
    else:  # a signal to one process (SIGHUP not ignored there too: the launcher forwards it)
        proc = start_forked(command, tmp_path)
    wait_for("runs/*/checkpoint_0000002.ckpt", tmp_path, proc)
    if how == "SIGUSR1 to rank 1":
        os.kill(worker_pids(proc.pid)[1], signal.SIGUSR1)  # one rank only: the ranks agree
    elif how == "Ctrl-C to torchrun":
        os.kill(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C: torchrun passes it on
    else:  # torchrun passes it on, and the ranks in its group get it too: the first decides
        os.killpg(proc.pid, signal.SIGHUP)
    done = finish_script(proc, timeout=120)
    (run_dir,) = run_dirs(tmp_path)
    (newest, *_) = list_checkpoints(run_dir)
    stopped = read_checkpoint(newest)
    assert 2 <= stopped["iteration"] < 40 and len(stopped["ranks_rng"]) == 2
    # the run's exit code, not torchrun's 1; its last line names the resume command
    code, name = STOPS[how]
    assert done.returncode == code, describe(done)
    assert last_line(done) == (
        f"{name}: checkpoint of iteration {stopped['iteration']} written to {newest.relative_to(tmp_path)}; "
        f"exiting with code {code} (continue with: python -m cleanrl_utils.torchrun ... "
        f"{ENVPOOL} --resume {run_dir.relative_to(tmp_path)})"
    ), describe(done)
    assert "Traceback" not in done.stdout + done.stderr, describe(done)
    steps = [s for s, _ in read_scalars(run_dir)["losses/value_loss"]]
    assert steps[-1] == stopped["global_step"]  # rank 0 went no further than the checkpoint


@pytest.mark.slow
def test_a_rank_killed_before_any_checkpoint_is_exit_1_a_recorded_stop_and_no_resume_advice(
    tmp_path,
):
    args = [*envpool_args(4000), "--checkpoint-every", "0"]  # (still training when killed)
    proc = start_forked(ours(ENVPOOL, args), tmp_path)
    # rank 0's first progress line: the first iteration is done, both ranks are training (the
    # event file comes before the envs: a kill then came before training began, and rank 0
    # stopped on torchrun's SIGTERM with 75)
    wait_for_output(f"step {BATCH}/".encode(), proc)
    os.kill(worker_pids(proc.pid)[1], signal.SIGKILL)
    done = finish_script(proc, timeout=60)
    assert done.returncode == 1, describe(done)
    assert "rank 1: killed by SIGKILL" in done.stderr, describe(done)
    assert last_line(done).startswith("error: rank 0: lost rank 1 of 2"), describe(done)
    assert last_line(done).endswith("no checkpoint was written yet: the run must start again")
    assert "--resume" not in done.stderr and "Traceback" not in done.stderr, describe(done)
    (run_dir,) = run_dirs(tmp_path)
    assert list_checkpoints(run_dir) == []
    stopped = json.loads((run_dir / "config.json").read_text())["stopped"]
    assert stopped["signal"] == "the loss of rank 1", stopped
    log = load_run(run_dir, running_minutes=10.0, now=time.time())  # not "still running"
    assert log.status == "stopped", log.problems
    assert any("stopped by the loss of rank 1" in note for note in log.problems), log.problems


@pytest.mark.slow
def test_two_loopback_nodes_that_disagree_stop_before_any_env_with_one_line_and_exit_2(tmp_path):
    port = free_port()
    nodes = [
        "--nnodes=2",
        "--nproc_per_node=1",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint=127.0.0.1:{port}",
        "--rdzv-id=disagree",
    ]
    args = envpool_args(2)
    second = [*args, "--learning-rate", "0.5", "--local-num-envs", "3"]  # (the last one counts)
    procs = [start_forked(ours(ENVPOOL, a, nodes), tmp_path) for a in (args, second)]
    done = [finish_script(p, timeout=120) for p in procs]
    expected = (
        "error: the ranks disagree on --learning-rate: 0.00025 on rank 0, 0.5 on rank 1; "
        "--local-num-envs: 2 on rank 0, 3 on rank 1"
    )
    for node in done:
        errors = [line for line in node.stderr.splitlines() if line.startswith("error:")]
        assert node.returncode == 2 and len(errors) == 1, describe(node)
        assert last_line(node).startswith(expected), describe(node)
        assert "Traceback" not in node.stderr, describe(node)
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_a_rank_that_cannot_see_the_runs_folder_is_caught_at_the_start(runs, tmp_path):
    """--resume auto: rank 0 finds the run, rank 1 (another folder: another node's view) does
    not and would start a new one; both stop at once, naming the difference. --resume RUN: rank
    1 cannot read it and stops before joining; the other node's rank stops at once too (it
    used to wait for it until the process group's timeout)."""
    straight_cwd, proc = runs["two"]
    assert proc.returncode == 0, describe(proc)
    (straight,) = run_dirs(straight_cwd)
    sees, blind = tmp_path / "sees", tmp_path / "blind"
    blind.mkdir()
    shutil.copytree(straight, sees / "runs" / straight.name)
    (sees / "runs" / straight.name / "checkpoint_0000004.ckpt").unlink()
    port, args = free_port(), [*envpool_args(4), "--resume", "auto"]
    ranks = [
        start_forked(rank_command(ENVPOOL, args), cwd, rank_env(cwd, r, port))
        for r, cwd in enumerate((sees, blind))
    ]
    started = time.time()
    done = [finish_script(p, timeout=120) for p in ranks]
    assert time.time() - started < 60
    for rank in done:
        assert rank.returncode == 2, describe(rank)
        line = last_line(rank)
        assert line.startswith("error: the ranks disagree on the resume target: "), line
        assert f"{straight.name}, iteration 2 on rank 0, none (a new run) on rank 1" in line
    assert list(blind.iterdir()) == []  # nothing of a run

    nodes = [
        "--nnodes=2",
        "--nproc_per_node=1",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint=127.0.0.1:{free_port()}",
        "--rdzv-id=blind",
    ]
    explicit = ["--resume", f"runs/{straight.name}"]
    procs = [start_forked(ours(ENVPOOL, explicit, nodes), cwd) for cwd in (sees, blind)]
    started = time.time()
    done = [finish_script(p, timeout=120) for p in procs]
    assert time.time() - started < 60
    assert [node.returncode for node in done] == [2, 2], describe(done[0]) + describe(done[1])
    assert "no such run folder" in last_line(done[1]), describe(done[1])
    assert last_line(done[0]).endswith("stopped before joining (it says why)"), describe(done[0])


@pytest.mark.slow
def test_a_rank_killed_with_9_ends_the_others_with_one_line_and_resume_auto_continues(tmp_path):
    """Rank 0, the one that writes, killed with -9 right after a checkpoint (within the next
    one's write, at times): rank 1 says so in one line, and records the stop in config.json,
    which only rank 0 did (the report called the run still running)."""
    port = free_port()
    args = envpool_args(4)
    ranks = [
        start_forked(rank_command(ENVPOOL, args), tmp_path, rank_env(tmp_path, r, port))
        for r in (0, 1)
    ]
    wait_for("runs/*/checkpoint_0000002.ckpt", tmp_path, ranks[0])
    ranks[0].kill()
    killed_at = time.time()
    rank1 = finish_script(ranks[1], timeout=60)
    assert time.time() - killed_at < 30
    finish_script(ranks[0])
    lost = [line for line in rank1.stderr.splitlines() if "lost rank" in line]
    assert rank1.returncode == 1 and len(lost) == 1 and "lost rank 0 of 2" in lost[0], describe(
        rank1
    )
    assert lost[0].endswith("--resume runs/" + run_dirs(tmp_path)[0].name), lost[0]
    (run_dir,) = run_dirs(tmp_path)
    record = json.loads((run_dir / "config.json").read_text())
    assert record["stopped"]["signal"] == "the loss of rank 0", record
    assert read_checkpoint(list_checkpoints(run_dir)[0])["iteration"] == 2  # intact
    log = load_run(run_dir, running_minutes=10.0, now=time.time())
    assert log.status != "running", log.problems

    port = free_port()
    again = [
        start_forked(
            rank_command(ENVPOOL, [*args, "--resume", "auto"]),
            tmp_path,
            rank_env(tmp_path, r, port),
        )
        for r in (0, 1)
    ]
    done = [finish_script(p) for p in again]
    assert [d.returncode for d in done] == [0, 0], describe(done[0]) + describe(done[1])
    (run_dir,) = run_dirs(tmp_path)
    assert "resuming" in done[0].stdout
    steps = [s for s, _ in read_scalars(run_dir, files=None)["losses/value_loss"]]
    assert steps == [BATCH * i for i in range(1, 5)]


def test_bad_input_is_one_error_line_on_every_rank_before_any_env(tmp_path):
    cases = [
        (["--local-num-envs", "0"], {}, ["--local-num-envs"]),
        (["--num-minibatches", "3"], {}, ["--num-minibatches 3"]),
        (["--backend", "nccl"], {}, ["nccl", "no"]),
        (["--device-ids", "0"], {"LOCAL_WORLD_SIZE": "2", "WORLD_SIZE": "2"}, ["--device-ids"]),
        # (it was a traceback at the import of cleanrl_utils.distributed.lost_ranks)
        ([], {"WORLD_SIZE": "2", "CLEANRL_DIST_TIMEOUT_S": "abc"}, ["CLEANRL_DIST_TIMEOUT_S"]),
    ]
    started = [  # all at once: each is a process of its own
        (start_forked(rank_command(ENVPOOL, args), tmp_path, env_of(tmp_path, **extra)), words)
        for args, extra, words in cases
    ]
    for proc, words in started:
        assert_usage_error(finish_script(proc, timeout=120), tmp_path, words)


@pytest.mark.slow
def test_a_port_in_use_is_one_error_line_and_no_rank_waits_for_ever(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        extra = {"CLEANRL_DIST_TIMEOUT_S": "5"}
        ranks = [
            start_forked(
                rank_command(ENVPOOL, envpool_args(2)),
                tmp_path,
                rank_env(tmp_path, r, port, **extra),
            )
            for r in (0, 1)
        ]
        done = [finish_script(p, timeout=60) for p in ranks]
    for rank, proc in enumerate(done):
        assert_usage_error(proc, tmp_path, [f"rank {rank}"])
    assert "in use" in done[0].stderr


@pytest.mark.parametrize("progress", [True, False])
def test_the_multinode_template_requeues_a_failed_task_only_when_it_wrote_a_checkpoint(
    tmp_path, progress
):
    path = render_multinode(tmp_path, ["--total-timesteps", "64"])
    run_dir = tmp_path / "runs" / "Breakout-v5__ppo_atari_envpool_multigpu__1__1"
    run_dir.mkdir(parents=True)
    (run_dir / "checkpoint_0000002.ckpt").write_bytes(b"")
    newer = f"touch {run_dir}/checkpoint_0000004.ckpt; " if progress else ""
    # what torchrun does after SIGUSR1 (its ranks exit 75, it exits 1), one "node" at a time
    env = shims(tmp_path, f"{newer}exit 1")
    done = subprocess.run(
        ["bash", str(path)], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 1, done.stdout + done.stderr
    requeued = tmp_path / "requeued"
    assert (requeued.read_text() == "7_0\n") if progress else not requeued.exists()
