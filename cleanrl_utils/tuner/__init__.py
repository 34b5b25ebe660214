# docs: docs/tuning.md
"""The Optuna tuner: `Tuner` (CleanRL's arguments) and `python -m cleanrl_utils.tuner`. One
module per job:

- `storage`: the `--storage` flag: an RDB URL (SQLite by default) or a journal file;
- `space`: the search space (`--param NAME=KIND:ARGS`), the script's flags from its `--help`;
- `scores`: the objective: the metric from the event files, normalised, aggregated over games;
- `trials`: one trial's runs as processes, intermediate values, pruning with SIGTERM;
- `study`: `Tuner`, the ask-and-tell loop over `workers` trials, Ctrl-C and resuming;
- `results`: the table of trials (markdown, CSV), the plot, the best trial's command;
- `cli`: the command line.
"""

from cleanrl_utils.tuner.study import Tuner

__all__ = ["Tuner"]
