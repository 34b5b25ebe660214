# docs: docs/benchmark_launcher.md
"""Fan a training command out over env ids and seeds: a local pool of workers or a SLURM array.

    python -m cleanrl_utils.benchmark --env-ids Pong-v5 Breakout-v5 --num-seeds 3 --workers 2 \
        --command "python cleanrl/ppo_atari_envpool.py"

Every job (one run) is `COMMAND --env-id ENV_ID --seed SEED`, env-major: job i has
env_ids[i // num_seeds] and seed start_seed + i % num_seeds, the same order as the SLURM array's
task ids.
"""

from __future__ import annotations

import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import tyro

from cleanrl_utils.checks import USAGE_ERROR, fail
from cleanrl_utils.progress import format_seconds


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


# the variables that size the thread pools of OpenMP (torch), MKL, OpenBLAS (numpy) and XLA (jax)
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "PJRT_NPROC")
POLL_S = 0.2
STOP_GRACE_S = 30.0  # after SIGTERM, how long a run may take to exit (to write its checkpoint)
LOG_TAIL_LINES = 20
INTERRUPTED = 130  # the shell's exit code for a process stopped by Ctrl-C
PROG = "python -m cleanrl_utils.benchmark"  # how users type it, for --help and printed commands


@dataclass(frozen=True)
class Job:
    """One command of the sweep: the training command for one env id and seed."""

    env_id: str
    seed: int
    command: str

    @property
    def name(self) -> str:
        return f"{self.env_id} seed {self.seed}"

    @property
    def log_name(self) -> str:
        return f"{self.env_id}__seed{self.seed}.log"


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


def make_jobs(args: Args) -> list[Job]:
    seeds = range(args.start_seed, args.start_seed + args.num_seeds)
    return [
        Job(env_id, seed, f"{args.command} --env-id {shlex.quote(env_id)} --seed {seed}")
        for env_id in args.env_ids
        for seed in seeds
    ]


def check_args(args: Args) -> None:
    if not args.env_ids:
        fail("--env-ids needs at least one env id")
    repeated = sorted({e for e in args.env_ids if args.env_ids.count(e) > 1})
    if repeated:
        fail(f"--env-ids lists {', '.join(repeated)} more than once")
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
    return 1 if failed else 0


# ---------------------------------------------------------------------------------------------
# Local pool


class StopRequest:
    """Ctrl-C (SIGINT), SIGTERM and SIGHUP (a closed terminal) set `requested` instead of raising
    wherever the launcher happens to be, so a run is never started without being tracked."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __enter__(self) -> StopRequest:
        self.requested = False
        self.previous = {s: signal.signal(s, self._handle) for s in self.SIGNALS}
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum, frame) -> None:
        self.requested = True


@dataclass
class Running:
    job: Job
    process: subprocess.Popen
    start: float
    log: Path


def start_job(job: Job, log: Path, env: dict) -> Running | Result:
    """Start a run in its own process group, so that stopping it stops its children too."""
    with open(log, "wb") as out:
        try:
            process = subprocess.Popen(
                shlex.split(job.command),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        except OSError as e:  # no such program: reported like a shell would, exit code 127
            out.write(f"cannot start {job.command!r}: {e}\n".encode())
            return Result(job, 127, 0.0, log)
    return Running(job, process, time.monotonic(), log)


def stop_jobs(running: list[Running]) -> None:
    """SIGTERM every run's process group, then SIGKILL what is left after STOP_GRACE_S."""
    for signum in (signal.SIGTERM, signal.SIGKILL):
        for r in running:
            try:
                os.killpg(r.process.pid, signum)
            except ProcessLookupError:
                pass  # the whole group has exited already
        deadline = time.monotonic() + STOP_GRACE_S
        while any(r.process.poll() is None for r in running) and time.monotonic() < deadline:
            time.sleep(POLL_S)
        if all(r.process.poll() is not None for r in running):
            break
    for r in running:
        r.process.wait()


