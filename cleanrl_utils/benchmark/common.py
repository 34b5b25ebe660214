"""What the local pool and the SLURM array share: the flags, the jobs, how a run ended and how
that is reported, the thread limits and the W&B tag."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from cleanrl_utils.exits import FAILED
from cleanrl_utils.progress import format_seconds
from cleanrl_utils.runs import file_name

PROG = "python -m cleanrl_utils.benchmark"  # how users type it, for --help and printed commands
# the variables that size the thread pools of OpenMP (torch), MKL, OpenBLAS (numpy) and XLA (jax)
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "PJRT_NPROC")
LOG_TAIL_LINES = 20
# gymnasium's env id grammar, `[namespace/]name[-vN]` (EnvPool's ids are a subset): the ids a
# script could ever accept, whatever is installed; a name does not start with `.`
ENV_ID_SYNTAX = re.compile(r"(?:[\w:-]+/)?[\w:-][\w:.-]*")
MAX_ENV_ID = 100


def env_id_problem(env_id: str) -> str | None:
    """Why `env_id` can never be an environment's id, or None."""
    if len(env_id) > MAX_ENV_ID or not ENV_ID_SYNTAX.fullmatch(env_id):
        return (
            f"{env_id!r} can never be an env id: `[namespace/]name[-vN]`, letters, digits, "
            f"'_', ':', '-' and '.' (not first), at most {MAX_ENV_ID} characters"
        )
    return None


def log_name(env_id: str, seed: int) -> str:
    """The log file of one env id and seed: `{env_id}__seed{seed}.log`, the id spelled as one
    file name of its own (`ALE/Breakout-v5`: `ALE+Breakout-v5__seed1.log`; see `file_name`)."""
    return f"{file_name(env_id)}__seed{seed}.log"


@dataclass
class Args:
    env_ids: list[str] = field(default_factory=lambda: ["Breakout-v5"])
    """the ids of the environments to run; `--env-id ENV_ID` is appended to the command"""
    command: str = "python cleanrl/ppo_atari_envpool.py"
    """the command to run; `--env-id ENV_ID --seed SEED` is appended for every env id and seed"""
    num_seeds: int = 3
    """the number of seeds per env id"""
    start_seed: int = 1
    """the first seed; the seeds are start_seed, start_seed + 1, ..."""
    workers: int = 0
    """runs at once (local pool; the SLURM array's `%` limit); 0: only print the commands"""
    auto_tag: bool = True
    """add the git tag or commit of the current folder to WANDB_TAGS (read locally, no network)"""
    log_dir: str | None = None
    """the folder for the local pool's logs, one per run; default `benchmark_logs/{date-time}`"""
    threads_per_run: int | None = None
    """OMP, MKL, OpenBLAS and XLA threads of each local run; default: usable CPUs // workers"""

    # SLURM
    slurm_template_path: str | None = None
    """a SLURM template (see `benchmark/`): submit the runs as an array instead of running them here"""
    slurm_gpus_per_task: int | None = None
    """the GPUs of each array task (`{{gpus_per_task}}`)"""
    slurm_ntasks: int = 1
    """the tasks of each array task (`{{ntasks}}`); each one runs the command"""
    slurm_total_cpus: int | None = None
    """the CPUs of each array task, spread over its GPUs or tasks (`{{cpus_per_gpu}}`, `{{cpus_per_task}}`)"""
    slurm_nodes: int | None = None
    """the nodes of each array task (`{{nodes}}` becomes `#SBATCH --nodes=N`; nothing when unset)"""
    slurm_wait: bool = False
    """wait for the array to finish and report each task's state and exit code, as the local pool does"""


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


def make_jobs(args: Args) -> list[Job]:
    """Env-major: job i has env_ids[i // num_seeds] and seed start_seed + i % num_seeds, the
    order of the SLURM array's task ids."""
    seeds = range(args.start_seed, args.start_seed + args.num_seeds)
    return [
        Job(env_id, seed, f"{args.command} --env-id {shlex.quote(env_id)} --seed {seed}")
        for env_id in args.env_ids
        for seed in seeds
    ]


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


# ---------------------------------------------------------------------------------------------
# Run environment: W&B tags and thread limits


def autotag(cwd: str | None = None, timeout_s: float = 5.0) -> str | None:
    """The git tag or commit of the code in `cwd`, from the local repository only.

    No git, no repository or a git that hangs all mean "no tag": the runs go ahead untagged.
    """
    try:
        out = subprocess.run(
            ["git", "describe", "--tags", "--always"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def tagged_env(env: dict, tag: str | None) -> dict:
    """`env` with `tag` added to the comma-separated WANDB_TAGS, keeping the tags already there."""
    if tag is None:
        return dict(env)
    tags = [t for t in env.get("WANDB_TAGS", "").split(",") if t]
    return {**env, "WANDB_TAGS": ",".join([*tags, tag])}


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))  # respects taskset and cgroup cpusets
    except AttributeError:
        return os.cpu_count() or 1


def thread_limits(threads: int) -> dict[str, str]:
    return {name: str(threads) for name in THREAD_VARIABLES}


# ---------------------------------------------------------------------------------------------
# Reporting, shared by the local pool and --slurm-wait


def log_tail(path: Path | None, lines: int = LOG_TAIL_LINES) -> str:
    if path is None or not path.exists():
        return "    (no log)"
    tail = path.read_text(errors="replace").splitlines()[-lines:]
    return "\n".join(f"    | {line}" for line in tail) or "    (empty log)"


def report_failure(result: Result) -> None:
    print(
        f"[FAILED] {result.job.name}: {result.describe()}; last lines of {result.log}:\n"
        f"{log_tail(result.log)}",
        flush=True,
    )


def print_summary(results: list[Result]) -> int:
    """Print one line per run; returns the launcher's exit code (1 when any run failed)."""
    failed = [r for r in results if not r.ok]
    print(f"======= {len(results) - len(failed)} of {len(results)} runs succeeded")
    for r in results:
        print(f"  {'ok    ' if r.ok else 'FAILED'}  {r.job.name}: {r.describe()}  log: {r.log}")
    return FAILED if failed else 0
