"""The benchmark launcher against a real single-node SLURM cluster (tests/slurm_cluster.py).

The module fixture installs Debian's SLURM and munge when they are missing (root, apt-get), starts
munged, slurmctld and slurmd on 127.0.0.1 from a temporary folder, and stops exactly those PIDs
at the end. If the cluster cannot be installed or started, these tests fail; they never skip.
The tests share one xdist worker and its cluster (one cluster, one install of SLURM).
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from logs_testing import read_scalars
from ports import free_port
from scripts_testing import run_dirs
from slurm_cluster import SlurmCluster

from cleanrl_utils.files.state_file import read_checkpoint
from cleanrl_utils.run.folder_guard import lock_holder

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group(__name__)]

REPO = Path(__file__).resolve().parent.parent
SMOKE_RUN = (
    f"{shlex.quote(sys.executable)} {REPO / 'cleanrl' / 'ppo_atari_envpool.py'} "
    "--num-envs 2 --num-steps 16 --num-minibatches 1 --update-epochs 1 --total-timesteps 32"
)
# a light stand-in for a script where the script is not what a test is about (requeues): the
# scripts' whole lifecycle (`Run`: the run folder, config.json, checkpoints, stop signals,
# `--resume`, the sweep) around iterations that only log their step, for a third of a script's
# start-up (no EnvPool)
SWEEP_RUN = f"{shlex.quote(sys.executable)} {REPO / 'tests' / 'sweep_run.py'}"
ENV_IDS = ["Breakout-v5", "Pong-v5"]
SEEDS = [1, 2]
# each template's env id x seed grid: the GPU template's every env id and seed (no other test
# submits it); the CPU template's, one seed of each env id (all of its grid is
# test_a_requeued_task_keeps_its_job_and_task_ids_and_gets_resume_auto's). The real script runs
# under the GPU template once, and under the CPU template, stopped and resumed, in
# test_a_signalled_task_is_requeued_and_resumes_from_its_checkpoint
TEMPLATE_SEEDS = {"gpu": SEEDS, "cpu": SEEDS[:1]}
TEMPLATE_FLAGS = {
    "gpu": [
        "--slurm-template-path", str(REPO / "benchmark" / "cleanrl_1gpu.slurm_template"),
        "--slurm-gpus-per-task", "1", "--slurm-ntasks", "1", "--slurm-total-cpus", "1",
    ],
    "cpu": [
        "--slurm-template-path", str(REPO / "benchmark" / "cleanrl_cpu.slurm_template"),
        "--slurm-ntasks", "1", "--slurm-total-cpus", "1",
    ],
}  # fmt: skip


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # 8 CPUs and 2 fake GPUs: the tests' jobs run side by side (the tasks ask for 1 CPU each),
    # and the published runs' 10 CPUs per task are still more than the node has
    with SlurmCluster(tmp_path_factory.mktemp("cluster"), cpus=8, gpus=2) as cluster:
        yield cluster


def python_command(code: str) -> str:
    """A `--command` that runs `code` with this interpreter (the launcher appends the env id and
    seed, which `code` sees in sys.argv)."""
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}"


def start_launcher(
    cluster: SlurmCluster, cwd: Path, *flags: str, env: dict | None = None
) -> subprocess.Popen:
    """`env`: variables added to the cluster's (sbatch hands them on to the job)."""
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [sys.executable, "-m", "cleanrl_utils.benchmark", "--no-auto-tag", "--slurm-wait", *flags],
        cwd=cwd,
        env=cluster.env | (env or {}),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finish(launcher: subprocess.Popen, cluster: SlurmCluster, timeout: float) -> str:
    try:
        output, _ = launcher.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        launcher.kill()
        output, _ = launcher.communicate()
        squeue = subprocess.run(
            ["squeue", "--states=all"], env=cluster.env, capture_output=True, text=True
        )
        pytest.fail(f"launcher still waiting after {timeout} s:\n{output}\n{squeue.stdout}")
    return output


def job_id(output: str) -> str:
    return re.search(r"^submitted job (\d+):", output, re.MULTILINE).group(1)


