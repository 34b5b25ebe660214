"""Fan a training command out over env ids and seeds: a local pool of workers or a SLURM array.

The command line (`python -m cleanrl_utils.benchmark`): the flags checked, the commands printed,
then the local pool (`local.py`) or the SLURM array (`slurm.py`).
"""

from __future__ import annotations

import os
import shlex
import time
from pathlib import Path

from cleanrl_utils.benchmark.common import (
    PROG,
    Args,
    autotag,
    check_sweep_command,
    env_id_problem,
    make_jobs,
    print_summary,
    print_sweep_end,
    skip_finished,
    sweep_of,
    tagged_env,
)
from cleanrl_utils.benchmark.local import run_pool
from cleanrl_utils.benchmark.slurm import run_slurm
from cleanrl_utils.checks.args import parse_args
from cleanrl_utils.checks.paths import check_output_folder
from cleanrl_utils.console.errors import INTERRUPTED, entry_point, fail
from cleanrl_utils.files.sweeps import LAUNCHER_VARIABLE, SWEEP_VARIABLE, sweep_problem
from cleanrl_utils.report.atari5 import expand_env_ids


def expand_game_sets(args: Args) -> None:
    """Replaces each game set of --env-ids (`atari5`, `atari3-val`, `atari10`, `atari57`) by its
    games in the id style of the script in --command, and prints what it became."""
    try:
        args.env_ids, lines = expand_env_ids(args.env_ids, args.command)
    except ValueError as e:
        fail(str(e))
    for line in lines:
        print(line)


def check_args(args: Args) -> None:
    if not args.env_ids:
        fail("--env-ids needs at least one env id")
    repeated = sorted({e for e in args.env_ids if args.env_ids.count(e) > 1})
    if repeated:
        fail(f"--env-ids lists {', '.join(repeated)} more than once")
    for env_id in args.env_ids:
        if problem := env_id_problem(env_id):
            fail(f"--env-ids: {problem}")
    if not args.command.strip():
        fail("--command is empty")
    try:
        shlex.split(args.command)
    except ValueError as e:
        fail(f"--command {args.command!r} cannot be parsed: {e}")
    if args.num_seeds <= 0:
        fail(f"--num-seeds must be positive, got {args.num_seeds}")
    if args.workers < 0:
        fail(f"--workers must not be negative, got {args.workers}")
    for flag in ("threads_per_run", "slurm_gpus_per_task", "slurm_total_cpus", "slurm_nodes"):
        value = getattr(args, flag)
        if value is not None and value <= 0:
            fail(f"--{flag.replace('_', '-')} must be positive, got {value}")
    if args.slurm_ntasks <= 0:
        fail(f"--slurm-ntasks must be positive, got {args.slurm_ntasks}")
    if args.sweep is not None and (problem := sweep_problem(args.sweep)):
        fail(problem)


@entry_point()
def main(argv: list[str] | None = None) -> int:
    """The launcher; returns its exit code: 0; 1 when a run failed; 130 after Ctrl-C. Bad input
    exits with code 2 before anything runs or is submitted."""
    args = parse_args(Args, argv, prog=PROG, description=__doc__.split("\n\n")[0])
    expand_game_sets(args)
    check_args(args)
    log_dir = args.log_dir or Path("benchmark_logs") / time.strftime("%Y%m%d-%H%M%S")
    if args.slurm_template_path is None and args.workers > 0:
        check_output_folder(log_dir, "--log-dir")  # (exit code 74)
    jobs = make_jobs(args)

    sweep = sweep_of(args)
    check_sweep_command(args.command, sweep)  # (before anything runs: exit code 2)
    env = {**os.environ, SWEEP_VARIABLE: sweep}  # (each run records it, and goes on with it)
    # a pool started this launcher: its runs are told this one (the local pool), and a SLURM
    # task on another node could never see that process, so would stop at once
    env.pop(LAUNCHER_VARIABLE, None)
    if args.auto_tag:
        tag = autotag()
        env = tagged_env(env, tag)
        print(f"autotag: WANDB_TAGS={env['WANDB_TAGS']}" if tag else "autotag: no git tag found")

    print(f"sweep: {sweep} (each run records it; this command again continues its runs)")
    print("======= commands to run:")
    print("\n".join(job.command for job in jobs), flush=True)

    if args.slurm_template_path is not None:
        return run_slurm(args, jobs, env)
    if args.workers == 0:
        print("not running the commands: --workers is 0")
        return 0
    jobs = skip_finished(jobs, sweep)  # (a stopped run goes on: the script finds it)
    if not jobs:
        print("======= every run of this sweep has finished: nothing to do")
        print_sweep_end(sweep)
        return 0
    pool = run_pool(jobs, args.workers, log_dir, threads_per_run=args.threads_per_run, env=env)
    code = INTERRUPTED if pool.interrupted else print_summary(pool.results)
    if pool.interrupted:
        print("the same command continues the sweep: its stopped runs go on, none twice")
    # (a result of None: a job the stop came before)
    succeeded = any(result is not None and result.ok for result in pool.results)
    print_sweep_end(sweep, succeeded=succeeded)
    return code
