"""One trial at work: its runs (one per env id and seed) started one after another as processes of
the training script, their event files read as they grow, intermediate values reported to Optuna
at fixed marks of each run's budget, and a pruned run stopped with SIGTERM (it checkpoints and
exits with 75, resumable like any stopped run)."""

from __future__ import annotations

import json
import shlex
import signal
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

from cleanrl_utils.benchmark.pool import (
    Job,
    Running,
    killed_by,
    log_name,
    log_tail,
    signal_group,
    start_job,
)
from cleanrl_utils.console.errors import CHECKPOINT_EXIT, INTERRUPTED
from cleanrl_utils.files.run_names import RunName, find_runs
from cleanrl_utils.files.state_file import list_checkpoints
from cleanrl_utils.files.sweeps import TUNER_VARIABLE
from cleanrl_utils.report.events import event_files
from cleanrl_utils.tuner.scores import aggregate, metric_values, window_mean
from cleanrl_utils.tuner.state import RunRecord, Settings, TrialRecord

EVENTS_POLL_S = 2.0  # how often a growing event file is read again (when it has grown)
LOG_LINES = 15  # the lines of a failed run's log kept with its trial


def trial_exp_name(run_prefix: str, number: int) -> str:
    """The `--exp-name` of a trial's new runs."""
    return f"{run_prefix}-trial{number}"


def new_run_dir(runs_dir: Path, env_id: str, exp_name: str, seed: int, since: float) -> str | None:
    """The run folder of a trial's run started with `--exp-name exp_name` at `since` or later:
    the newest of that exp name, env id and seed named after then (an older one is another
    study's of the same name); None before the script has made it."""
    found = find_runs(runs_dir, env_id, exp_name, seed)
    found = [f for f in found if RunName.parse(f.name).start_time >= int(since)]
    return str(found[0]) if found else None


