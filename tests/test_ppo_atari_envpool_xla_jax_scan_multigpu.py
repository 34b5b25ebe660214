"""`cleanrl/ppo_atari_envpool_xla_jax_scan_multigpu.py`, the scan script on every JAX device, on
two CPU devices (`XLA_FLAGS=--xla_force_host_platform_device_count=2`): the same envs and seeds
give the same games and losses as the one-device script, to float rounding; it saves, evaluates
and resumes as its sibling does; envs or minibatches that do not split over the devices are one
`error:` line. On two processes of one CPU device each, meeting through `jax.distributed` on
loopback (`JAX_COORDINATOR_ADDRESS`, `JAX_NUM_PROCESSES`, `JAX_PROCESS_ID`): the losses of the
two devices of one process; process 0 alone writes; a stop signal to either stops both after one
iteration, with process 0's checkpoint, and both resume from it; a layout that cannot work is
one `error:` line. The runs are started together, once per module (the first JIT compile
dominates). One two-process run serves both of its tests: up to its stop it is the straight run
whose losses are compared, and its stop and resume are the stop test's (a process costs more CPU
than the 10 iterations of these sizes).
"""

from __future__ import annotations

import os
import re
import signal
import time
import types

import pytest
from logs_testing import read_scalars
from ports import free_port
from scripts_testing import (
    REPO_ROOT,
    ScriptProcess,
    assert_usage_error,
    describe,
    finish_script,
    module_runs,
    run_dirs,
    run_script,
    script_env,
    start_script,
)

from cleanrl_utils.console.errors import RunError
from cleanrl_utils.distributed.jax_processes import VARIABLES, JaxDistributed
from cleanrl_utils.files.state_file import list_checkpoints, read_checkpoint

pytestmark = [
    pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning"),
    pytest.mark.xdist_group(__name__),
]

ONE_DEVICE = REPO_ROOT / "cleanrl" / "ppo_atari_envpool_xla_jax_scan.py"
MULTI = REPO_ROOT / "cleanrl" / "ppo_atari_envpool_xla_jax_scan_multigpu.py"
# (added to the session's XLA flags: tests/conftest.py)
TWO_DEVICES = {
    "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=2"
}
# 10 iterations of 4 envs x 6 steps, 2 epochs of 2 minibatches: each device holds 2 envs and
# computes 6 of each minibatch's 12 transitions; games cut at 8 steps: every env ends some. 10,
# not fewer: the two processes are stopped after their checkpoint of iteration 2 and must still
# be short of the end then (the two-process run is stopped and resumed; the runs it is compared
# with have its sizes, learning-rate schedule included)
SMALL = "--num-envs 4 --num-steps 6 --update-epochs 2 --num-minibatches 2 --total-timesteps 240"
SMALL += " --seed 3 --checkpoint-every 2 --max-episode-steps 8"
STEPS = [24 * i for i in range(1, 11)]  # the steps that end the iterations
# the runs' values are compared over the first 3 iterations: later, float rounding compounds
# past the tolerance in the values near 0 (explained variance: 1.7e-6 apart at iteration 6)
COMPARED = STEPS[:3]
RUNS = {
    "one_device": (ONE_DEVICE, SMALL.split()),
    "two_devices": (MULTI, f"{SMALL} --save-model --eval-episodes 1".split(), TWO_DEVICES),
}


def run(args, cwd, **kw):
    """The script on two devices, to its end."""
    return run_script(args, cwd, script=MULTI, env=script_env(cwd, **TWO_DEVICES), **kw)


@pytest.fixture(scope="module", autouse=True)
def runs(request, tmp_path_factory):
    yield from module_runs(request, tmp_path_factory, RUNS, check=True)


@pytest.fixture(scope="module")
def one_device(runs) -> ScriptProcess:
    return runs["one_device"]


@pytest.fixture(scope="module")
def two_devices(runs) -> ScriptProcess:
    return runs["two_devices"]


@pytest.mark.slow
def test_two_devices_play_the_same_games_and_log_the_losses_of_one(one_device, two_devices):
    """Each device's EnvPool holds the one-device pool's envs (seeds included) and draws their
    rows of its action noise; each computes its share of the one-device minibatch: every
    iteration's update is the one-device update, so the later iterations' rollouts are too
    (compared over the first 3 iterations, their games too)."""
    a, b = one_device.scalars, two_devices.scalars
    losses = sorted(tag for tag in a if tag.startswith("losses/"))
    assert len(losses) == 8 and sorted(t for t in b if t.startswith("losses/")) == losses
    for tag in [*losses, "charts/learning_rate"]:
        assert [s for s, _ in b[tag]] == [s for s, _ in a[tag]] == STEPS, tag
        for (_, x), (_, y) in zip(a[tag][: len(COMPARED)], b[tag][: len(COMPARED)]):
            assert y == pytest.approx(x, rel=1e-4, abs=1e-6), (tag, a[tag], b[tag])
    returns = [[g for g in run["charts/episodic_return"] if g[0] <= COMPARED[-1]] for run in (a, b)]
    assert returns[0] == returns[1], returns


