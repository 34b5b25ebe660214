"""The tuner's state as typed values:

- `Settings`: what a trial and the results need of their tuner, one frozen value passed down;
- `TrialRecord` and `RunRecord`: a trial's record in the study, kept as Optuna user attributes;
  their names and their conversion to and from those attributes are here and nowhere else.

Bad input is a `RunError` (`cleanrl_utils.console.errors`), as everywhere in the package.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cleanrl_utils.files.sweeps import sweep_id
from cleanrl_utils.tuner.scores import Normalizer


@dataclass(frozen=True)
class Settings:
    """A tuner's settings, as its trials and its results read them."""

    script: str
    script_args: tuple[str, ...]  # fixed flags of every run (with W&B's, if tracked)
    python: str  # the interpreter of the runs
    env_ids: tuple[str, ...]
    metric: str
    metric_last_n_average_window: int
    aggregation_type: str
    direction: str
    normalizer: Normalizer
    pruning_marks: int
    study_name: str
    storage_text: str
    log_dir: Path  # LOG_DIR/STUDY_NAME: the runs' logs and the results
    runs_dir: Path  # where the scripts write their run folders
    run_prefix: str  # a trial's runs are `--exp-name {run_prefix}-trial{number}`
    run_env: Mapping[str, str]  # the runs' environment (thread limits, W&B group)

    @property
    def sweep(self) -> str:
        """The study's sweep: every trial's runs record it (config.json's `sweep`), the same for
        every tuner of the study, so that `python -m cleanrl_utils.report runs --sweep ID` reads
        exactly the study's runs."""
        return sweep_id(self.run_prefix, {"study": self.study_name})


def run_key(env_id: str, seed: int) -> str:
    return f"{env_id}|{seed}"


RUN_FIELDS = ("dir", "state", "score", "log", "steps", "budget", "process")


@dataclass
class RunRecord:
    """One run of a trial (one env id and seed), as recorded in the trial's `runs`."""

    env_id: str
    seed: int
    dir: str | None = None
    state: str = "waiting"  # waiting, running, done, pruned, stopped, failed
    score: float | None = None  # the metric, averaged over the window
    log: str | None = None
    steps: int | None = None  # the environment steps it ran (its last logged step)
    budget: int | None = None  # its --total-timesteps, in whole iterations
    process: dict | None = None  # host, pid and script of its process while it runs

    @property
    def key(self) -> str:
        return run_key(self.env_id, self.seed)


def runs_from_attr(value: Mapping | None) -> list[RunRecord]:
    runs = []
    for key, attrs in (value or {}).items():
        env_id, _, seed = key.rpartition("|")
        known = {name: attrs[name] for name in RUN_FIELDS if name in attrs}
        runs.append(RunRecord(env_id, int(seed), **known))
    return runs


def runs_attr(runs: list[RunRecord]) -> dict:
    return {run.key: {name: getattr(run, name) for name in RUN_FIELDS} for run in runs}


@dataclass
class TrialRecord:
    """A trial's record in the study: one Optuna user attribute per field, written by the tuner
    that runs the trial (or requeues it) and read by every tuner and by the results."""

    worker: dict | None = None  # the tuner that runs it: host, pid, SLURM array task
    flags: list[str] = field(default_factory=list)  # its parameters as the script's flags
    runs: list[RunRecord] = field(default_factory=list)
    error: str | None = None  # a failed trial's: which run failed, how, its log's last lines
    pruned_at_step: int | None = None  # a trial pruned inside a run: the step of its mark
    interrupted: bool = False  # stopped by Ctrl-C or its tuner's end, and resumed in a new trial
    resumes: int | None = None  # an enqueued trial's: the number of the trial it resumes
    resume_runs: list[RunRecord] = field(default_factory=list)  # and that trial's runs

    @classmethod
    def of(cls, trial) -> TrialRecord:
        """The record of an Optuna trial (a `Trial` or a `FrozenTrial`)."""
        attrs = trial.user_attrs
        return cls(
            worker=attrs.get("worker"),
            flags=list(attrs.get("flags", [])),
            runs=runs_from_attr(attrs.get("runs")),
            error=attrs.get("error"),
            pruned_at_step=attrs.get("pruned_at_step"),
            interrupted=bool(attrs.get("interrupted")),
            resumes=attrs.get("resumes"),
            resume_runs=runs_from_attr(attrs.get("resume_runs")),
        )

    def attrs(self, *names: str) -> dict[str, Any]:
        """The user attributes of the fields `names`."""
        out = {}
        for name in names:
            value = getattr(self, name)
            out[name] = runs_attr(value) if name in ("runs", "resume_runs") else value
        return out

    def save(self, set_user_attr: Callable[[str, Any], None], *names: str) -> None:
        """Writes the fields `names` (each a storage write) with `trial.set_user_attr`, or
        the storage's `set_trial_user_attr` bound to the trial's id."""
        for name, value in self.attrs(*names).items():
            set_user_attr(name, value)
