"""The SLURM array: the template rendered into `slurm/{uuid}.slurm`, submitted with `sbatch`, and
with `--slurm-wait` followed until every task has ended, reported as the local pool reports."""

from __future__ import annotations

import math
import re
import shlex
import shutil
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from cleanrl_utils.benchmark.common import (
    PROG,
    Args,
    print_summary,
    print_sweep_end,
    report_failure,
    sweep_of,
)
from cleanrl_utils.benchmark.pool import Job, Result, thread_limits
from cleanrl_utils.console.errors import FAILED, INTERRUPTED, fail
from cleanrl_utils.console.progress import format_seconds
from cleanrl_utils.console.signals import StopRequest

PLACEHOLDER = re.compile(r"{{(.*?)}}")


def template_values(args: Args, jobs: list[Job]) -> dict[str, str | None]:
    """Every placeholder a template may use; None where the flag that sets it was not given."""
    gpus, ntasks, cpus = args.slurm_gpus_per_task, args.slurm_ntasks, args.slurm_total_cpus
    cpus_per_task = math.ceil(cpus / ntasks) if cpus else None
    limit = f"%{args.workers}" if args.workers > 0 else ""  # %0 would be rejected by sbatch
    return {
        "array": f"0-{len(jobs) - 1}{limit}",
        "env_ids": "(" + " ".join(shlex.quote(e) for e in args.env_ids) + ")",
        "seeds": "(" + " ".join(str(args.start_seed + i) for i in range(args.num_seeds)) + ")",
        "len_seeds": str(args.num_seeds),
        "command": args.command,
        "gpus_per_task": str(gpus) if gpus else None,
        "cpus_per_gpu": str(math.ceil(cpus / (gpus * ntasks))) if cpus and gpus else None,
        "cpus_per_task": str(cpus_per_task) if cpus_per_task else None,
        "ntasks": str(ntasks),
        "nodes": f"#SBATCH --nodes={args.slurm_nodes}" if args.slurm_nodes else "",
        "thread_limits": (
            "export " + " ".join(f"{k}={v}" for k, v in thread_limits(cpus_per_task).items())
            if cpus_per_task
            else None
        ),
        "sweep": sweep_of(args),  # (exported to the runs: see `cleanrl_utils.files.sweeps`)
    }


# which flags a placeholder needs, for the error message when one is missing
NEEDS = {
    "gpus_per_task": "--slurm-gpus-per-task",
    "cpus_per_gpu": "--slurm-gpus-per-task and --slurm-total-cpus",
    "cpus_per_task": "--slurm-total-cpus",
    "thread_limits": "--slurm-total-cpus",
}


