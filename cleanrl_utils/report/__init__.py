# docs: docs/report.md
"""The report tool, `python -m cleanrl_utils.report runs/`: tables and plots from the TensorBoard
logs of finished runs, offline. One module per job:

- `events`: reading event files (the TFRecord framing by hand, protobuf only where needed);
- `loading`: run folders found, read back as `RunLog`s (script, env id, seed, status, numbers);
- `selection`: the runs a report keeps (`--sweep`, `--exp-name`, `--env-id`, `--since`);
- `stats`: mean ± std, learning curves and their bands, the reference scores;
- `estimates`: rliable's statistics (interval estimates, performance profiles, probability of
  improvement) with its stratified bootstrap, without rliable;
- `tables`: markdown tables and number formats (also used by `benchmark/throughput.py`);
- `cells`: the `Benchmark` (the runs split by protocol) and each protocol's `Report`, its runs
  grouped into cells and script sets, and the notes;
- `sections`: the report's markdown sections; `plots`: the learning-curve PNGs;
- `aggregate`: the human-normalised aggregates of a protocol; `figures`: their PNGs;
- `variants`: a run's experiment: the variants of an exp name, `--label`;
- `style`: one colour per method, the figure formats, how a run's score is said;
- `atari5`: the Atari-5 models and game sets; `suite`: each method's 57-game estimate;
- `paper`: the paper kit (`evaluation.md`, `aggregate.tex`, `references.bib`, the tables of
  differing arguments and of software); `references`: the works it cites;
- `options`: the flags (`Args`); `cli`: `main`, which reads the runs and writes every file.
"""

from cleanrl_utils.report.cells import Benchmark, Cell, Report
from cleanrl_utils.report.cli import main, write_report
from cleanrl_utils.report.estimates import (
    interval_estimates,
    performance_profile,
    probability_of_improvement,
)
from cleanrl_utils.report.events import EventData, event_files, read_event_file
from cleanrl_utils.report.loading import (
    RETURN_TAG,
    SPS_TAG,
    RunLog,
    find_run_dirs,
    load_run,
    load_runs,
    read_protocol,
)
from cleanrl_utils.report.options import Args
from cleanrl_utils.report.plots import panel_grid, plot_set, plot_size
from cleanrl_utils.report.stats import (
    aggregate_with_ci,
    curve,
    load_human_random,
    load_published,
    mean_std,
    trimmed_mean,
)
from cleanrl_utils.report.tables import markdown_table

__all__ = [
    "RETURN_TAG",
    "SPS_TAG",
    "Args",
    "Benchmark",
    "Cell",
    "EventData",
    "Report",
    "RunLog",
    "aggregate_with_ci",
    "curve",
    "event_files",
    "find_run_dirs",
    "interval_estimates",
    "load_human_random",
    "load_published",
    "load_run",
    "load_runs",
    "main",
    "markdown_table",
    "mean_std",
    "panel_grid",
    "performance_profile",
    "plot_set",
    "plot_size",
    "probability_of_improvement",
    "read_event_file",
    "read_protocol",
    "trimmed_mean",
    "write_report",
]