@dataclass
class TrialRun:
    """Runs one trial's runs one after another; `poll()` advances it without blocking. `outcome`
    is set when it is over: "complete" (with `value`), "pruned" or "failed" (with `error`)."""

    settings: Settings
    trial: object  # optuna.Trial
    record: TrialRecord  # its flags and runs, written to the study as they change
    log_dir: Path
    outcome: str | None = None
    value: float | None = None
    error: str | None = None
    index: int = 0  # the run at work
    running: Running | None = None  # the current run's process
    pruning: bool = False
    budget: int | None = None
    start_time: float = 0.0  # when the current run was started
    marks_done: int = 0
    events_read: tuple = ()  # (sizes of the event files, time) at the last read
    scores: dict = field(default_factory=dict)  # (env_id, seed) -> normalised score

    # -- the trial's record in the study -----------------------------------------------------

    @property
    def runs(self) -> list[RunRecord]:
        return self.record.runs

    def save_runs(self) -> None:
        self.record.save(self.trial.set_user_attr, "runs")

    @property
    def exp_name(self) -> str:
        return trial_exp_name(self.settings.run_prefix, self.trial.number)

    # -- starting and watching runs ------------------------------------------------------------

    def start_next(self) -> None:
        """Starts the next run that is not done; a run done before (a resumed trial) only has its
        score read back. Ends the trial when no run is left."""
        while self.index < len(self.runs):
            run = self.runs[self.index]
            if run.state == "done" and run.dir and self._score_finished(run):
                self.index += 1
                if self._report_between_runs():
                    return
                continue
            self._start(run)
            return
        self.value = aggregate(self.scores, self.settings.aggregation_type)
        self.outcome = "complete"

    def _start(self, run: RunRecord) -> None:
        t = self.settings
        command = [t.python, t.script, *t.script_args, *self.record.flags]
        command += ["--env-id", run.env_id, "--seed", str(run.seed)]
        if run.dir and list_checkpoints(run.dir):
            command += ["--resume", run.dir]  # an interrupted trial's run continues
        else:
            run.dir = None
            command += ["--exp-name", self.exp_name]
        tag = {"study": t.study_name, "trial": self.trial.number, "storage": t.storage_text}
        tag["sweep"] = t.sweep  # (config.json's `sweep`: the study's runs, for the report)
        env = {**t.run_env, TUNER_VARIABLE: json.dumps(tag)}
        log = self.log_dir / log_name(run.env_id, run.seed)
        log.parent.mkdir(parents=True, exist_ok=True)
        self.budget, self.marks_done, self.events_read, self.pruning = None, 0, (), False
        self.start_time = time.time()
        started = start_job(Job(run.env_id, run.seed, shlex.join(command)), log, env)
        run.log = str(log)
        if not hasattr(started, "process"):  # the program could not be started
            self._fail(run, f"cannot start the run: exit code {started.exit_code}", log)
            return
        self.running = started
        run.state = "running"
        run.process = {"host": socket.gethostname(), "pid": started.process.pid, "script": t.script}
        self.save_runs()
        print(
            f"[trial {self.trial.number}] start {run.env_id} seed {run.seed}"
            f"{' (resumed)' if run.dir else ''}  log: {log}",
            flush=True,
        )

    def _find_dir(self, run: RunRecord) -> None:
        """The run folder of a new run, once the script has made it."""
        if run.dir is None:
            run.dir = new_run_dir(
                self.settings.runs_dir, run.env_id, self.exp_name, run.seed, self.start_time
            )
            if run.dir is not None:
                self.save_runs()
        if run.dir is not None and self.budget is None:
            try:
                args = json.loads((Path(run.dir) / "config.json").read_text())["args"]
                self.budget = int(args["total_timesteps"])
                if args.get("num_iterations") and args.get("batch_size"):  # whole iterations
                    self.budget = int(args["num_iterations"]) * int(args["batch_size"])
            except (OSError, ValueError, KeyError, TypeError):
                pass

    def poll(self) -> None:
        if self.outcome is not None or self.running is None:
            return
        run = self.runs[self.index]
        self._find_dir(run)
        if not self.pruning and self.settings.pruning_marks > 0 and self.budget and run.dir:
            self._report_marks(run)
        code = self.running.process.poll()
        if code is None:
            return
        self.running = None
        log = Path(run.log)
        self._find_dir(run)
        if run.dir is not None:
            run.steps, run.budget = metric_values(run.dir, self.settings.metric)[1], self.budget
        if self.pruning:
            run.state = "pruned"
            self.save_runs()
            self.outcome = "pruned"
            print(
                f"[trial {self.trial.number}] pruned: {run.env_id} seed {run.seed} stopped (exit code {code})",
                flush=True,
            )
            return
        if code != 0:
            how = f"exit code {code}" if code >= 0 else killed_by(-code)
            if code in (CHECKPOINT_EXIT, INTERRUPTED):
                how += " (stopped from outside the tuner; resumable with --resume)"
                run.state = "stopped"
            self._fail(run, how, log)
            return
        if run.dir is None or not self._score_finished(run):
            self._fail(run, f"the run logged no `{self.settings.metric}`", log)
            return
        self.index += 1
        if not self._report_between_runs():
            self.start_next()

    def _score_finished(self, run: RunRecord) -> bool:
        values, _ = metric_values(run.dir, self.settings.metric)
        score = window_mean(values, self.settings.metric_last_n_average_window)
        if score is None:
            return False
        run.state, run.score = "done", score
        self.scores[run.env_id, run.seed] = self.settings.normalizer(run.env_id, score)
        self.save_runs()
        print(
            f"[trial {self.trial.number}] {run.env_id} seed {run.seed}: {self.settings.metric} "
            f"{score:.4g} (normalised {self.scores[run.env_id, run.seed]:.4g})",
            flush=True,
        )
        return True

    def _report_between_runs(self) -> bool:
        """After a whole run: the objective so far at the run's last mark; True if pruned."""
        if self.index >= len(self.runs) or self.settings.pruning_marks <= 0:
            return False  # the last run's value is the trial's value, not an intermediate one
        step = self.index * self.settings.pruning_marks
        self.trial.report(aggregate(self.scores, self.settings.aggregation_type), step)
        if self.trial.should_prune():
            self.outcome = "pruned"
            print(f"[trial {self.trial.number}] pruned after {self.index} runs", flush=True)
            return True
        return False

    def _report_marks(self, run: RunRecord) -> None:
        """Reads the growing event files (at most every EVENTS_POLL_S, and only when they grew)
        and reports each mark the run has passed; stops the run if the pruner says so."""
        files = event_files(run.dir)
        sizes = tuple(f.stat().st_size for f in files if f.exists())
        if self.events_read and (
            sizes == self.events_read[0] or time.time() - self.events_read[1] < EVENTS_POLL_S
        ):
            return
        self.events_read = (sizes, time.time())
        values, last_step = metric_values(run.dir, self.settings.metric)
        marks = self.settings.pruning_marks
        while self.marks_done < marks - 1:  # the last mark is the run's end
            mark_step = self.budget * (self.marks_done + 1) // marks
            if last_step < mark_step:
                return
            self.marks_done += 1
            score = window_mean(values, self.settings.metric_last_n_average_window, up_to=mark_step)
            if score is None:
                continue  # no value yet (no game finished): nothing to compare at this mark
            now = dict(self.scores)
            now[run.env_id, run.seed] = self.settings.normalizer(run.env_id, score)
            value = aggregate(now, self.settings.aggregation_type)
            self.trial.report(value, self.index * marks + self.marks_done)
            if self.trial.should_prune():
                print(
                    f"[trial {self.trial.number}] pruned at step {mark_step:,} of {run.env_id} seed "
                    f"{run.seed} (value {value:.4g}): stopping the run with SIGTERM",
                    flush=True,
                )
                self.record.pruned_at_step = mark_step
                self.record.save(self.trial.set_user_attr, "pruned_at_step")
                self.pruning = True
                self.signal(signal.SIGTERM)
                return

    def _fail(self, run: RunRecord, how: str, log: Path) -> None:
        if run.state not in ("stopped",):
            run.state = "failed"
        self.save_runs()
        tail = log_tail(log, LOG_LINES)
        self.error = f"{run.env_id} seed {run.seed}: {how}"
        self.record.error = f"{self.error}\n{tail}"
        self.record.save(self.trial.set_user_attr, "error")
        self.outcome = "failed"
        print(
            f"[trial {self.trial.number}] FAILED {self.error}; last lines of {log}:\n{tail}",
            flush=True,
        )

    # -- stopping ----------------------------------------------------------------------------

    def signal(self, signum: int) -> None:
        """Sends `signum` to the current run's process group (the run and its children)."""
        if self.running is not None:
            signal_group(self.running.process.pid, signum)

    def interrupted(self) -> list[RunRecord]:
        """The runs of a trial stopped by the tuner's own stop (Ctrl-C): each with the folder it
        resumes from, for the trial enqueued in its place."""
        if self.running is not None:
            run = self.runs[self.index]
            self._find_dir(run)
            run.state = "stopped"
            self.running = None
        return self.runs


def stop_orphan(run: RunRecord, grace_s: float = 60.0) -> None:
    """The run of a trial whose tuner was killed outright may still be running (a run has its own
    process group, so it outlives its tuner): SIGTERM it (it checkpoints) and wait for it to end,
    so that its resumption never runs beside it. Only a process of this host whose command line
    still names the script is taken for that run (a pid may have been reused since)."""
    process = run.process or {}
    pid = process.get("pid")
    if run.state != "running" or not pid or process.get("host") != socket.gethostname():
        return
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return  # gone
    if str(process.get("script", "")).encode() not in command:
        return
    print(f"stopping the run {run.dir} (pid {pid}) left running by its tuner", flush=True)
    for signum in (signal.SIGTERM, signal.SIGKILL):
        try:
            if not signal_group(pid, signum):
                return
        except PermissionError:
            return
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            if not Path(f"/proc/{pid}").exists():
                return
            time.sleep(0.2)