def test_gpu_and_cpu_templates_run_every_env_and_seed(cluster, tmp_path):
    """Each template's grid, task by task, with a command that prints the arguments it was
    given; and the real script under the GPU template (one task: the script's runs under the
    CPU template are the signalled task's test's)."""
    # the arrays at once, each from its own folder: runs/ and slurm/ land in the submission folder
    argv = python_command("import sys; print('args', *sys.argv[1:])")
    launchers = {
        name: start_launcher(
            cluster,
            tmp_path / name,
            "--env-ids",
            *ENV_IDS,
            "--num-seeds",
            str(len(TEMPLATE_SEEDS[name])),
            "--workers",
            "2",
            "--command",
            argv,
            *flags,
        )  # fmt: skip
        for name, flags in TEMPLATE_FLAGS.items()
    }
    script = start_launcher(
        cluster, tmp_path / "script", "--env-ids", ENV_IDS[0], "--num-seeds", "1",
        "--workers", "1", "--command", SMOKE_RUN, *TEMPLATE_FLAGS["gpu"],
    )  # fmt: skip
    outputs = {name: finish(launcher, cluster, timeout=240) for name, launcher in launchers.items()}
    script_output = finish(script, cluster, timeout=240)
    assert script.returncode == 0, f"the script:\n{script_output}\n{cluster.log_tail()}"
    assert "1 of 1 runs succeeded" in script_output
    assert f"[done]   {ENV_IDS[0]} seed 1" in script_output
    (run_dir,) = (tmp_path / "script" / "runs").glob(f"{ENV_IDS[0]}__ppo_atari_envpool__1__*")
    assert (run_dir / "config.json").exists()
    assert [s for s, _ in read_scalars(run_dir)["losses/value_loss"]] == [32]
    for name, output in outputs.items():
        assert launchers[name].returncode == 0, f"{name} template:\n{output}\n{cluster.log_tail()}"
        runs = len(ENV_IDS) * len(TEMPLATE_SEEDS[name])
        assert f"{runs} of {runs} runs succeeded" in output
        array_job = job_id(output)
        tasks = [(env_id, seed) for env_id in ENV_IDS for seed in TEMPLATE_SEEDS[name]]
        for task, (env_id, seed) in enumerate(tasks):
            assert f"[done]   {env_id} seed {seed}" in output
            # the task's own env id and seed, as the template picks them from its array task id
            (log,) = (tmp_path / name / "slurm" / "logs").glob(f"*_{array_job}_{task}.out")
            assert f"args --env-id {env_id} --seed {seed}\n" in log.read_text(), log.read_text()
        logs = sorted((tmp_path / name / "slurm" / "logs").glob("*.out"))
        assert len(logs) == runs
    # the GPU template asked for a GPU per task, and the scheduler granted it
    for output in (outputs["gpu"], script_output):
        assert "TresPerTask=gres:gpu:1" in scontrol_job(cluster, job_id(output))


JAX_SCRIPT = REPO / "cleanrl" / "ppo_atari_envpool_xla_jax_scan_multigpu.py"


def test_the_jax_multinode_template_runs_the_jax_script_as_two_processes(cluster, tmp_path):
    """`srun` starts the JAX script as 2 tasks on the one node (2 "hosts", one CPU device each);
    they meet through jax.distributed at the coordinator the template names, train one run
    whose envs are split over them, and process 0 alone writes it."""
    command = (
        f"{shlex.quote(sys.executable)} {JAX_SCRIPT} --num-envs 2 --num-steps 8 "
        "--num-minibatches 1 --update-epochs 1 --total-timesteps 32"
    )
    launcher = start_launcher(
        cluster, tmp_path, "--env-ids", "Breakout-v5", "--num-seeds", "1", "--workers", "1",
        "--command", command,
        "--slurm-template-path", str(REPO / "benchmark" / "cleanrl_multinode_jax.slurm_template"),
        "--slurm-nodes", "1", "--slurm-ntasks", "2", "--slurm-gpus-per-task", "1",
        "--slurm-total-cpus", "2",
        env={"JAX_COORDINATOR_PORT": str(free_port())},
    )  # fmt: skip
    output = finish(launcher, cluster, timeout=240)
    (log,) = (tmp_path / "slurm" / "logs").glob("*.out")
    assert launcher.returncode == 0, f"{output}\n{log.read_text()}\n{cluster.log_tail()}"
    assert "1 of 1 runs succeeded" in output
    assert "as 2 processes on 1 nodes (coordinator localhost:" in log.read_text()
    (run_dir,) = (tmp_path / "runs").glob("Breakout-v5__*__1__*")
    checkpoint = read_checkpoint(run_dir / "checkpoint_0000002.ckpt")
    assert checkpoint["world_size"] == 2
    assert [s for s, _ in read_scalars(run_dir)["losses/value_loss"]] == [16, 32]


