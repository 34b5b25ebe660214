"""The process pool's parts, used by the launcher's pool (`benchmark`) and the tuner's trials:
a job (one command line), started in a process group of its own; its group signalled and
stopped; how it ended (`Result`); the thread limits of its libraries; its log's last lines."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cleanrl_utils.console.errors import CANNOT_START
from cleanrl_utils.console.progress import format_seconds
from cleanrl_utils.files.run_names import file_name
from cleanrl_utils.files.sweeps import launcher_env

# the variables that size the thread pools of OpenMP (torch), MKL, OpenBLAS (numpy) and XLA (jax)
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "PJRT_NPROC")
LOG_TAIL_LINES = 20
POLL_S = 0.2
STOP_GRACE_S = 30.0  # after SIGTERM, how long a run may take to exit (to write its checkpoint)


def log_name(env_id: str, seed: int) -> str:
    """The log file of one env id and seed: `{env_id}__seed{seed}.log`, the id spelled as one
    file name of its own (`ALE/Breakout-v5`: `ALE+Breakout-v5__seed1.log`; see `file_name`)."""
    return f"{file_name(env_id)}__seed{seed}.log"


@dataclass(frozen=True)
class Job:
    """One command to run (a sweep's: the training command for one env id and seed, with
    `--env-id ENV_ID --seed SEED` in it), how the console names it and its log file's name in
    the local pool's log folder (by default from the env id and seed)."""

    env_id: str | None
    seed: int | None
    command: str
    name: str = ""
    log_name: str = ""

    def __post_init__(self):
        if not self.name:
            object.__setattr__(self, "name", f"{self.env_id} seed {self.seed}")
        if not self.log_name:
            object.__setattr__(self, "log_name", log_name(str(self.env_id), self.seed))

    @property
    def processes(self) -> int:
        """The processes the command starts: `torchrun --nproc-per-node N` (or `_`, `=N`; also
        `python -m cleanrl_utils.torchrun` and `python -m torch.distributed.run`) with
        `--nnodes 1` or none starts N (each counts as a worker of the pool), anything else one."""
        return command_processes(self.command)

    @classmethod
    def named(cls, command: str, name: str, log_name: str) -> Job:
        """A command of no sweep (no env id and seed of the launcher's)."""
        return cls(None, None, command, name, log_name)


def command_processes(command: str) -> int:
    """How many processes `command` runs at once on this machine: torchrun's `--nproc-per-node`
    (`--nproc_per_node`, either `N` or `=N`), 1 for any other command."""
    try:
        words = shlex.split(command)
    except ValueError:
        return 1
    launchers = ("torch.distributed.run", "cleanrl_utils.torchrun")
    if not any(os.path.basename(w) == "torchrun" or w in launchers for w in words):
        return 1
    for i, word in enumerate(words):
        name, _, value = word.partition("=")
        if name.replace("_", "-") == "--nproc-per-node":
            value = value or (words[i + 1] if i + 1 < len(words) else "")
            return int(value) if value.isdigit() and int(value) > 0 else 1
    return 1


@dataclass
class Result:
    """How a run ended: its exit code (negative: killed by that signal) and, for a SLURM task,
    its job state."""

    job: Job
    exit_code: int
    seconds: float | None = None
    log: Path | None = None
    slurm_state: str | None = None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and self.slurm_state in (None, "COMPLETED")

    def describe(self) -> str:
        how = f"exit code {self.exit_code}" if self.exit_code >= 0 else killed_by(-self.exit_code)
        if self.slurm_state not in (None, "COMPLETED", "FAILED"):
            how = f"{self.slurm_state}, {how}"
        if self.seconds is not None:
            how += f", after {format_seconds(self.seconds)}"
        return how


def killed_by(signum: int) -> str:
    try:
        return f"killed by {signal.Signals(signum).name}"
    except ValueError:  # a real-time signal has no name
        return f"killed by signal {signum}"


def log_tail(path: Path | None, lines: int = LOG_TAIL_LINES) -> str:
    if path is None or not path.exists():
        return "    (no log)"
    tail = path.read_text(errors="replace").splitlines()[-lines:]
    return "\n".join(f"    | {line}" for line in tail) or "    (empty log)"


# ---------------------------------------------------------------------------------------------
# Thread limits


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))  # respects taskset and cgroup cpusets
    except AttributeError:
        return os.cpu_count() or 1


def thread_limits(threads: int) -> dict[str, str]:
    return {name: str(threads) for name in THREAD_VARIABLES}


# ---------------------------------------------------------------------------------------------
# A job's process group: started, signalled, stopped


@dataclass
class Running:
    job: Job
    process: subprocess.Popen
    start: float
    log: Path


def start_job(job: Job, log: Path, env: Mapping[str, str]) -> Running | Result:
    """Start a run in its own process group, so that stopping it stops its children too. The run
    is told this process, its launcher (`cleanrl_utils.files.sweeps.launcher_env`): a run of
    `cleanrl/` stops with a checkpoint when this process is gone (killed outright, it could
    stop no run), instead of training on unsupervised. The log is appended to: the same command
    with the same log folder continues a stopped run, whose earlier lines stay."""
    with open(log, "ab") as out:
        try:
            process = subprocess.Popen(
                shlex.split(job.command),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**env, **launcher_env()},
                start_new_session=True,
            )
        except OSError as e:  # no such program: reported like a shell would
            out.write(f"cannot start {job.command!r}: {e}\n".encode())
            return Result(job, CANNOT_START, 0.0, log)
    return Running(job, process, time.monotonic(), log)


def signal_group(pid: int, signum: int) -> bool:
    """Sends `signum` to the process group of `pid` (a run and its children); SIGTERM is followed
    by SIGCONT, as `scancel` and systemd do, so that a suspended run (SIGSTOP, a SLURM suspend)
    handles it and writes its checkpoint instead of waiting frozen for the SIGKILL. False when
    the group is gone."""
    try:
        os.killpg(pid, signum)
        if signum == signal.SIGTERM:
            os.killpg(pid, signal.SIGCONT)
    except ProcessLookupError:
        return False
    return True


def stop_jobs(running: list[Running], grace_s: float | None = None) -> None:
    """SIGTERM every run's process group (and SIGCONT: see `signal_group`), then SIGKILL what is
    left after `grace_s` seconds (default `STOP_GRACE_S`)."""
    grace_s = STOP_GRACE_S if grace_s is None else grace_s
    for signum in (signal.SIGTERM, signal.SIGKILL):
        for r in running:
            signal_group(r.process.pid, signum)  # (False: the whole group has exited already)
        deadline = time.monotonic() + grace_s
        while any(r.process.poll() is None for r in running) and time.monotonic() < deadline:
            time.sleep(POLL_S)
        if all(r.process.poll() is not None for r in running):
            break
    for r in running:
        r.process.wait()