def run_local(jobs: list[Job], workers: int, log_dir: Path, env: dict) -> int:
    log_dir.mkdir(parents=True, exist_ok=True)
    print(f"======= running {len(jobs)} runs, {workers} at a time; logs in {log_dir}/", flush=True)
    waiting = deque(jobs)
    running: list[Running] = []
    results: list[Result] = []

    def counts() -> str:
        failed = sum(not r.ok for r in results)
        return (
            f"({len(running)} running, {len(waiting)} waiting, "
            f"{len(results) - failed} done, {failed} failed)"
        )

    with StopRequest() as stop:
        while (waiting or running) and not stop.requested:
            while waiting and len(running) < workers:
                job = waiting.popleft()
                started = start_job(job, log_dir / job.log_name, env)
                if isinstance(started, Result):
                    results.append(started)
                    report_failure(started)
                    continue
                running.append(started)
                print(f"[start]  {job.name}  {counts()}  log: {started.log}", flush=True)
            for r in [r for r in running if r.process.poll() is not None]:
                running.remove(r)
                seconds = time.monotonic() - r.start
                result = Result(r.job, r.process.returncode, seconds, r.log)
                results.append(result)
                if result.ok:
                    print(f"[done]   {r.job.name} in {format_seconds(seconds)}  {counts()}")
                else:
                    report_failure(result)
            sys.stdout.flush()
            time.sleep(POLL_S)
        if stop.requested:
            print(f"\n======= interrupted: stopping {len(running)} running runs", flush=True)
            stop_jobs(running)
            unfinished = [f"{r.job.name} (stopped)" for r in running]
            unfinished += [f"{job.name} (not started)" for job in waiting]
            print(f"{len(unfinished)} runs did not finish:", *unfinished, sep="\n  ", flush=True)
            return INTERRUPTED
    return print_summary(sorted(results, key=lambda r: jobs.index(r.job)))


# ---------------------------------------------------------------------------------------------
# SLURM: render the template, submit it, optionally wait for the array

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
                1,
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
    return " ".join([PROG, *map(shlex.quote, flags)])


def no_slurm(args: Args, jobs: list[Job]) -> None:
    """No `sbatch` here: one `error:` line, the local command of the same sweep, exit code 2."""
    print(
        f"error: no SLURM here (sbatch is not on the PATH), nothing submitted; to run the same "
        f"{len(jobs)} runs on this machine (set --workers to the runs it can hold at once):\n"
        f"  {local_command(args)}",
        file=sys.stderr,
    )
    raise SystemExit(USAGE_ERROR)


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
                    fail(f"scontrol cannot show job {job_id} any more", 1)
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
    if args.slurm_wait:
        return wait_for_array(job_id, jobs)
    return 0


# ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    args = tyro.cli(Args, args=argv, prog=PROG, description=__doc__.split("\n\n")[0])
    check_args(args)
    jobs = make_jobs(args)

    env = dict(os.environ)
    if args.auto_tag:
        tag = autotag()
        env = tagged_env(env, tag)
        print(f"autotag: WANDB_TAGS={env['WANDB_TAGS']}" if tag else "autotag: no git tag found")

    print("======= commands to run:")
    print("\n".join(job.command for job in jobs), flush=True)

    if args.slurm_template_path is not None:
        return run_slurm(args, jobs, env)
    if args.workers == 0:
        print("not running the commands: --workers is 0")
        return 0
    threads = args.threads_per_run or max(1, usable_cpus() // args.workers)
    print(f"threads per run: {threads} ({', '.join(THREAD_VARIABLES)})")
    log_dir = Path(args.log_dir or Path("benchmark_logs") / time.strftime("%Y%m%d-%H%M%S"))
    return run_local(jobs, args.workers, log_dir, {**env, **thread_limits(threads)})


if __name__ == "__main__":
    sys.exit(main())
