"""What the local pool and the SLURM array share: the flags, the sweep's jobs and id, its runs
already finished, how a run's end is reported and the W&B tag. A job, its process and how it
ended are the base module `cleanrl_utils.pool`'s."""

from __future__ import annotations

import re
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from cleanrl_utils.exits import FAILED
from cleanrl_utils.folders import read_record
from cleanrl_utils.pool import Job, Result, log_tail
from cleanrl_utils.sweeps import launcher_sweep_id, recorded_sweep, report_command

PROG = "python -m cleanrl_utils.benchmark"  # how users type it, for --help and printed commands
# gymnasium's env id grammar, `[namespace/]name[-vN]` (EnvPool's ids are a subset): the ids a
# script could ever accept, whatever is installed; a name does not start with `.`
ENV_ID_SYNTAX = re.compile(r"(?:[\w:-]+/)?[\w:-][\w:.-]*")
MAX_ENV_ID = 100
RUNS_DIR = Path("runs")  # where the scripts write their runs (relative to the working folder)


def env_id_problem(env_id: str) -> str | None:
    """Why `env_id` can never be an environment's id, or None."""
    if len(env_id) > MAX_ENV_ID or not ENV_ID_SYNTAX.fullmatch(env_id):
        return (
            f"{env_id!r} can never be an env id: `[namespace/]name[-vN]`, letters, digits, "
            f"'_', ':', '-' and '.' (not first), at most {MAX_ENV_ID} characters"
        )
    return None


@dataclass
class Args:
    env_ids: list[str] = field(default_factory=lambda: ["Breakout-v5"])
    """the ids of the environments to run; `--env-id ENV_ID` is appended to the command; a game set (atari5, atari3-val, atari10, atari57) stands for its games in the script's id style (`-v5`, or `NoFrameskip-v4` for ppo_atari.py, ppo_atari_lstm.py, ppo_atari_multigpu.py)"""
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
    sweep: str | None = None
    """the sweep's id, recorded in each run's config.json (`--sweep ID` of the report); default: one derived from --command, --env-ids and the seeds, so that the same command again continues its sweep"""


def sweep_of(args: Args) -> str:
    """The sweep's id: `--sweep`, else derived from what defines the sweep."""
    seeds = range(args.start_seed, args.start_seed + args.num_seeds)
    return args.sweep or launcher_sweep_id(args.command, args.env_ids, seeds)


def finished_runs(runs_dir: Path, sweep: str) -> dict[tuple[str, int], Path]:
    """The runs of `sweep` under `runs_dir` whose config.json records them finished (their steps
    after training done), by env id and seed."""
    found = {}
    for config in sorted(Path(runs_dir).glob("*/config.json")):
        record, _ = read_record(config)
        args = (record or {}).get("args")
        if recorded_sweep(record) == sweep and record.get("finished") and isinstance(args, dict):
            found[str(args.get("env_id")), args.get("seed")] = config.parent
    return found


def skip_finished(jobs: list[Job], sweep: str, runs_dir: Path = RUNS_DIR) -> list[Job]:
    """The jobs whose run `sweep` has not finished under `runs_dir`; one line for each other."""
    done = finished_runs(runs_dir, sweep)
    for job in jobs:
        if (job.env_id, job.seed) in done:
            print(f"[skip]   {job.name}: finished in {done[job.env_id, job.seed]}/")
    return [job for job in jobs if (job.env_id, job.seed) not in done]


def print_sweep_end(sweep: str, runs_dir: Path = RUNS_DIR, succeeded: bool = True) -> None:
    """The launcher's last line: the report of exactly this sweep's runs; when none of its runs
    succeeded now (`succeeded` False) and none had finished before, that there is nothing to
    report (the report would find no finished run)."""
    if not succeeded and not finished_runs(runs_dir, sweep):
        print("no run of this sweep has finished: nothing to report yet", flush=True)
        return
    print(f"report of this sweep: {report_command(sweep, str(runs_dir))}", flush=True)


def make_jobs(args: Args) -> list[Job]:
    """Env-major: job i has env_ids[i // num_seeds] and seed start_seed + i % num_seeds, the
    order of the SLURM array's task ids."""
    seeds = range(args.start_seed, args.start_seed + args.num_seeds)
    return [
        Job(env_id, seed, f"{args.command} --env-id {shlex.quote(env_id)} --seed {seed}")
        for env_id in args.env_ids
        for seed in seeds
    ]


# ---------------------------------------------------------------------------------------------
# Run environment: W&B tags


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


# ---------------------------------------------------------------------------------------------
# Reporting, shared by the local pool and --slurm-wait


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