def render_template(path: str, values: dict[str, str | None]) -> str:
    """The template with every placeholder filled in; an unknown placeholder, a missing file or
    a value whose flag was not given stops the launcher before anything is written or submitted."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        fail(f"cannot read the SLURM template {path}: {e.strerror}")
    used = dict.fromkeys(PLACEHOLDER.findall(text))  # in order of appearance, without repeats
    unknown = [name for name in used if name not in values]
    if unknown:
        fail(
            f"{path}: unknown placeholder(s) {', '.join('{{' + n + '}}' for n in unknown)}; "
            f"known: {', '.join('{{' + n + '}}' for n in values)}"
        )
    for name in used:
        if values[name] is None:
            fail(f"{path} uses {{{{{name}}}}}: pass {NEEDS[name]}")
    return PLACEHOLDER.sub(lambda m: values[m.group(1)], text)


SLURM_DIR = Path("slurm")
SLURM_LOGS = SLURM_DIR / "logs"  # the templates in benchmark/ log there; sbatch does not create it


def write_slurm_file(text: str) -> tuple[Path, list[Path]]:
    """`slurm/{uuid}.slurm` and the log folder; returns the file and the folders it created."""
    created = [d for d in (SLURM_DIR, SLURM_LOGS) if not d.exists()]
    SLURM_LOGS.mkdir(parents=True, exist_ok=True)
    path = SLURM_DIR / f"{uuid.uuid4()}.slurm"
    path.write_text(text)
    return path, created


def submit(path: Path, created: list[Path], env: dict) -> str:
    """`sbatch` the file; returns the job id. A rejected (or interrupted) submission leaves
    nothing behind: the file and the folders made for it are removed."""
    try:
        result = subprocess.run(
            ["sbatch", "--parsable", str(path)], env=env, capture_output=True, text=True
        )
        if result.returncode:
            fail(
                f"sbatch rejected {path} (exit code {result.returncode}; nothing submitted, the "
                f"file removed): {result.stderr.strip()}",
                FAILED,
            )
    except BaseException:  # the error above, Ctrl-C, no sbatch after all
        remove_slurm_file(path, created)
        raise
    return result.stdout.strip().split(";")[0]  # `--parsable` prints `JOBID[;CLUSTER]`


def remove_slurm_file(path: Path, created: list[Path]) -> None:
    path.unlink(missing_ok=True)
    for folder in reversed(created):  # logs, then slurm/, if nothing else is in them
        try:
            folder.rmdir()
        except OSError:
            pass


def local_command(args: Args) -> str:
    """The launcher command that runs the same sweep on this machine: no `--slurm-*` flags."""
    flags = ["--env-ids", *args.env_ids, "--command", args.command]
    flags += ["--num-seeds", str(args.num_seeds)]
    if args.start_seed != Args.start_seed:
        flags += ["--start-seed", str(args.start_seed)]
    flags += ["--workers", str(args.workers)]
    if not args.auto_tag:
        flags.append("--no-auto-tag")
    if args.log_dir is not None:
        flags += ["--log-dir", args.log_dir]
    if args.threads_per_run is not None:
        flags += ["--threads-per-run", str(args.threads_per_run)]
    if args.sweep is not None:
        flags += ["--sweep", args.sweep]
    return " ".join([PROG, *map(shlex.quote, flags)])


def no_slurm(args: Args, jobs: list[Job]) -> NoReturn:
    """No `sbatch` here: one `error:` line, the local command of the same sweep, exit code 2."""
    fail(
        f"no SLURM here (sbatch is not on the PATH), nothing submitted; to run the same "
        f"{len(jobs)} runs on this machine (set --workers to the runs it can hold at once):\n"
        f"  {local_command(args)}"
    )


def log_pattern(text: str, job_id: str) -> str:
    """Where the array's logs go, from the template's --output directive."""
    output = re.search(r"^#SBATCH\s+--output[= ](\S+)", text, re.MULTILINE)
    name = re.search(r"^#SBATCH\s+--job-name[= ](\S+)", text, re.MULTILINE)
    if output is None:
        return f"slurm-{job_id}_*.out in the submission folder"  # sbatch's default for arrays
    pattern = output.group(1).replace("%A", job_id).replace("%a", "*").replace("%j", "*")
    return pattern.replace("%x", name.group(1) if name else "*")


# SLURM job states after which a task will not run again
FINAL_STATES = {
    "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY",
    "BOOT_FAIL", "DEADLINE",
}  # fmt: skip


@dataclass
class TaskState:
    state: str
    exit_code: int
    seconds: float | None
    log: Path | None
    restarts: int = 0  # how many times SLURM requeued it (preemption, or our templates' requeue)
    requeue: bool = False  # whether SLURM will requeue it when preempted


def parse_duration(text: str) -> float | None:
    """SLURM's `[DAYS-]HH:MM:SS` in seconds."""
    days, _, clock = text.rpartition("-")
    try:
        hours, minutes, seconds = (int(x) for x in clock.split(":"))
        return ((int(days or 0) * 24 + hours) * 60 + minutes) * 60 + seconds
    except ValueError:
        return None


