"""`Tuner`: CleanRL's tuner arguments, run as an Optuna ask-and-tell loop over `workers` trials at
once, each trial a series of real processes of the training script (`trials.TrialRun`)."""

from __future__ import annotations

import os
import re
import socket
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import optuna
from optuna.trial import TrialState

from cleanrl_utils.checks import check_output_folder, fail
from cleanrl_utils.exits import FAILED, INTERRUPTED, StopRequest
from cleanrl_utils.pool import stop_jobs, thread_limits, usable_cpus
from cleanrl_utils.tuner.results import print_best, write_all
from cleanrl_utils.tuner.scores import AGGREGATIONS, Normalizer
from cleanrl_utils.tuner.space import (
    SpaceError,
    as_flags,
    check_flags,
    fixed_flag_names,
    probe_script,
)
from cleanrl_utils.tuner.storage import StorageError, check_storage, open_storage
from cleanrl_utils.tuner.trials import (
    RunState,
    TrialRun,
    new_run_dir,
    run_key,
    stop_orphan,
    trial_exp_name,
)

POLL_S = 0.5
# the study's log folder, LOG_DIR/STUDY_NAME: one folder inside LOG_DIR, never `..` or a path
STUDY_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._ -]{0,99}")


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
        `median`, `iqm`, `max`, `min`: over games), `metric_last_n_average_window`, `sampler`,
        `pruner` (None: Optuna's default, the median pruner), `storage` (an RDB URL, a journal
        file `*.log` or `journal:PATH`), `study_name` (default `tuner_{unix time}`),
        `wandb_kwargs` (`project`, `entity`: the runs are tracked with `--track`).

        This project's: `env_ids`; `script_args` (fixed flags of every run); `normalization`
        (`auto`: target scores where given, else human-normalised where the game has scores,
        else raw; `human`; `none`); `workers` (trials at once); `threads_per_run` (default:
        usable CPUs // workers); `pruning_marks` (intermediate values per run, at equal shares
        of its budget, and one after each run but the last; 0: none, so nothing is pruned);
        `start_seed`; `log_dir` (the runs' logs and
        the results); `python` (the interpreter of the runs). Bad settings raise ValueError."""
        self.script = script
        self.metric = metric
        self.target_scores = dict(target_scores or {})
        if params_fn is None:
            raise ValueError("no search space (params_fn): every trial would run the same flags")
        self.params_fn = params_fn
        if direction not in ("maximize", "minimize"):
            raise ValueError(f"direction must be maximize or minimize, got {direction!r}")
        self.direction = direction
        if aggregation_type not in AGGREGATIONS:
            raise ValueError(
                f"unknown aggregation type {aggregation_type!r} (one of {', '.join(AGGREGATIONS)})"
            )
        self.aggregation_type = aggregation_type
        if metric_last_n_average_window <= 0:
            raise ValueError("metric_last_n_average_window must be positive")
        self.metric_last_n_average_window = metric_last_n_average_window
        self.sampler = sampler
        self.pruner = pruner
        self.storage_text = storage
        self.study_name = study_name or f"tuner_{int(time.time())}"
        if not STUDY_NAME.fullmatch(self.study_name):
            raise ValueError(
                f"the study name {self.study_name!r} cannot name its log folder: 1 to 100 "
                "characters, only letters, digits, '.', '_', '-' and spaces, not starting with '.'"
            )
        self.env_ids = list(env_ids) if env_ids else list(self.target_scores)
        if not self.env_ids:
            raise ValueError("no env ids: give env_ids or target_scores")
        if len(set(self.env_ids)) < len(self.env_ids):
            raise ValueError(f"env ids repeated: {self.env_ids}")
        self.normalizer = Normalizer.make(self.env_ids, self.target_scores, normalization)
        self.script_args = (
            script_args.split() if isinstance(script_args, str) else list(script_args)
        )
        self.wandb_kwargs = dict(wandb_kwargs or {})
        unknown = set(self.wandb_kwargs) - {"project", "entity"}
        if unknown:
            raise ValueError(f"wandb_kwargs: only project and entity are passed on, not {unknown}")
        if self.wandb_kwargs:
            self.script_args += ["--track"]
            if "project" in self.wandb_kwargs:
                self.script_args += ["--wandb-project-name", str(self.wandb_kwargs["project"])]
            if "entity" in self.wandb_kwargs:
                self.script_args += ["--wandb-entity", str(self.wandb_kwargs["entity"])]
        if workers <= 0:
            raise ValueError(f"workers must be positive, got {workers}")
        if threads_per_run is not None and threads_per_run <= 0:
            raise ValueError(f"threads_per_run must be positive, got {threads_per_run}")
        if pruning_marks < 0:
            raise ValueError(f"pruning_marks must not be negative, got {pruning_marks}")
        self.workers = workers
        self.threads_per_run = threads_per_run or max(1, usable_cpus() // workers)
        self.pruning_marks = pruning_marks
        self.start_seed = start_seed
        self.log_dir = Path(log_dir) / self.study_name
        self.python = python
        self.runs_dir = Path("runs")  # where the scripts write (relative to the working folder)
        self.run_prefix = re.sub(r"[^A-Za-z0-9.-]+", "-", self.study_name).strip("-") or "tuner"
        self.run_env = {**os.environ, **thread_limits(self.threads_per_run)}
        if self.wandb_kwargs:
            self.run_env["WANDB_RUN_GROUP"] = self.study_name
        self.known_flags: set[str] | None = None

    # -- before anything starts ---------------------------------------------------------------

    def check(self) -> optuna.study.Study:
        """Everything that can be wrong before a trial starts: the log folder (exit code 74 when
        it cannot take files), the script's flags (the fixed ones and the search space's,
        against its `--help`), the env ids (the script's own check), the storage (opened last: a
        new SQLite file is made only then). Ends the process with one `error:` line and exit
        code 2."""
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        check_output_folder(self.log_dir, "--log-dir")  # (exit code 74)
        try:
            check_storage(self.storage_text)  # (creates nothing)
        except StorageError as e:
            fail(str(e))
        try:
            self.known_flags, env_problems = probe_script(self.python, self.script, self.env_ids)
            check_flags(
                fixed_flag_names(self.script_args), self.known_flags, self.script, "fixed flag"
            )
            probe = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0)).ask()
            sampled = self.params_fn(probe)  # a throwaway trial: the flags the space will set
            if not sampled:
                raise SpaceError(
                    "the search space is empty: every trial would run the script's defaults again"
                )
            check_flags(list(sampled), self.known_flags, self.script, "search space flag")
            if env_problems:
                raise SpaceError(env_problems[0])
        except SpaceError as e:
            fail(str(e))
        try:
            storage = open_storage(self.storage_text)
        except StorageError as e:
            fail(str(e))
        try:
            return optuna.create_study(
                storage=storage,
                sampler=self.sampler,
                pruner=self.pruner,
                study_name=self.study_name,
                direction=self.direction,
                load_if_exists=True,
            )
        except Exception as e:  # noqa: BLE001 (a storage error of any backend)
            fail(f"cannot create or load the study {self.study_name!r} in {self.storage_text}: {e}")

    # -- the loop -----------------------------------------------------------------------------

    def tune(self, num_trials: int, num_seeds: int):
        """Runs trials until the study has `num_trials` of them (complete, pruned or failed;
        trials stopped by Ctrl-C are resumed, not counted), `workers` at once; each trial runs
        every env id with `num_seeds` seeds. Returns the best trial (None if none completed).
        Ctrl-C (or SIGTERM) stops the running runs with a checkpoint and exits with 130; the
        same call again continues the study."""
        if num_trials <= 0 or num_seeds <= 0:
            fail(f"num_trials and num_seeds must be positive, got {num_trials} and {num_seeds}")
        study = self.check()
        self.study = study
        self.num_seeds = num_seeds
        me = worker_id()
        fresh_draws(study)
        self.recover_stale(study, me)
        print(
            f"======= study {self.study_name!r} in {self.storage_text}: {num_trials} trials of "
            f"{len(self.env_ids)} env ids x {num_seeds} seeds, {self.workers} at a time, "
            f"{self.threads_per_run} threads per run; logs in {self.log_dir}/\n"
            f"objective: {self.direction} the {self.aggregation_type} over games of "
            f"{self.metric} (last {self.metric_last_n_average_window} values), normalised: "
            f"{self.normalizer.describe()}",
            flush=True,
        )
        active: list[TrialRun] = []
        # as inside `study.optimize`: a sampler may end the study (GridSampler, when its grid is
        # done) with `study.stop()`, which sets `_stop_flag`
        study._thread_local.in_optimize_loop = True
        study._stop_flag = False
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
        write_all(self, study)
        if stop.requested:
            print(
                f"======= interrupted: {len(active)} trials stopped with checkpoints; the same "
                "command continues the study (they resume)",
                flush=True,
            )
            raise SystemExit(INTERRUPTED)
        best = print_best(self, study)
        if self.outcomes and set(self.outcomes) == {"failed"}:
            print(
                f"error: every trial this tuner ran failed ({len(self.outcomes)}; the first: "
                f"{self.first_error}); their logs are in {self.log_dir}/",
                file=sys.stderr,
                flush=True,
            )
            raise SystemExit(FAILED)
        return best

    def wants_more(self, study, num_trials: int) -> bool:
        if study._stop_flag:
            return False
        trials = study.get_trials(deepcopy=False)
        if any(t.state == TrialState.WAITING for t in trials):
            return True  # an interrupted trial, to resume
        counted = [t for t in trials if not t.user_attrs.get("interrupted")]
        return len(counted) < num_trials

    def start_trial(self, study, me: dict) -> TrialRun:
        trial = study.ask()
        trial.set_user_attr("worker", me)
        params = self.params_fn(trial)
        flags = as_flags(params, self.known_flags)
        trial.set_user_attr("flags", flags)
        resumed = trial.user_attrs.get("resume_runs") or {}
        runs = []
        for seed in range(self.start_seed, self.start_seed + self.num_seeds):
            for env_id in self.env_ids:
                old = resumed.get(run_key(env_id, seed)) or {}
                state = "done" if old.get("state") == "done" else "waiting"
                runs.append(RunState(env_id, seed, dir=old.get("dir"), state=state))
        how = (
            f" (resumes trial {trial.user_attrs['resumes']})"
            if "resumes" in trial.user_attrs
            else ""
        )
        print(f"[trial {trial.number}] {' '.join(flags) or '(no flags)'}{how}", flush=True)
        trial_run = TrialRun(self, trial, flags, runs, self.log_dir / f"trial_{trial.number:04d}")
        trial_run.start_next()
        return trial_run

    def finish_trial(self, study, trial_run: TrialRun) -> None:
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
        write_all(self, study)

    # -- stopping and resuming ----------------------------------------------------------------

    def interrupt(self, study, active: list[TrialRun]) -> None:
        """Ctrl-C: every running run gets SIGTERM (it checkpoints and exits with 75); each trial
        is marked failed and `interrupted`, and enqueued again with the same parameters and its
        run folders, which the next tuner resumes."""
        print(f"\n======= interrupted: stopping {len(active)} trials' runs", flush=True)
        stop_jobs([t.running for t in active if t.running is not None])
        for trial_run in active:
            self.requeue(study, trial_run.trial, trial_run.interrupted())

    def requeue(self, study, trial, runs: dict) -> bool:
        """Marks a trial failed and interrupted and enqueues its parameters with its runs, to
        be resumed. False when another tuner has done it first (the trial is finished)."""
        try:
            trial_id = trial._trial_id
            study._storage.set_trial_user_attr(trial_id, "interrupted", True)
            study._storage.set_trial_user_attr(trial_id, "runs", runs)
            study.tell(trial.number, state=TrialState.FAIL)
        except (ValueError, RuntimeError, optuna.exceptions.UpdateFinishedTrialError):
            return False
        study.enqueue_trial(
            dict(trial.params), user_attrs={"resumes": trial.number, "resume_runs": runs}
        )
        print(f"[trial {trial.number}] interrupted: enqueued again to resume its runs", flush=True)
        return True

    def recover_stale(self, study, me: dict) -> None:
        """RUNNING trials left by a tuner that is gone (killed, or a requeued SLURM task): their
        runs resume in a new trial with the same parameters."""
        for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            if is_stale(trial.user_attrs.get("worker"), me):
                print(f"[trial {trial.number}] left running by a tuner that is gone", flush=True)
                runs = trial.user_attrs.get("runs") or {}
                for key, record in runs.items():
                    stop_orphan(record)
                    if record.get("state") == "running" and not record.get("dir"):
                        # killed before it saw its run's folder: found by the trial's exp name,
                        # so that the trial resumes the run rather than start it again
                        env_id, _, seed = key.rpartition("|")
                        record["dir"] = new_run_dir(
                            self.runs_dir,
                            env_id,
                            trial_exp_name(self.run_prefix, trial.number),
                            int(seed),
                            trial.datetime_start.timestamp() if trial.datetime_start else 0,
                        )
                self.requeue(study, trial, runs)
