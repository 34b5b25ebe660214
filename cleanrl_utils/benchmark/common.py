"""What the local pool and the SLURM array share: the flags, the sweep's jobs and id, its runs
already finished, how a run's end is reported and the W&B tag. A job, its process and how it
ended are the base module `cleanrl_utils.benchmark.pool`'s."""

from __future__ import annotations

import re
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from cleanrl_utils.benchmark.pool import Job, Result, log_tail
from cleanrl_utils.console.errors import FAILED, RunError
from cleanrl_utils.envs import protocols
from cleanrl_utils.files.config import DERIVED_ARGS, FREE_ARGS, read_record
from cleanrl_utils.files.sweeps import launcher_sweep_id, recorded_sweep, report_command

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


# what the launcher gives each run itself, and what names the protocol rather than its settings
NOT_COMPARED = FREE_ARGS | DERIVED_ARGS | {"env_id", "seed", "protocol"}


def command_flags(command: str) -> dict[str, list[str]]:
    """The flags `command` gives, as the shell splits it: each flag's name spelled as a field
    (`--learning-rate` and `--learning_rate`: `learning_rate`) and the words after it up to the
    next flag (`--flag=value`: that value; none: a switch). A flag given twice: its last."""
    flags, name = {}, None
    for word in shlex.split(command):
        if word.startswith("--") and len(word) > 2:
            name, eq, value = word[2:].partition("=")
            name = name.replace("-", "_")
            flags[name] = [value] if eq else []
            name = None if eq else name
        elif name is not None:
            flags[name].append(word)
    return flags


def _given(words: list[str], recorded):
    """`words` (a flag's values) as the type of the `recorded` value, or a `str` for a value
    that cannot be one (it differs)."""
    if isinstance(recorded, list):
        kind = recorded[0] if recorded else ""
        return [_given([w], kind) for w in words]
    text = " ".join(words)
    try:
        if isinstance(recorded, bool):
            return {"": True, "true": True, "false": False}[text.lower()]
        if isinstance(recorded, int):
            return int(text)
        if isinstance(recorded, float):
            return float(text)
    except (KeyError, ValueError):
        return text
    return None if recorded is None and text == "None" else text


def command_differences(command: str, recorded: dict) -> list[str]:
    """How the experiment arguments `command` gives differ from `recorded` (a run's config.json
    `args`): `--flag VALUE (the run: VALUE)`, for each flag the command gives whose value is not
    the recorded one (`--no-flag` for a switch; `--protocol NAME`: its five settings). A flag
    the command leaves out is not compared: its default is the script's, which the launcher does
    not import."""
    flags = command_flags(command)
    for name in list(flags):
        if name.startswith("no_") and name[3:] in recorded and isinstance(recorded[name[3:]], bool):
            flags[name[3:]] = ["false"]
    protocol = flags.get("protocol")
    if protocol and protocol[0] in protocols.NAMES:
        script = next((Path(w).stem for w in shlex.split(command) if w.endswith(".py")), None)
        for setting, value in protocols.named(protocol[0], None, script).items():
            flags.setdefault(
                setting, [str(value).lower() if isinstance(value, bool) else str(value)]
            )
    differences = []
    for name, words in flags.items():
        if name in NOT_COMPARED or name not in recorded:
            continue
        saved = recorded[name]
        value = _given(words, saved)
        if value == saved and isinstance(value, bool) == isinstance(saved, bool):
            continue
        shown = value if words or not isinstance(saved, bool) else True
        differences.append(f"{protocols.flag(name, shown)} (the run: {saved!r})")
    return differences


def check_sweep_command(command: str, sweep: str, runs_dir: Path = RUNS_DIR) -> None:
    """A run of `sweep` under `runs_dir` made with other experiment arguments than `command`
    gives (`command_differences`) is another experiment's: continuing or skipping it would mix
    two experiments in one sweep. One `error:` line naming them, exit code 2."""
    for config in sorted(Path(runs_dir).glob("*/config.json")):
        record, _ = read_record(config)
        args = (record or {}).get("args")
        if recorded_sweep(record) != sweep or not isinstance(args, dict):
            continue
        if differences := command_differences(command, args):
            raise RunError(
                f"sweep {sweep}: its run {config.parent} was made with other arguments than "
                f"this command gives: {'; '.join(differences)}. A sweep is one experiment: give "
                "this command another --sweep (or none: one derived from the command)"
            )


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
