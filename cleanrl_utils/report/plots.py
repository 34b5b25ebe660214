"""The learning-curve PNGs (matplotlib, imported only when a plot is made): one panel per env id,
one line per script, the mean over seeds with a band of one std."""

from __future__ import annotations

import math
from pathlib import Path

from cleanrl_utils.report.cells import Report
from cleanrl_utils.report.stats import curve

PANEL_SIZE = (4.0, 3.0)  # inches per panel
LEGEND_HEIGHT = 0.5  # inches above the panels for the legend
PLOT_DPI = 100


def panel_grid(n: int) -> tuple[int, int]:
    """(rows, columns) of the panels for n env ids: up to 3 columns, more for many games."""
    ncols = min(n, 3) if n <= 9 else math.ceil(math.sqrt(n))
    return math.ceil(n / max(ncols, 1)), max(ncols, 1)


def plot_size(n_envs: int) -> tuple[int, int]:
    """(width, height) in pixels of a learning-curve PNG with n_envs panels."""
    nrows, ncols = panel_grid(n_envs)
    return (
        round(PANEL_SIZE[0] * ncols * PLOT_DPI),
        round((PANEL_SIZE[1] * nrows + LEGEND_HEIGHT) * PLOT_DPI),
    )


def plot_set(report: Report, scripts, env_ids, path: Path, wall_clock: bool) -> list[str]:
    """One panel per env id, one line per script; returns the panel titles."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    nrows, ncols = panel_grid(len(env_ids))
    fig, axes = plt.subplots(
        nrows,
        ncols,
        figsize=(PANEL_SIZE[0] * ncols, PANEL_SIZE[1] * nrows + LEGEND_HEIGHT),
        dpi=PLOT_DPI,
        squeeze=False,
        layout="constrained",
    )
    colors = plt.get_cmap("tab10")
    last_n, points = report.args.last_n, report.args.curve_points
    titles = []
    for i, ax in enumerate(axes.flat):
        if i >= len(env_ids):
            ax.set_axis_off()
            continue
        env_id = env_ids[i]
        titles.append(env_id)
        ax.set_title(env_id, fontsize=10)
        for script in scripts:
            cell = report.cells.get((script, env_id))
            result = curve(cell.runs, last_n, points, wall_clock) if cell else None
            color = colors(report.scripts.index(script) % 10)
            if result is None:
                ax.plot([], [], color=color, label=script)
                continue
            x, mean, std = result
            ax.plot(x, mean, color=color, label=script, linewidth=1.5)
            ax.fill_between(x, mean - std, mean + std, color=color, alpha=0.2, linewidth=0)
        ax.set_xlabel("wall-clock time (minutes)" if wall_clock else "env steps", fontsize=8)
        ax.set_ylabel("episodic return", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside upper center", ncol=min(len(scripts), 3), fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=PLOT_DPI)
    plt.close(fig)
    return titles