def query_array(job_id: str) -> dict[int, TaskState] | None:
    """The state of each array task that SLURM has split off, from `scontrol` (there may be no
    accounting, so not `sacct`); None when scontrol fails."""
    result = subprocess.run(
        ["scontrol", "--oneliner", "show", "job", job_id], capture_output=True, text=True
    )
    if result.returncode:
        return None
    tasks = {}
    for line in result.stdout.splitlines():
        # `Key=value` pairs separated by spaces; a value (a log path, a job name) may hold spaces
        pairs = re.split(r" (?=[\w:/]+=)", line.strip())
        fields = dict(pair.partition("=")[::2] for pair in pairs)
        task = fields.get("ArrayTaskId", "")
        if not task.isdigit():
            continue  # tasks still pending together, shown as a range such as `2-3%2`
        exit_code, exit_signal = (int(x) for x in fields.get("ExitCode", "0:0").split(":"))
        tasks[int(task)] = TaskState(
            state=fields.get("JobState", "UNKNOWN"),
            exit_code=-exit_signal if exit_signal else exit_code,
            seconds=parse_duration(fields.get("RunTime", "")),
            log=Path(fields["StdOut"]) if fields.get("StdOut") else None,
            restarts=int(fields.get("Restarts", "0") or 0),
            requeue=fields.get("Requeue") == "1",
        )
    return tasks


def wait_for_array(job_id: str, jobs: list[Job], poll_s: float = 1.0) -> int:
    """Follow the array until every task is in a final state, reporting as the local pool does."""
    print(f"======= waiting for job {job_id} ({len(jobs)} tasks)", flush=True)
    started: set[int] = set()
    restarts: dict[int, int] = {}
    results: dict[int, Result] = {}
    failing_since = None
    with StopRequest() as stop:
        while len(results) < len(jobs) and not stop.requested:
            tasks = query_array(job_id)
            if tasks is None:  # controller busy or restarting: retry for a minute
                failing_since = failing_since or time.monotonic()
                if time.monotonic() - failing_since > 60:
                    fail(f"scontrol cannot show job {job_id} any more", FAILED)
                tasks = {}
            else:
                failing_since = None
            for index, task in sorted(tasks.items()):
                job = jobs[index]
                if task.state == "RUNNING" and index not in started:
                    started.add(index)
                    print(f"[start]  {job.name}  (task {index})", flush=True)
                if task.restarts > restarts.setdefault(index, 0):
                    restarts[index] = task.restarts
                    print(f"[requeued] {job.name}  (task {index}, restart {task.restarts})")
                final = task.state in FINAL_STATES
                if task.state == "PREEMPTED" and task.requeue:
                    final = False  # it goes back to the queue and resumes from its checkpoint
                if final and index not in results:
                    results[index] = Result(job, task.exit_code, task.seconds, task.log, task.state)
                    if results[index].ok:
                        took = format_seconds(task.seconds) if task.seconds is not None else "?"
                        print(f"[done]   {job.name} in {took}  (task {index})", flush=True)
                    else:
                        report_failure(results[index])
            time.sleep(poll_s)
        if stop.requested:
            print(f"\nstopped waiting; job {job_id} keeps running (`scancel {job_id}` stops it)")
            return INTERRUPTED
    return print_summary([results[i] for i in range(len(jobs))])


def run_slurm(args: Args, jobs: list[Job], env: dict) -> int:
    values = template_values(args, jobs)
    text = render_template(args.slurm_template_path, values)
    if args.workers > 0 and shutil.which("sbatch", path=env.get("PATH")) is None:
        no_slurm(args, jobs)
    path, created = write_slurm_file(text)
    print(f"======= rendered {args.slurm_template_path} into {path}")
    if args.workers == 0:
        print(f"not submitted (--workers 0); submit it with: sbatch {path}")
        return 0
    job_id = submit(path, created, env)
    print(f"submitted job {job_id}: {len(jobs)} array tasks, at most {args.workers} at a time")
    print(f"  watch:  squeue --jobs {job_id}")
    print(f"  logs:   {log_pattern(text, job_id)}")
    print(f"  cancel: scancel {job_id}", flush=True)
    code = wait_for_array(job_id, jobs) if args.slurm_wait else 0
    print_sweep_end(values["sweep"], succeeded=code == 0)
    return code
