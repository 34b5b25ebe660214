"""`Tuner`: CleanRL's tuner arguments, run as an Optuna ask-and-tell loop over `workers` trials at
once, each trial a series of real processes of the training script (`trials.TrialRun`), on a
`TunerStudy` (Optuna's study, used through its public API only)."""

from __future__ import annotations

import os
import re
import socket
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from types import MappingProxyType

import optuna
from optuna.trial import TrialState

from cleanrl_utils.benchmark.pool import stop_jobs, thread_limits, usable_cpus
from cleanrl_utils.checks.paths import folder_problem
from cleanrl_utils.console.errors import DISK_EXIT, FAILED, INTERRUPTED, USAGE_ERROR, RunError
from cleanrl_utils.console.signals import StopRequest
from cleanrl_utils.files.run_names import EXP_NAME_LIMIT, name_problem
from cleanrl_utils.files.sweeps import SWEEP_VARIABLE, report_command
from cleanrl_utils.tuner.results import print_best, write_all
from cleanrl_utils.tuner.scores import AGGREGATIONS, ESTIMATES, Normalizer, aggregation_words
from cleanrl_utils.tuner.space import as_flags, check_flags, fixed_flag_names, probe_script
from cleanrl_utils.tuner.state import RunRecord, Settings, TrialRecord
from cleanrl_utils.tuner.storage import check_storage, disk_cause, open_storage
from cleanrl_utils.tuner.trials import TrialRun, new_run_dir, stop_orphan, trial_exp_name

POLL_S = 0.5
# the study's log folder, LOG_DIR/STUDY_NAME: one folder inside LOG_DIR, never `..` or a path
STUDY_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._ -]{0,99}")
LAST_TRIAL = 999_999  # the trial numbers a study's exp names make room for


def worker_id() -> dict:
    """Who runs a trial: host and pid, and the SLURM array task (a requeued task is the same
    task on a new process, maybe on another host)."""
    slurm = None
    if "SLURM_ARRAY_JOB_ID" in os.environ:
        slurm = f"{os.environ['SLURM_ARRAY_JOB_ID']}_{os.environ.get('SLURM_ARRAY_TASK_ID', '')}"
    return {"host": socket.gethostname(), "pid": os.getpid(), "slurm": slurm}


def fresh_draws(study) -> None:
    """A seeded sampler draws the same parameters in every process it starts in: a study
    continued, or shared with other tuners (the tasks of a SLURM array), would run them again.
    Its random state is drawn anew there; a new study's first tuner keeps the seed's draws."""
    if study.get_trials(deepcopy=False) or os.environ.get("SLURM_ARRAY_TASK_ID", "0") != "0":
        study.sampler.reseed_rng()


class TunerStudy(optuna.study.Study):
    """An Optuna study driven by the tuner's ask-and-tell loop, on the storage it was opened
    with (`storage`, where a trial's record is written by its number). A sampler may end the
    study with `stop()` (GridSampler's, when its grid is done), as it would end
    `study.optimize`: `stopped` is then set and the loop starts no new trial."""

    def __init__(self, study_name: str, storage, sampler=None, pruner=None) -> None:
        super().__init__(study_name=study_name, storage=storage, sampler=sampler, pruner=pruner)
        self.storage = storage
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True

    def trial_attr_setter(self, number: int) -> Callable:
        """`set_user_attr(key, value)` of the trial `number`: of any trial of the study, one a
        tuner that is gone left running too."""
        study_id = self.storage.get_study_id_from_name(self.study_name)
        trial_id = self.storage.get_trial_id_from_study_id_trial_number(study_id, number)
        return partial(self.storage.set_trial_user_attr, trial_id)


def open_study(storage, study_name: str, direction: str, sampler=None, pruner=None) -> TunerStudy:
    """The study `study_name` of `storage` (an Optuna storage), created if new."""
    optuna.create_study(
        storage=storage, study_name=study_name, direction=direction, load_if_exists=True
    )
    return TunerStudy(study_name, storage, sampler, pruner)