def scontrol_job(cluster: SlurmCluster, job: str) -> str:
    return subprocess.run(
        ["scontrol", "--oneliner", "show", "job", job],
        env=cluster.env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def suspend_run(run_dir: Path) -> int:
    """SIGSTOP to the process training in `run_dir` (the holder of its folder's lock): it uses
    no CPU until the test sends SIGCONT, and a stop signal sent meanwhile waits for that."""
    pid = lock_holder(run_dir.stat().st_ino)
    assert pid != "unknown", f"no process holds {run_dir}"
    os.kill(int(pid), signal.SIGSTOP)
    return int(pid)


def test_a_failing_task_is_reported_as_failed(cluster, tmp_path):
    code = (
        "import sys\n"
        "print('boom on seed', sys.argv[-1], file=sys.stderr)\n"
        "sys.exit(3 if sys.argv[-1] == '2' else 0)\n"
    )
    launcher = start_launcher(
        cluster, tmp_path,
        "--env-ids", "Breakout-v5", "--num-seeds", "3", "--workers", "3",
        "--command", python_command(code), *TEMPLATE_FLAGS["cpu"],
    )  # fmt: skip
    output = finish(launcher, cluster, timeout=60)
    assert launcher.returncode == 1, output
    failure = re.search(r"\[FAILED\] Breakout-v5 seed 2: exit code 3.*\n((?:    \|.*\n)+)", output)
    assert failure, output
    assert "    | boom on seed 2\n" in failure.group(1)
    assert "2 of 3 runs succeeded" in output
    assert re.search(r"FAILED  Breakout-v5 seed 2: exit code 3", output)
    # SLURM itself agrees
    states = dict(
        re.findall(r"ArrayTaskId=(\d+) .*?JobState=(\w+)", scontrol_job(cluster, job_id(output)))
    )
    assert states == {"0": "COMPLETED", "1": "FAILED", "2": "COMPLETED"}


def test_a_signalled_task_is_requeued_and_resumes_from_its_checkpoint(cluster, tmp_path):
    """SIGUSR1 (what `--signal=USR1@120` sends before the time limit) makes the run write a
    checkpoint and exit with 75; the template requeues the task, which resumes and finishes.
    The run is suspended from its first checkpoint until it has the signal: it is still training
    then however busy the machine is, and its budget need not outlast the test's steps."""
    iterations = 16
    command = (
        f"{shlex.quote(sys.executable)} {REPO / 'cleanrl' / 'ppo_atari_envpool.py'} "
        f"--num-envs 2 --num-steps 16 --num-minibatches 2 --update-epochs 1 "
        f"--total-timesteps {iterations * 32} --checkpoint-every 4"
    )
    launcher = start_launcher(
        cluster, tmp_path,
        "--env-ids", "Breakout-v5", "--num-seeds", "1", "--workers", "1", "--command", command,
        *TEMPLATE_FLAGS["cpu"],
    )  # fmt: skip
    deadline = time.time() + 180
    while not (checkpoints := list(tmp_path.glob("runs/*/checkpoint_0000004.ckpt"))):
        if launcher.poll() is not None or time.time() > deadline:
            pytest.fail(f"no checkpoint at iteration 4:\n{finish(launcher, cluster, 1)}")
        time.sleep(0.1)
    pid = suspend_run(checkpoints[0].parent)
    queue = subprocess.run(
        ["squeue", "--noheader", "--states=R", "--format=%i %Z"],
        env=cluster.env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    # the other tests' jobs run beside this one: this test's job is the one started in tmp_path
    running = [
        line.split()[0] for line in queue.splitlines() if line.split()[1:] == [str(tmp_path)]
    ]
    assert len(running) == 1, queue
    subprocess.run(["scancel", "--signal=USR1", running[0]], env=cluster.env, check=True)
    os.kill(pid, signal.SIGCONT)  # (SIGUSR1 waits for it)
    output = finish(launcher, cluster, timeout=240)
    assert launcher.returncode == 0, f"{output}\n{cluster.log_tail()}"
    assert "[requeued] Breakout-v5 seed 1" in output and "1 of 1 runs succeeded" in output
    (log,) = (tmp_path / "slurm" / "logs").glob("*.out")
    text = log.read_text()  # --open-mode=append: both attempts
    assert "received SIGUSR1" in text and "exiting with code 75" in text, text
    assert "resuming Breakout-v5__ppo_atari_envpool__1__" in text, text
    (run_dir,) = run_dirs(tmp_path)  # (not the sweep's hidden claims)
    steps = [step for step, _ in read_scalars(run_dir, files=2)["losses/value_loss"]]
    assert steps == [32 * i for i in range(1, iterations + 1)]
    assert (run_dir / f"checkpoint_{iterations:07d}.ckpt").exists()


def test_a_rejected_submission_leaves_nothing_behind(cluster, tmp_path):
    """The published runs' request (10 CPUs per task) on the 4-CPU node: sbatch refuses it, and
    the launcher removes the file it rendered and the folders it made for it."""
    flags = [
        "--env-ids", "Pong-v5", "Breakout-v5", "--num-seeds", "3", "--workers", "6",
        "--command", SMOKE_RUN, "--no-auto-tag",
        "--slurm-template-path", str(REPO / "benchmark" / "cleanrl_1gpu.slurm_template"),
        "--slurm-gpus-per-task", "1", "--slurm-ntasks", "1", "--slurm-total-cpus", "10",
    ]  # fmt: skip
    old_log = tmp_path / "earlier" / "slurm" / "logs" / "cleanrl_1_0.out"
    old_log.parent.mkdir(parents=True)
    old_log.write_text("an earlier job's log\n")
    for cwd in (tmp_path / "fresh", tmp_path / "earlier"):
        cwd.mkdir(exist_ok=True)
        result = subprocess.run(
            [sys.executable, "-m", "cleanrl_utils.benchmark", *flags],
            cwd=cwd, env=cluster.env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert result.returncode == 1, result.stdout + result.stderr
        assert list(cwd.rglob("*.slurm")) == [], result.stdout  # rendered, then removed
        assert re.match(
            r"error: sbatch rejected slurm/[-0-9a-f]+\.slurm \(exit code 1; nothing submitted, "
            r"the file removed\): sbatch: error: ",
            result.stderr,
        ), result.stderr
        assert "Requested node configuration is not available" in result.stderr
    assert list((tmp_path / "fresh").iterdir()) == []  # no slurm/, no slurm/logs/
    assert [p for p in (tmp_path / "earlier").rglob("*") if p.is_file()] == [old_log]


def test_a_requeued_task_keeps_its_job_and_task_ids_and_gets_resume_auto(cluster, tmp_path):
    """What `--resume auto` needs to find a task's own run: the command the templates start sees
    the same SLURM_ARRAY_JOB_ID, SLURM_ARRAY_TASK_ID and SLURM_JOB_ID after a requeue, and
    `--resume auto` on its command line. Each task exits with 75 (a stop signal's checkpoint)
    the first time, so the template requeues it. The tasks of 2 env ids x 2 seeds: each task's
    own env id and seed, as the CPU template picks them from its array task id."""
    code = (
        "import os, sys\n"
        "names = 'SLURM_ARRAY_JOB_ID SLURM_ARRAY_TASK_ID SLURM_JOB_ID SLURM_RESTART_COUNT'\n"
        "print('ids', *(os.environ.get(n) for n in names.split()), *sys.argv[1:], flush=True)\n"
        "sys.exit(75 if os.environ.get('SLURM_RESTART_COUNT', '0') == '0' else 0)\n"
    )
    launcher = start_launcher(
        cluster, tmp_path,
        "--env-ids", *ENV_IDS, "--num-seeds", str(len(SEEDS)), "--workers", "4",
        "--command", python_command(code), *TEMPLATE_FLAGS["cpu"],
    )  # fmt: skip
    output = finish(launcher, cluster, timeout=120)
    assert launcher.returncode == 0, f"{output}\n{cluster.log_tail()}"
    assert "4 of 4 runs succeeded" in output
    array_job = job_id(output)
    tasks = [(env_id, seed) for env_id in ENV_IDS for seed in SEEDS]
    for task, (env_id, seed) in enumerate(tasks):
        (log,) = (tmp_path / "slurm" / "logs").glob(f"*_{array_job}_{task}.out")
        lines = [line.split() for line in log.read_text().splitlines() if line.startswith("ids ")]
        assert len(lines) == 2, log.read_text()  # --open-mode=append: both attempts
        (first, second) = lines
        array_id, task_id, job, _ = first[1:5]
        assert (array_id, task_id) == (array_job, str(task)) and job.isdigit()
        assert second[1:5] == [array_id, task_id, job, "1"]  # the same ids after the requeue
        assert first[5:] == ["--env-id", env_id, "--seed", str(seed)]
        assert second[5:] == ["--env-id", env_id, "--seed", str(seed), "--resume", "auto"]


def submit_array(cluster: SlurmCluster, cwd: Path, command: str, *flags: str) -> str:
    """Submit one array task of `command` on Breakout-v5 with seed 1; returns the job id."""
    result = subprocess.run(
        [
            sys.executable, "-m", "cleanrl_utils.benchmark", "--no-auto-tag",
            "--env-ids", "Breakout-v5", "--num-seeds", "1", "--workers", "1",
            "--command", command, *TEMPLATE_FLAGS["cpu"], *flags,
        ],
        cwd=cwd, env=cluster.env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return job_id(result.stdout)


def wait_until(ready, what: str, cluster: SlurmCluster, timeout: float = 180):
    deadline = time.time() + timeout
    while not (found := ready()):
        if time.time() > deadline:
            queue = subprocess.run(
                ["squeue", "--states=all"], env=cluster.env, capture_output=True, text=True
            )
            pytest.fail(f"no {what} after {timeout} s:\n{queue.stdout}\n{cluster.log_tail()}")
        time.sleep(0.2)
    return found


def test_requeued_tasks_of_two_arrays_resume_their_own_runs(cluster, tmp_path):
    """Two array jobs in one folder with the same script, env id and seed (the same command
    submitted twice as two sweeps, `--sweep`; the same command as one sweep continues its runs
    instead), both stopped (SIGUSR1, as before a time limit) and requeued: each task resumes its
    own run, not the newest run of that env id and seed, which is the second job's. Each run is
    suspended from its first checkpoint until it has its signal (it trains on no CPU while the
    other job starts). The runs are the light stand-in's (tests/sweep_run.py: what resumes a run
    is `Run`'s, the scripts' own; the real script's resumption under SLURM is
    test_a_signalled_task_is_requeued_and_resumes_from_its_checkpoint's), each iteration 0.1 s
    while the file `slow` is in the submission folder."""
    (tmp_path / "slow").touch()
    # 10,000 iterations of 0.1 s: far longer than the test
    command = f"{SWEEP_RUN} --total-timesteps 80000 --checkpoint-every 5"

    def checkpointed() -> list[Path]:
        return sorted({p.parent for p in tmp_path.glob("runs/*/checkpoint_*.ckpt")})

    jobs, suspended = [], []
    try:
        jobs.append(submit_array(cluster, tmp_path, command))
        (first_run,) = wait_until(checkpointed, "checkpoint of the first job", cluster)
        suspended.append(suspend_run(first_run))
        jobs.append(submit_array(cluster, tmp_path, command, "--sweep", "the-second"))
        wait_until(lambda: len(checkpointed()) == 2, "checkpoint of the second job", cluster)
        (second_run,) = set(checkpointed()) - {first_run}
        suspended.append(suspend_run(second_run))
        for job in jobs:
            subprocess.run(["scancel", "--signal=USR1", job], env=cluster.env, check=True)
        for pid in suspended:
            os.kill(pid, signal.SIGCONT)  # (SIGUSR1 waits for it)
        logs = [tmp_path / "slurm" / "logs" / f"cleanrl_{job}_0.out" for job in jobs]
        resumed = wait_until(
            lambda: all("resuming " in log.read_text() for log in logs) and logs,
            "resumption of both tasks",
            cluster,
        )
        for log, own, other in zip(resumed, (first_run, second_run), (second_run, first_run)):
            text = log.read_text()
            assert "exiting with code 75" in text, text
            assert f"resuming {own.name} " in text and other.name not in text, text
    finally:
        for job in jobs:
            subprocess.run(["scancel", job], env=cluster.env)
