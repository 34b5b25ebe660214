"""Tune a training script's flags with Optuna: trials on a local pool or a SLURM array, pruned
inside their runs, in a study that a rerun continues.

    python -m cleanrl_utils.tuner --script cleanrl/ppo_atari_envpool.py --env-ids Breakout-v5 \
        --param learning-rate=loguniform:1e-4:1e-3 --param num-minibatches=categorical:2,4,8 \
        --script-args="--total-timesteps 1000000" --num-trials 30 --workers 2

Every run is `python SCRIPT SCRIPT_ARGS TRIAL_FLAGS --env-id ENV_ID --seed SEED --exp-name
STUDY-trialN` (an ordinary run under runs/, its config.json tagged with the study and trial).
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from typing import Annotated, Literal

import tyro

from cleanrl_utils.checks.args import parse_args
from cleanrl_utils.console.errors import entry_point, fail
from cleanrl_utils.report.atari5 import expand_env_ids

PROG = "python -m cleanrl_utils.tuner"
# over games; or an Atari-5 model's estimate of the 57-game median (cleanrl_utils/report/atari5.py)
Aggregation = Literal["average", "median", "iqm", "max", "min", "atari3-val", "atari5", "atari10"]


@dataclass
class Args:
    script: str = "cleanrl/ppo_atari_envpool.py"
    """the training script to tune (a path); every flag is checked against its `Args` before any trial"""
    env_ids: list[str] = field(default_factory=lambda: ["Breakout-v5"])
    """the games every trial runs (`--env-id`); the objective aggregates over them; a game set (atari5, atari3-val, atari10, atari57) stands for its games in the script's id style"""
    param: Annotated[list[str], tyro.conf.UseAppendAction] = field(default_factory=list)
    """the search space, one `--param NAME=KIND:ARGS` per flag: uniform:LOW:HIGH, loguniform:LOW:HIGH, int:LOW:HIGH, logint:LOW:HIGH, categorical:A,B,C (e.g. learning-rate=loguniform:1e-5:1e-3)"""
    script_args: str = ""
    """fixed flags of every run, given with `=` (they start with dashes): --script-args="--total-timesteps 1000000 --num-envs 8" """
    num_trials: int = 20
    """the trials of the study, all tuners together (trials stopped by Ctrl-C are resumed, not counted)"""
    num_seeds: int = 1
    """the seeds of each trial, for every env id (`--seed` start-seed, start-seed + 1, ...)"""
    start_seed: int = 1
    """the first seed of every trial"""
    workers: int = 1
    """trials at once on this machine (in a SLURM array: in each task)"""
    threads_per_run: int | None = None
    """OMP, MKL, OpenBLAS and XLA threads of each run; None: usable CPUs // workers"""
    storage: str = "sqlite:///tuner.db"
    """where the study lives: an RDB URL (SQLite in this folder by default; postgresql://user:pw@host/db for a cluster), or a journal file (PATH.log or journal:PATH) on a shared filesystem"""
    study_name: str | None = None
    """the study; the same name and storage continue it; None: the script's name"""
    metric: str = "charts/episodic_return"
    """the TensorBoard tag the objective is read from"""
    metric_last_n_average_window: int = 50
    """a run's score: the mean of the metric's last this many values"""
    normalization: Literal["auto", "human", "none"] = "auto"
    """each game's score: auto and human: human-normalised, (score - random) / (human - random), with cleanrl_utils/data/atari_human_random_scores.csv (auto: raw for games not in it); none: raw"""
    aggregation: Aggregation = "average"
    """how the games' normalised scores of one seed are combined (the seeds are then averaged); atari3-val, atari5, atari10: that model's estimate of the 57-game median human-normalised score, in percent, from its games' means over seeds (Aitchison et al. 2023, docs/atari5.md; --env-ids must hold its games: tune on atari3-val, report on atari5)"""
    direction: Literal["maximize", "minimize"] = "maximize"
    """maximize or minimize the objective"""
    sampler: Literal["tpe", "random"] = "tpe"
    """Optuna's sampler: TPE (tree-structured Parzen estimator) or random search"""
    sampler_seed: int | None = None
    """the sampler's seed (the draws of a new study's first tuner; a continued study and the other tasks of a SLURM array draw anew, not the same parameters again); None: a random one"""
    pruner: Literal["median", "none"] = "median"
    """Optuna's pruner: median (stop a trial whose intermediate value is worse than the median of earlier trials at the same mark) or none"""
    pruning_marks: int = 10
    """intermediate values per run, at equal shares of its --total-timesteps; 0: none (no pruning)"""
    pruner_startup_trials: int = 5
    """the median pruner prunes nothing until this many trials have completed"""
    pruner_warmup_marks: int = 3
    """the median pruner prunes nothing before this many marks of a trial"""
    log_dir: str = "tuner_logs"
    """the runs' logs and the results (trials.md, trials.csv, trials.png) go under LOG_DIR/STUDY_NAME/"""

    # SLURM
    slurm_template_path: str | None = None
    """submit SLURM array tasks that are tuners sharing the study (this command without the --slurm-* flags) instead of tuning here; see benchmark/tuner_cpu.slurm_template"""
    slurm_tasks: int = 2
    """the array's tasks: the tuners sharing the study, each with --workers trials at once"""
    slurm_cpus_per_task: int | None = None
    """the CPUs of each task (`{{cpus_per_task}}`); None: --workers, one per run"""