class Processes:
    """The script as `n` processes of one CPU device each, in one folder, meeting through
    `jax.distributed` on a loopback port (a launch by hand: the variables each process gets)."""

    def __init__(self, cwd, args, n=2, own_args=None):
        """`own_args`: each process's arguments after `args`."""
        address = f"127.0.0.1:{free_port()}"
        self.cwd = cwd
        self.popens = [
            start_script(
                [*args, *(own_args[i] if own_args else [])],
                cwd,
                script=MULTI,
                env=script_env(
                    cwd,
                    JAX_COORDINATOR_ADDRESS=address,
                    JAX_NUM_PROCESSES=str(n),
                    JAX_PROCESS_ID=str(i),
                ),
            )
            for i in range(n)
        ]
        self._procs = None

    @property
    def procs(self):
        if self._procs is None:
            self._procs = [finish_script(p, timeout=300) for p in self.popens]
        return self._procs

    def stop(self):
        for p in self.popens:
            if p.poll() is None:
                p.kill()
        self.procs  # noqa: B018


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory):
    """The two-device run's training on two processes (no model saved: process 0 alone would),
    stopped by a SIGTERM to process 1 once process 0 has written its checkpoint of iteration 2:
    `stopped`, the two processes' ends, and `scalars`, what the run logged up to its stop (read
    before anything resumes it: the resumed run's games are new ones). The stop test resumes it."""
    cwd = tmp_path_factory.mktemp("two_processes")
    processes = Processes(cwd, SMALL.split())
    try:
        deadline = time.time() + 240
        while not list(cwd.glob("runs/*/checkpoint_*.ckpt")):  # (the first: iteration 2's)
            assert time.time() < deadline and processes.popens[0].poll() is None
            time.sleep(0.05)
        processes.popens[1].send_signal(signal.SIGTERM)
        stopped = processes.procs
    finally:
        processes.stop()
    dirs = run_dirs(cwd)  # (the tests say what went wrong when there is not one)
    scalars = read_scalars(dirs[0]) if len(dirs) == 1 else None
    yield types.SimpleNamespace(cwd=cwd, stopped=stopped, scalars=scalars)


@pytest.mark.slow
def test_two_processes_log_the_losses_of_two_devices_in_one_and_process_0_alone_writes(
    two_processes, two_devices
):
    """Each process steps its device's envs (seeded as in one process: env i, seed + i); the
    update's sums go over both processes' devices (gloo on CPUs): the same games and losses in
    the first 3 iterations, all before the stop (the signal came after iteration 2's checkpoint;
    the iteration it came in logs all it logs before it stops)."""
    procs = two_processes.stopped
    assert [p.returncode for p in procs] == [75, 75], describe(procs[0]) + describe(procs[1])
    (run_dir,) = run_dirs(two_processes.cwd)  # one folder, named by process 0
    a, b = two_devices.scalars, two_processes.scalars
    last = b["losses/value_loss"][-1][0]  # the step of the stop's iteration
    assert last >= COMPARED[-1], b["losses/value_loss"]
    for tag in [t for t in a if t.startswith("losses/")] + ["charts/learning_rate"]:
        assert [s for s, _ in b[tag]] == [s for s in STEPS if s <= last], tag
        for (_, x), (_, y) in zip(a[tag][: len(COMPARED)], b[tag][: len(COMPARED)]):
            assert y == pytest.approx(x, rel=1e-4, abs=1e-6), (tag, a[tag], b[tag])
    games = [[g for g in run["charts/episodic_length"] if g[0] <= COMPARED[-1]] for run in (a, b)]
    assert games[0] == games[1]  # both processes' games
    assert len(games[1]) == 8  # 4 envs x 2 games (18 steps, cut at 8)
    checkpoint = read_checkpoint(list_checkpoints(run_dir)[-1])  # (the stop's or an older one)
    assert checkpoint["world_size"] == 2 and len(checkpoint["ranks_rng"]) == 2
    assert "logging to" not in procs[1].stdout  # (its lines would repeat 0's)


@pytest.mark.slow
def test_two_devices_save_the_model_and_evaluate_it(two_devices):
    name = "ppo_atari_envpool_xla_jax_scan_multigpu"
    assert re.fullmatch(rf"Breakout-v5__{name}__3__\d+", two_devices.run_dir.name)
    assert (two_devices.run_dir / f"{name}.cleanrl_model").is_file()
    evals = two_devices.scalars.get("eval/episodic_return")
    assert evals is not None and [step for step, _ in evals] == [240], evals


