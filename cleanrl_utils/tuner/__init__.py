# docs: docs/tuning.md
"""The Optuna tuner: `Tuner` (CleanRL's arguments) and `python -m cleanrl_utils.tuner`. One
module per job:

- `state`: the tuner's state as typed values: the settings its trials and results read (one
  frozen `Settings`), a trial's record in the study (`TrialRecord`: the only code that names
  Optuna's user attributes); bad input is a `RunError` (`cleanrl_utils.console.errors`), one
  `error:` line at the entry point;
- `storage`: the `--storage` flag: an RDB URL (SQLite by default) or a journal file;
- `space`: the search space (`--param NAME=KIND:ARGS`), the script's flags from its `Args`
  dataclass, read by `probe` (`python -m cleanrl_utils.tuner.probe`, run with the script's
  interpreter, which imports the script and asks its env id check);
- `scores`: the objective: the metric from the event files, normalised, aggregated over games;
- `trials`: one trial's runs as processes (`cleanrl_utils.benchmark.pool`), intermediate values, pruning
  with SIGTERM;
- `study`: `Tuner`, the ask-and-tell loop over `workers` trials, Ctrl-C and resuming;
- `results`: the table of trials (markdown, CSV), the plot, the best trial's command;
- `cli`: the command line.
"""

__all__ = ["Tuner"]


def __getattr__(name: str):
    # Optuna is imported only when `Tuner` is used: `python -m cleanrl_utils.tuner` without the
    # `optuna` extra then ends with the one line naming its install command, not a traceback
    if name == "Tuner":
        from cleanrl_utils.tuner.study import Tuner

        return Tuner
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