def open_study_in(storage_text: str, study_name: str, direction: str, sampler=None, pruner=None):
    """`open_study` in the storage `--storage` names (`open_storage`); one that cannot take the
    study raises `RunError`: with `DISK_EXIT` when the file system refused the write (a full
    disk, read-only), else 2."""
    storage = open_storage(storage_text)
    try:
        return open_study(storage, study_name, direction, sampler, pruner)
    except Exception as e:  # noqa: BLE001 (a storage error of any backend)
        why = disk_cause(e)
        raise RunError(
            f"cannot create or load the study {study_name!r} in {storage_text}: "
            f"{e if why is None else why}",
            USAGE_ERROR if why is None else DISK_EXIT,
        ) from None


def is_stale(worker: dict | None, me: dict) -> bool:
    """A RUNNING trial whose tuner is gone: same host and its pid no longer alive, or the same
    SLURM array task (requeued). Another host's trial is never taken for stale."""
    if not isinstance(worker, dict):
        return False
    if worker.get("slurm") and worker.get("slurm") == me["slurm"]:
        return worker.get("pid") != me["pid"] or worker.get("host") != me["host"]
    if worker.get("host") != me["host"] or worker.get("pid") == me["pid"]:
        return False
    try:
        os.kill(int(worker["pid"]), 0)
    except ProcessLookupError:
        return True
    except (PermissionError, KeyError, TypeError, ValueError):
        return False
    return False


