# docs: docs/report.md
"""The report tool, `python -m cleanrl_utils.report runs/`: tables and plots from the TensorBoard
logs of finished runs, offline. One module per job:

- `events`: reading event files (the TFRecord framing by hand, protobuf only where needed);
- `runlogs`: run folders found, read back as `RunLog`s (script, env id, seed, status, numbers);
- `stats`: mean ± std, learning curves, the human-normalised aggregate, the reference scores;
- `tables`: markdown tables and number formats (also used by `benchmark/throughput.py`);
- `cells`: the `Report`, its runs grouped into cells and script sets, and the notes;
- `sections`: the report's markdown sections; `plots`: the learning-curve PNGs;
- `options`: the flags (`Args`); `cli`: `main`, which reads the runs and writes every file.
"""

from cleanrl_utils.report.cells import Cell, Report
from cleanrl_utils.report.cli import main, write_report
from cleanrl_utils.report.events import EventData, event_files, read_event_file
from cleanrl_utils.report.options import Args
from cleanrl_utils.report.plots import panel_grid, plot_set, plot_size
from cleanrl_utils.report.runlogs import (
    RETURN_TAG,
    SPS_TAG,
    RunLog,
    find_run_dirs,
    load_run,
    load_runs,
)
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
    "Cell",
    "EventData",
    "Report",
    "RunLog",
    "aggregate_with_ci",
    "curve",
    "event_files",
    "find_run_dirs",
    "load_human_random",
    "load_published",
    "load_run",
    "load_runs",
    "main",
    "markdown_table",
    "mean_std",
    "panel_grid",
    "plot_set",
    "plot_size",
    "read_event_file",
    "trimmed_mean",
    "write_report",
]
