# docs: docs/benchmark_launcher.md
"""Fan a training command out over env ids and seeds: a local pool of workers or a SLURM array.

    python -m cleanrl_utils.benchmark --env-ids Pong-v5 Breakout-v5 --num-seeds 3 --workers 2 \
        --command "python cleanrl/ppo_atari_envpool.py"

Every job (one run) is `COMMAND --env-id ENV_ID --seed SEED`, env-major: job i has
env_ids[i // num_seeds] and seed start_seed + i % num_seeds, the same order as the SLURM array's
task ids.

- `common`: the flags (`Args`), the sweep's jobs, how a run's end is reported, the W&B tag;
  a job, its process group, how it ended (`Result`) and the thread limits are the base module
  `cleanrl_utils.benchmark.pool`'s (the tuner's too), named here as well;
- `local`: the local pool, also as a function for other programs (`run_pool`);
- `slurm`: the SLURM array: the template, `sbatch`, `--slurm-wait`;
- `cli`: the command line (`main`).
"""

from cleanrl_utils.benchmark.cli import check_args, main
from cleanrl_utils.benchmark.common import (
    PROG,
    Args,
    autotag,
    env_id_problem,
    make_jobs,
    print_summary,
    report_failure,
    tagged_env,
)
from cleanrl_utils.benchmark.local import PoolResult, pool, run_local, run_pool
from cleanrl_utils.benchmark.pool import (
    LOG_TAIL_LINES,
    POLL_S,
    STOP_GRACE_S,
    THREAD_VARIABLES,
    Job,
    Result,
    Running,
    killed_by,
    log_name,
    log_tail,
    signal_group,
    start_job,
    stop_jobs,
    thread_limits,
    usable_cpus,
)
from cleanrl_utils.benchmark.slurm import (
    FINAL_STATES,
    NEEDS,
    PLACEHOLDER,
    SLURM_DIR,
    SLURM_LOGS,
    TaskState,
    local_command,
    log_pattern,
    no_slurm,
    parse_duration,
    query_array,
    remove_slurm_file,
    render_template,
    run_slurm,
    submit,
    template_values,
    wait_for_array,
    write_slurm_file,
)
from cleanrl_utils.console.errors import fail
from cleanrl_utils.console.signals import StopRequest

__all__ = [
    "FINAL_STATES", "LOG_TAIL_LINES", "NEEDS", "PLACEHOLDER", "POLL_S", "PROG",
    "SLURM_DIR", "SLURM_LOGS", "STOP_GRACE_S", "THREAD_VARIABLES", "Args", "Job",
    "PoolResult", "Result", "Running", "StopRequest", "TaskState", "autotag", "check_args",
    "env_id_problem", "fail", "killed_by", "log_name", "local_command", "log_pattern", "log_tail", "main", "make_jobs", "no_slurm",
    "parse_duration", "pool", "print_summary", "query_array", "remove_slurm_file",
    "render_template", "report_failure", "run_local", "run_pool", "run_slurm", "signal_group",
    "start_job",
    "stop_jobs", "submit", "tagged_env", "template_values", "thread_limits", "usable_cpus",
    "wait_for_array", "write_slurm_file",
]  # fmt: skip