@pytest.mark.slow
def test_two_devices_resume_from_a_checkpoint(two_devices):
    """From its checkpoint of iteration 8 the run carries on to iterations 9 and 10 on new games,
    with the learning rate of the run that went straight through."""
    checkpoint = two_devices.run_dir / "checkpoint_0000008.ckpt"
    straight = two_devices.scalars["charts/learning_rate"]
    proc = run(["--resume", str(checkpoint)], two_devices.cwd)
    assert proc.returncode == 0, describe(proc)
    assert "resum" in proc.stdout + proc.stderr
    resumed = read_scalars(two_devices.run_dir, files=None)["charts/learning_rate"]
    assert resumed == straight


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--num-envs", "3"], ["--num-envs 3", "2 devices", "multiple of 2"]),
        (  # a batch of 2 x 3, minibatches of 3
            ["--num-envs", "2", "--num-steps", "3", "--num-minibatches", "2"],
            ["minibatch size 3", "2 devices"],
        ),
    ],
    ids=["envs", "minibatch"],
)
def test_what_does_not_split_over_the_devices_is_one_error_line(tmp_path, args, expected):
    proc = run(args, tmp_path, timeout=120)
    assert_usage_error(proc, tmp_path, expected)


@pytest.mark.slow
def test_a_stop_signal_to_either_process_stops_both_after_one_iteration_and_they_resume(
    two_processes, two_devices
):
    """SIGTERM to process 1 (`two_processes`: after iteration 2's checkpoint): the processes
    agree on it at the iteration's end; process 0 writes the checkpoint; both exit with 75.
    Given `--resume`, both carry on to the end, with the learning rate of the run that went
    straight through."""
    procs = two_processes.stopped
    assert [p.returncode for p in procs] == [75, 75], describe(procs[0]) + describe(procs[1])
    (run_dir,) = run_dirs(two_processes.cwd)
    stopped = re.search(r"SIGTERM: checkpoint of iteration (\d+) written", procs[0].stderr)
    assert stopped, describe(procs[0])
    assert "checkpoint of iteration" not in procs[1].stderr  # (process 0 writes and says it)
    iteration = int(stopped.group(1))
    assert 3 <= iteration < 10 and list_checkpoints(run_dir)[0].name == (
        f"checkpoint_{iteration:07d}.ckpt"
    )
    resumed = Processes(two_processes.cwd, [*SMALL.split(), "--resume", str(run_dir)])
    try:
        procs = resumed.procs
    finally:
        resumed.stop()
    assert [p.returncode for p in procs] == [0, 0], describe(procs[0]) + describe(procs[1])
    scalars = read_scalars(run_dir, files=None)
    assert [s for s, _ in scalars["losses/value_loss"]] == STEPS
    # (files=None: the folder may hold the resume test's file too, with the same rates)
    straight = read_scalars(two_devices.run_dir, files=None)["charts/learning_rate"]
    assert scalars["charts/learning_rate"] == straight


LAYOUTS = {  # environment: what the one line names
    "no-coordinator": (
        dict(JAX_NUM_PROCESSES="2", JAX_PROCESS_ID="0"),
        ["no coordinator", "2 processes"],
    ),
    "srun-no-coordinator": (
        dict(SLURM_STEP_NUM_TASKS="2", SLURM_PROCID="1"),
        ["no coordinator", "SLURM"],
    ),
    "no-id": (
        dict(JAX_COORDINATOR_ADDRESS="127.0.0.1:1", JAX_NUM_PROCESSES="2"),
        ["JAX_PROCESS_ID not set"],
    ),
    "id-out-of-range": (
        dict(JAX_COORDINATOR_ADDRESS="127.0.0.1:1", JAX_NUM_PROCESSES="2", JAX_PROCESS_ID="2"),
        ["process id 2 of 2", "from 0 to 1"],
    ),
    "envs": (
        dict(JAX_COORDINATOR_ADDRESS="127.0.0.1:1", JAX_NUM_PROCESSES="3", JAX_PROCESS_ID="0"),
        ["--num-envs 4", "3 processes", "multiple of 3"],
    ),
}


@pytest.mark.parametrize(("variables", "expected"), LAYOUTS.values(), ids=list(LAYOUTS))
def test_a_process_layout_that_cannot_work_is_one_error_line(variables, expected, monkeypatch):
    """In process: the error the script's entry point says as its one line, with exit code 2
    (a script process stops on the first layout: the next test)."""
    for name in (*VARIABLES, "SLURM_STEP_NUM_TASKS", "SLURM_PROCID"):
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(RunError) as error:
        JaxDistributed(types.SimpleNamespace(num_envs=4))
    assert error.value.code == 2 and error.value.line.startswith("error: ")
    for word in expected:
        assert word in error.value.message


def test_the_script_stops_on_a_process_layout_that_cannot_work_with_one_error_line(tmp_path):
    variables, expected = LAYOUTS["no-coordinator"]
    env = script_env(tmp_path, **variables)
    proc = run_script(["--num-envs", "4"], tmp_path, script=MULTI, env=env, timeout=120)
    assert_usage_error(proc, tmp_path, expected)


def test_processes_that_disagree_on_the_arguments_stop_together_with_one_error_line(tmp_path):
    processes = Processes(
        tmp_path, ["--num-envs", "4"], own_args=[["--seed", "1"], ["--seed", "7"]]
    )
    for proc in processes.procs:
        assert_usage_error(proc, tmp_path, ["disagree on --seed", "1 on rank 0, 7 on rank 1"])