class Tuner:
    """A hyperparameter search over a training script of `cleanrl/`, CleanRL's `Tuner` arguments
    first (a CleanRL tuner file runs unchanged), this project's options after them."""

    def __init__(
        self,
        script: str,
        metric: str = "charts/episodic_return",
        target_scores: Mapping[str, Sequence[float] | None] | None = None,
        params_fn: Callable | None = None,
        direction: str = "maximize",
        aggregation_type: str = "average",
        metric_last_n_average_window: int = 50,
        sampler: optuna.samplers.BaseSampler | None = None,
        pruner: optuna.pruners.BasePruner | None = None,
        storage: str = "sqlite:///cleanrl_hpopt.db",
        study_name: str = "",
        wandb_kwargs: Mapping | None = None,
        *,
        env_ids: Sequence[str] | None = None,
        script_args: Sequence[str] | str = (),
        normalization: str = "auto",
        workers: int = 1,
        threads_per_run: int | None = None,
        pruning_marks: int = 10,
        start_seed: int = 1,
        log_dir: str = "tuner_logs",
        python: str = sys.executable,
    ) -> None:
        """CleanRL's arguments: `script` (a path), `metric` (a TensorBoard tag), `target_scores`
        ({env id: [min, max] or None}; its keys are the env ids when `env_ids` is not given),
        `params_fn(trial)` (returns {flag: value}), `direction`, `aggregation_type` (`average`,
        `median`, `iqm`, `max`, `min`: over games; this project's `atari5`, `atari3-val`,
        `atari10`: that model's estimate of the 57-game median HNS in percent, from its games,
        human-normalised as the model was fitted), `metric_last_n_average_window`, `sampler`,
        `pruner` (None: Optuna's default, the median pruner), `storage` (an RDB URL, a journal
        file `*.log` or `journal:PATH`), `study_name` (default `tuner_{unix time}`),
        `wandb_kwargs` (`project`, `entity`: the runs are tracked with `--track`).

        This project's: `env_ids`; `script_args` (fixed flags of every run); `normalization`
        (`auto`: target scores where given, else human-normalised where the game has scores,
        else raw; `human`; `none`); `workers` (trials at once); `threads_per_run` (default:
        usable CPUs // workers); `pruning_marks` (intermediate values per run, at equal shares
        of its budget, and one after each run but the last; 0: none, so nothing is pruned);
        `start_seed`; `log_dir` (the runs' logs and
        the results); `python` (the interpreter of the runs). Bad settings raise `RunError`
        (`cleanrl_utils.console.errors`: its `error:` line and exit code 2) with the reason."""
        if params_fn is None:
            raise RunError("no search space (params_fn): every trial would run the same flags")
        if direction not in ("maximize", "minimize"):
            raise RunError(f"direction must be maximize or minimize, got {direction!r}")
        if aggregation_type not in (*AGGREGATIONS, *ESTIMATES):
            raise RunError(
                f"unknown aggregation type {aggregation_type!r} "
                f"(one of {', '.join((*AGGREGATIONS, *ESTIMATES))})"
            )
        if metric_last_n_average_window <= 0:
            raise RunError("metric_last_n_average_window must be positive")
        study_name = study_name or f"tuner_{int(time.time())}"
        if not STUDY_NAME.fullmatch(study_name):
            raise RunError(
                f"the study name {study_name!r} cannot name its log folder: 1 to 100 "
                "characters, only letters, digits, '.', '_', '-' and spaces, not starting with '.'"
            )
        # `.` and `-` are not led with: a hidden folder, a flag (`--exp-name -x`)
        run_prefix = re.sub(r"[^A-Za-z0-9.-]+", "-", study_name).lstrip("-.").rstrip("-") or "tuner"
        longest = trial_exp_name(run_prefix, LAST_TRIAL)
        if name_problem(longest, "x") is not None:  # else every run would refuse its exp name
            room = EXP_NAME_LIMIT - len(trial_exp_name("", LAST_TRIAL))
            raise RunError(
                f"the study name {study_name!r} leaves no room for its trials' exp names "
                f"(`{longest}`, over {EXP_NAME_LIMIT} characters): at most {room} characters"
            )
        target_scores = dict(target_scores or {})
        env_ids = list(env_ids) if env_ids else list(target_scores)
        if not env_ids:
            raise RunError("no env ids: give env_ids or target_scores")
        if len(set(env_ids)) < len(env_ids):
            raise RunError(f"env ids repeated: {env_ids}")
        try:
            normalizer = Normalizer.make(env_ids, target_scores, normalization)
            if aggregation_type in ESTIMATES:
                normalizer = normalizer.for_estimate(aggregation_type)
        except ValueError as e:
            raise RunError(str(e)) from None
        script_args = script_args.split() if isinstance(script_args, str) else list(script_args)
        wandb_kwargs = dict(wandb_kwargs or {})
        unknown = set(wandb_kwargs) - {"project", "entity"}
        if unknown:
            raise RunError(f"wandb_kwargs: only project and entity are passed on, not {unknown}")
        if wandb_kwargs:
            script_args += ["--track"]
            if "project" in wandb_kwargs:
                script_args += ["--wandb-project-name", str(wandb_kwargs["project"])]
            if "entity" in wandb_kwargs:
                script_args += ["--wandb-entity", str(wandb_kwargs["entity"])]
        if workers <= 0:
            raise RunError(f"workers must be positive, got {workers}")
        if threads_per_run is not None and threads_per_run <= 0:
            raise RunError(f"threads_per_run must be positive, got {threads_per_run}")
        if pruning_marks < 0:
            raise RunError(f"pruning_marks must not be negative, got {pruning_marks}")
        self.params_fn = params_fn
        self.sampler = sampler
        self.pruner = pruner
        self.workers = workers
        self.threads_per_run = threads_per_run or max(1, usable_cpus() // workers)
        self.start_seed = start_seed
        run_env = {**os.environ, **thread_limits(self.threads_per_run)}
        run_env.pop(SWEEP_VARIABLE, None)  # (a trial's runs are the study's sweep, no other's)
        if wandb_kwargs:
            run_env["WANDB_RUN_GROUP"] = study_name
        self.settings = Settings(
            script=script,
            script_args=tuple(script_args),
            python=python,
            env_ids=tuple(env_ids),
            metric=metric,
            metric_last_n_average_window=metric_last_n_average_window,
            aggregation_type=aggregation_type,
            direction=direction,
            normalizer=normalizer,
            pruning_marks=pruning_marks,
            study_name=study_name,
            storage_text=storage,
            log_dir=Path(log_dir) / study_name,
            runs_dir=Path("runs"),  # where the scripts write (relative to the working folder)
            run_prefix=run_prefix,
            run_env=MappingProxyType(run_env),
        )
        self.known_flags: set[str] | None = None

    # -- before anything starts ---------------------------------------------------------------

    def check(self) -> TunerStudy:
        """Everything that can be wrong before a trial starts: the log folder (exit code 74 when
        it cannot take files), the script's flags (the fixed ones and the search space's,
        against its `Args`), the env ids (the script's own check), the storage (opened last: a
        new SQLite file is made only then; 74 when the disk refuses it). Raises `RunError`: one
        `error:` line and exit code 2 (or 74) at the entry point. Returns the study."""
        s = self.settings
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        problem = folder_problem(s.log_dir)
        if problem is not None:
            raise RunError(f"--log-dir {s.log_dir}: cannot write there: {problem}", DISK_EXIT)
        check_storage(s.storage_text)  # (creates nothing)
        self.known_flags, env_problems = probe_script(s.python, s.script, list(s.env_ids))
        check_flags(fixed_flag_names(s.script_args), self.known_flags, s.script, "fixed flag")
        probe = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0)).ask()
        sampled = self.params_fn(probe)  # a throwaway trial: the flags the space will set
        if not sampled:
            raise RunError(
                "the search space is empty: every trial would run the script's defaults again"
            )
        check_flags(list(sampled), self.known_flags, s.script, "search space flag")
        if env_problems:
            raise RunError(env_problems[0])
        return open_study_in(s.storage_text, s.study_name, s.direction, self.sampler, self.pruner)

    # -- the loop -----------------------------------------------------------------------------

    def tune(self, num_trials: int, num_seeds: int):
        """Runs trials until the study has `num_trials` of them (complete, pruned or failed;
        trials stopped by Ctrl-C are resumed, not counted), `workers` at once; each trial runs
        every env id with `num_seeds` seeds. Returns the best trial (None if none completed).
        Ctrl-C (or SIGTERM) stops the running runs with a checkpoint and exits with 130; the
        same call again continues the study. Bad input raises `RunError` as `check` does."""
        s = self.settings
        if num_trials <= 0 or num_seeds <= 0:
            raise RunError(
                f"num_trials and num_seeds must be positive, got {num_trials} and {num_seeds}"
            )
        study = self.check()
        self.num_seeds = num_seeds
        me = worker_id()
        fresh_draws(study)
        self.recover_stale(study, me)
        print(
            f"======= study {s.study_name!r} in {s.storage_text}: {num_trials} trials of "
            f"{len(s.env_ids)} env ids x {num_seeds} seeds, {self.workers} at a time, "
            f"{self.threads_per_run} threads per run; logs in {s.log_dir}/\n"
            f"objective: {s.direction} the {aggregation_words(s.aggregation_type)} of "
            f"{s.metric} (last {s.metric_last_n_average_window} values), normalised: "
            f"{s.normalizer.describe()}",
            flush=True,
        )
        active: list[TrialRun] = []
        self.outcomes: list[str] = []  # of the trials this call finished
        with StopRequest() as stop:
            while not stop.requested:
                while len(active) < self.workers and self.wants_more(study, num_trials):
                    active.append(self.start_trial(study, me))
                if not active:
                    break
                for trial_run in list(active):
                    trial_run.poll()
                    if trial_run.outcome is not None:
                        active.remove(trial_run)
                        self.finish_trial(study, trial_run)
                time.sleep(POLL_S)
            if stop.requested:
                self.interrupt(study, active)
        write_all(s, study)
        if stop.requested:
            print(
                f"======= interrupted: {len(active)} trials stopped with checkpoints; the same "
                "command continues the study (they resume)\nreport of the study's runs: "
                f"{report_command(s.sweep, str(s.runs_dir))}",
                flush=True,
            )
            raise RunError("interrupted", INTERRUPTED, line="")  # (said above, on stdout)
        best = print_best(s, study)
        if self.outcomes and set(self.outcomes) == {"failed"}:
            raise RunError(
                f"every trial this tuner ran failed ({len(self.outcomes)}; the first: "
                f"{self.first_error}); their logs are in {s.log_dir}/",
                FAILED,
            )
        return best

    def wants_more(self, study: TunerStudy, num_trials: int) -> bool:
        if study.stopped:
            return False
        trials = study.get_trials(deepcopy=False)
        if any(t.state == TrialState.WAITING for t in trials):
            return True  # an interrupted trial, to resume
        counted = [t for t in trials if not TrialRecord.of(t).interrupted]
        return len(counted) < num_trials

    def start_trial(self, study: TunerStudy, me: dict) -> TrialRun:
        trial = study.ask()
        record = TrialRecord.of(trial)
        record.worker = me
        record.save(trial.set_user_attr, "worker")
        record.flags = as_flags(self.params_fn(trial), self.known_flags)
        record.save(trial.set_user_attr, "flags")
        resumed = {run.key: run for run in record.resume_runs}
        for seed in range(self.start_seed, self.start_seed + self.num_seeds):
            for env_id in self.settings.env_ids:
                run = RunRecord(env_id, seed)
                old = resumed.get(run.key)
                if old is not None:
                    run.dir, run.state = old.dir, "done" if old.state == "done" else "waiting"
                record.runs.append(run)
        how = f" (resumes trial {record.resumes})" if record.resumes is not None else ""
        print(f"[trial {trial.number}] {' '.join(record.flags) or '(no flags)'}{how}", flush=True)
        log_dir = self.settings.log_dir / f"trial_{trial.number:04d}"
        trial_run = TrialRun(self.settings, trial, record, log_dir)
        trial_run.start_next()
        return trial_run

    def finish_trial(self, study: TunerStudy, trial_run: TrialRun) -> None:
        number = trial_run.trial.number
        self.outcomes.append(trial_run.outcome)
        if trial_run.outcome == "failed" and len(self.outcomes) == 1:
            self.first_error = f"trial {number}, {trial_run.error}"
        if trial_run.outcome == "complete":
            study.tell(trial_run.trial, trial_run.value)
            print(f"[trial {number}] complete: objective {trial_run.value:.4g}", flush=True)
        elif trial_run.outcome == "pruned":
            study.tell(trial_run.trial, state=TrialState.PRUNED)
        else:
            study.tell(trial_run.trial, state=TrialState.FAIL)
        write_all(self.settings, study)

    # -- stopping and resuming ----------------------------------------------------------------

    def interrupt(self, study: TunerStudy, active: list[TrialRun]) -> None:
        """Ctrl-C: every running run gets SIGTERM (it checkpoints and exits with 75); each trial
        is marked failed and `interrupted`, and enqueued again with the same parameters and its
        run folders, which the next tuner resumes."""
        print(f"\n======= interrupted: stopping {len(active)} trials' runs", flush=True)
        stop_jobs([t.running for t in active if t.running is not None])
        for trial_run in active:
            self.requeue(study, trial_run.trial, trial_run.interrupted())

    def requeue(self, study: TunerStudy, trial, runs: list[RunRecord]) -> bool:
        """Marks a trial (a `Trial` or a `FrozenTrial`) failed and interrupted and enqueues its
        parameters with its runs, to be resumed. False when another tuner has done it first
        (the trial is finished)."""
        try:
            TrialRecord(interrupted=True, runs=runs).save(
                study.trial_attr_setter(trial.number), "interrupted", "runs"
            )
            study.tell(trial.number, state=TrialState.FAIL)
        except (ValueError, RuntimeError, optuna.exceptions.UpdateFinishedTrialError):
            return False
        resume = TrialRecord(resumes=trial.number, resume_runs=runs)
        study.enqueue_trial(dict(trial.params), user_attrs=resume.attrs("resumes", "resume_runs"))
        print(f"[trial {trial.number}] interrupted: enqueued again to resume its runs", flush=True)
        return True

    def recover_stale(self, study: TunerStudy, me: dict) -> None:
        """RUNNING trials left by a tuner that is gone (killed, or a requeued SLURM task): their
        runs resume in a new trial with the same parameters."""
        for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            record = TrialRecord.of(trial)
            if not is_stale(record.worker, me):
                continue
            print(f"[trial {trial.number}] left running by a tuner that is gone", flush=True)
            for run in record.runs:
                stop_orphan(run)
                if run.state == "running" and not run.dir:
                    # killed before it saw its run's folder: found by the trial's exp name, so
                    # that the trial resumes the run rather than start it again
                    run.dir = new_run_dir(
                        self.settings.runs_dir,
                        run.env_id,
                        trial_exp_name(self.settings.run_prefix, trial.number),
                        run.seed,
                        trial.datetime_start.timestamp() if trial.datetime_start else 0,
                    )
            self.requeue(study, trial, record.runs)