SLURM_FLAGS = ("--slurm-template-path", "--slurm-tasks", "--slurm-cpus-per-task")


def worker_command(argv: list[str]) -> str:
    """This tuner's command line without its --slurm-* flags: what each array task runs."""
    rest, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg in SLURM_FLAGS:
            skip = True
        elif not arg.startswith(tuple(f"{flag}=" for flag in SLURM_FLAGS)):
            rest.append(arg)
    return shlex.join([sys.executable, "-m", "cleanrl_utils.tuner", *rest])


def submit_array(args: Args, argv: list[str]) -> int:
    """Renders the template (`{{array}}`, `{{command}}`, `{{cpus_per_task}}`) and submits it."""
    from cleanrl_utils.benchmark import render_template, submit, write_slurm_file

    if args.slurm_tasks <= 0:
        fail(f"--slurm-tasks must be positive, got {args.slurm_tasks}")
    cpus = args.slurm_cpus_per_task or args.workers
    if cpus <= 0:
        fail(f"--slurm-cpus-per-task must be positive, got {cpus}")
    values = {
        "array": f"0-{args.slurm_tasks - 1}",
        "command": worker_command(argv),
        "cpus_per_task": str(cpus),
    }
    text = render_template(args.slurm_template_path, values)
    path, created = write_slurm_file(text)
    job_id = submit(path, created, dict(os.environ))
    print(f"submitted job {job_id}: {args.slurm_tasks} tuners sharing the study, from {path}")
    print(f"  watch:   squeue --jobs {job_id}; the table: {args.log_dir}/<study>/trials.md")
    print(f"  cancel:  scancel {job_id}", flush=True)
    return 0


def make_tuner(args: Args):
    import optuna

    from cleanrl_utils.tuner.space import parse_space, space_params_fn
    from cleanrl_utils.tuner.study import Tuner

    if not args.param:
        fail(
            "no --param: every trial would run the script's defaults again; give the search "
            "space, one --param NAME=KIND:ARGS per flag (e.g. --param learning-rate=loguniform:1e-4:1e-3)"
        )
    params = parse_space(args.param)
    for name in ("num_trials", "num_seeds", "workers", "metric_last_n_average_window"):
        if getattr(args, name) <= 0:
            fail(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    if args.pruning_marks < 0 or args.pruner_startup_trials < 0 or args.pruner_warmup_marks < 0:
        fail(
            "--pruning-marks, --pruner-startup-trials and --pruner-warmup-marks must not be negative"
        )
    if args.threads_per_run is not None and args.threads_per_run <= 0:
        fail(f"--threads-per-run must be positive, got {args.threads_per_run}")
    try:
        args.env_ids, lines = expand_env_ids(args.env_ids, args.script)
    except ValueError as e:
        fail(str(e))
    for line in lines:
        print(line)
    if not args.env_ids:
        fail("--env-ids needs at least one env id")
    try:
        script_args = shlex.split(args.script_args)
    except ValueError as e:
        fail(f"--script-args {args.script_args!r} cannot be parsed: {e}")
    if args.sampler == "tpe":
        sampler = optuna.samplers.TPESampler(seed=args.sampler_seed)
    else:
        sampler = optuna.samplers.RandomSampler(seed=args.sampler_seed)
    if args.pruner == "median":
        pruner = optuna.pruners.MedianPruner(
            n_startup_trials=args.pruner_startup_trials, n_warmup_steps=args.pruner_warmup_marks
        )
    else:
        pruner = optuna.pruners.NopPruner()
    study_name = args.study_name or args.script.rstrip("/").rpartition("/")[2].removesuffix(".py")
    return Tuner(
        script=args.script,
        metric=args.metric,
        params_fn=space_params_fn(params),
        direction=args.direction,
        aggregation_type=args.aggregation,
        metric_last_n_average_window=args.metric_last_n_average_window,
        sampler=sampler,
        pruner=pruner,
        storage=args.storage,
        study_name=study_name,
        env_ids=args.env_ids,
        script_args=script_args,
        normalization=args.normalization,
        workers=args.workers,
        threads_per_run=args.threads_per_run,
        pruning_marks=args.pruning_marks,
        start_seed=args.start_seed,
        log_dir=args.log_dir,
    )


@entry_point()
def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(Args, argv, prog=PROG, description=__doc__.split("\n\n")[0])
    tuner = make_tuner(args)
    if args.slurm_template_path is not None:
        if shutil.which("sbatch") is None:
            fail(
                "no SLURM here (sbatch is not on the PATH): run the same command without --slurm-template-path"
            )
        tuner.check()  # everything the workers would refuse, before anything is submitted
        return submit_array(args, argv)
    tuner.tune(args.num_trials, args.num_seeds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
