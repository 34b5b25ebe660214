"""The local pool: commands run N at a time on this machine, each with its share of the CPUs.

`run_pool` is the launcher's pool as a function (the launcher's `--workers`, `--log-dir` and
`--threads-per-run`), for programs that start many runs (a sweep over hyperparameters):

    from cleanrl_utils.benchmark import Job, run_pool

    pool = run_pool(["python cleanrl/ppo_atari_envpool.py --seed 1", ...], workers=2,
                    log_dir="tuner_logs")
    if pool.interrupted:      # Ctrl-C, SIGTERM or SIGHUP: every run stopped (with its checkpoint)
        return pool.exit_code  # (your command's main: its exit code)
    pool.exit_codes           # one per command, in order: 0, 1, ..., -9 (killed by SIGKILL)

It prints what the launcher prints (each start, finish and failure with its log's last lines).
"""

from __future__ import annotations

import os
import sys
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cleanrl_utils.benchmark.common import print_summary, report_failure
from cleanrl_utils.benchmark.pool import (
    POLL_S,
    THREAD_VARIABLES,
    Job,
    Result,
    Running,
    start_job,
    stop_jobs,
    thread_limits,
    usable_cpus,
)
from cleanrl_utils.console.errors import FAILED, INTERRUPTED
from cleanrl_utils.console.progress import format_seconds
from cleanrl_utils.console.signals import StopRequest


@dataclass
class PoolResult:
    """What `run_pool` did, per job in the order given: its `Result`, or None for a job that
    was never started because the pool was stopped first."""

    jobs: list[Job]
    results: list[Result | None]
    interrupted: bool  # Ctrl-C, SIGTERM or SIGHUP stopped the pool
    threads: int | None = None  # the thread limit of each run; None: the environment's own

    @property
    def exit_codes(self) -> list[int | None]:
        """Each command's exit code (negative: killed by that signal; 127: it could not be
        started); None: not started. A run stopped by the pool ends as the command does on
        SIGTERM: 75 for the training scripts, which write a checkpoint first."""
        return [None if r is None else r.exit_code for r in self.results]

    @property
    def exit_code(self) -> int:
        """The launcher's: 130 when interrupted, 1 when any run failed, else 0."""
        if self.interrupted:
            return INTERRUPTED
        return FAILED if any(r is None or not r.ok for r in self.results) else 0


def pool(jobs: list[Job], workers: int, log_dir: Path, env: Mapping[str, str]) -> PoolResult:
    """Run `jobs` `workers` at a time with the environment `env`, each logging to
    `log_dir / job.log_name`; stopped (see `run_pool`) by Ctrl-C, SIGTERM and SIGHUP."""
    log_dir.mkdir(parents=True, exist_ok=True)
    print(f"======= running {len(jobs)} runs, {workers} at a time; logs in {log_dir}/", flush=True)
    waiting = deque(jobs)
    running: list[Running] = []
    results: dict[Job, Result] = {}

    def counts() -> str:
        failed = sum(not r.ok for r in results.values())
        return (
            f"({len(running)} running, {len(waiting)} waiting, "
            f"{len(results) - failed} done, {failed} failed)"
        )

    def finished(r: Running) -> Result:
        return Result(r.job, r.process.returncode, time.monotonic() - r.start, r.log)

    with StopRequest() as stop:
        while (waiting or running) and not stop.requested:
            # a multi-process run (torchrun) counts as its processes; one larger than the pool
            # still runs, alone
            while waiting and (
                not running
                or sum(r.job.processes for r in running) + waiting[0].processes <= workers
            ):
                job = waiting.popleft()
                started = start_job(job, log_dir / job.log_name, env)
                if isinstance(started, Result):
                    results[job] = started
                    report_failure(started)
                    continue
                running.append(started)
                print(f"[start]  {job.name}  {counts()}  log: {started.log}", flush=True)
            for r in [r for r in running if r.process.poll() is not None]:
                running.remove(r)
                result = results[r.job] = finished(r)
                if result.ok:
                    print(f"[done]   {r.job.name} in {format_seconds(result.seconds)}  {counts()}")
                else:
                    report_failure(result)
            sys.stdout.flush()
            time.sleep(POLL_S)
        if stop.requested:
            print(f"\n======= interrupted: stopping {len(running)} running runs", flush=True)
            stop_jobs(running)
            results.update((r.job, finished(r)) for r in running)
            unfinished = [f"{r.job.name} (stopped)" for r in running]
            unfinished += [f"{job.name} (not started)" for job in waiting]
            print(f"{len(unfinished)} runs did not finish:", *unfinished, sep="\n  ", flush=True)
    return PoolResult(jobs, [results.get(job) for job in jobs], stop.requested)


def run_pool(
    commands: Sequence[str | Job],
    workers: int,
    log_dir: str | Path,
    *,
    threads_per_run: int | None = None,
    env: Mapping[str, str] | None = None,
) -> PoolResult:
    """Run `commands` (a command line, or a `Job` (`Job.named(command, name, log_name)`) to choose how it is named
    and logged) at most
    `workers` at a time, each in its own process group with the environment `env` (default: this
    process's) and `threads_per_run` threads for OpenMP, MKL, OpenBLAS and XLA (default: usable
    CPUs // workers). A command given as a string is named `run {i}` and logs to `run{i}.log`
    (i from 1) in `log_dir`.

    A failed run is reported when it ends and the others go on. Ctrl-C, SIGTERM or SIGHUP stop
    the pool: every running run gets SIGTERM (the training scripts finish their iteration and
    write a checkpoint; `--resume` continues them), SIGKILL after `STOP_GRACE_S`, no new run
    starts, and the result says `interrupted`. The signal handlers before the call are back when
    it returns. Call it from the main thread (Python handles signals there only)."""
    jobs = [
        c if isinstance(c, Job) else Job.named(c, f"run {i}", f"run{i}.log")
        for i, c in enumerate(commands, 1)
    ]
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    if threads_per_run is not None and threads_per_run < 1:
        raise ValueError(f"threads_per_run must be at least 1, got {threads_per_run}")
    logs = [job.log_name for job in jobs]
    repeated = sorted({name for name in logs if logs.count(name) > 1})
    if repeated:
        raise ValueError(f"two jobs would write the same log: {', '.join(repeated)}")
    threads = threads_per_run or max(1, usable_cpus() // workers)
    print(f"threads per run: {threads} ({', '.join(THREAD_VARIABLES)})")
    env = {**(os.environ if env is None else env), **thread_limits(threads)}
    result = pool(jobs, workers, Path(log_dir), env)
    result.threads = threads
    return result


def run_local(jobs: list[Job], workers: int, log_dir: Path, env: Mapping[str, str]) -> int:
    """`pool`, then the summary; returns the launcher's exit code."""
    result = pool(jobs, workers, log_dir, env)
    if result.interrupted:
        return INTERRUPTED
    return print_summary(result.results)
