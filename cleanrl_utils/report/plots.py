"""The learning-curve PNGs (matplotlib, imported only when a plot is made): one panel per env id,
one line per script, the mean over seeds with a band (one std, or a bootstrap interval) that the
caption names, the protocol in the title; a panel with no finished game says so instead of
drawing empty axes, one whose curves rest on few games or differ in steps says that."""

from __future__ import annotations

import math
from pathlib import Path

from cleanrl_utils.report.cells import Report
from cleanrl_utils.report.stats import curve_band, curve_values
from cleanrl_utils.report.style import save_figure, score_text
from cleanrl_utils.report.tables import fmt_steps

# Sized for a paper: a figure as wide as a page's text (7 inches) at print resolution, panels
# in two columns (3.5 inches each, a paper's column), more rows for more games
FIGURE_WIDTH = 7.0  # inches
PANEL_ASPECT = 0.7  # a panel's height over its width
LEGEND_HEIGHT = 0.5  # inches above the panels for the legend
PLOT_DPI = 200
NO_GAME = "no finished game"
CAPTION_SIZE = 7


def panel_grid(n: int) -> tuple[int, int]:
    """(rows, columns) of the panels for n env ids: two columns (a 7-inch page holds two
    readable panels side by side), four for more than 8 games; as many rows as needed."""
    ncols = min(n, 2) if n <= 8 else 4
    return math.ceil(n / max(ncols, 1)), max(ncols, 1)


def figure_size(n_envs: int) -> tuple[float, float]:
    """(width, height) in inches of a learning-curve figure with n_envs panels."""
    nrows, ncols = panel_grid(n_envs)
    return FIGURE_WIDTH, FIGURE_WIDTH / ncols * PANEL_ASPECT * nrows + LEGEND_HEIGHT


def plot_size(n_envs: int) -> tuple[int, int]:
    """(width, height) in pixels of a learning-curve PNG with n_envs panels."""
    width, height = figure_size(n_envs)
    return round(width * PLOT_DPI), round(height * PLOT_DPI)


def seeds_averaged(report: Report, script: str, env_ids) -> str:
    """How many seeds a script's curves average (its runs with a finished game), for the legend:
    `mean of 3 seeds`, or `mean of 2 to 3 seeds` where its panels differ."""
    counts = sorted(
        {
            sum(len(run.returns) > 0 for run in report.cells[script, env_id].runs)
            for env_id in env_ids
            if (script, env_id) in report.cells
        }
        - {0}
    )
    if not counts:
        return NO_GAME
    low, high = counts[0], counts[-1]
    seeds = f"{low} seed{'s' if low > 1 else ''}" if low == high else f"{low} to {high} seeds"
    return f"mean of {seeds}"


def script_label(report: Report, script: str, env_ids) -> str:
    """A line's name in the legend: the script (its exp name) and the seeds it averages; a
    tuner's trial says which trial of which study it is (its flags are in its config.json)."""
    runs = [r for e in env_ids if (script, e) in report.cells for r in report.cells[script, e].runs]
    trials = {run.tuner_trial for run in runs}
    seeds = seeds_averaged(report, script, env_ids)
    unfinished = sum(not run.finished for run in runs)
    if unfinished:  # (`--include-unfinished`)
        seeds += f"; {unfinished} unfinished"
    if len(trials) == 1 and None not in trials:
        ((study, trial),) = trials
        return f"{script}: tuner study {study}, trial {trial} ({seeds})"
    return f"{script} ({seeds})"


def without_games(report: Report, scripts, env_id: str) -> list[str]:
    """The scripts with runs on `env_id` but no finished game in any of them: no curve."""
    cells = [(s, report.cells.get((s, env_id))) for s in scripts]
    return [s for s, cell in cells if cell is not None and not cell.finals]


def empty_panel_text(report: Report, scripts, env_id: str) -> str | None:
    """What the panel of `env_id` says when none of its scripts has a curve, else None."""
    missing = without_games(report, scripts, env_id)
    if len(missing) < len(report.cells_of(scripts, [env_id])):
        return None
    return NO_GAME if len(scripts) == 1 else f"{NO_GAME}:\n" + "\n".join(missing)


def figure_legend(fig, handles, labels, title: str | None = None):
    """The legend above the panels, with as many names per row (up to 3) as fit the figure's
    width: long script names side by side would be cut off at its edges. `title`, the figure's,
    heads it (a title of its own would overlap it)."""
    renderer = fig.canvas.get_renderer()
    for ncol in range(min(len(labels), 3), 0, -1):
        legend = fig.legend(
            handles,
            labels,
            loc="outside upper center",
            ncol=ncol,
            fontsize=8,
            title=title,
            title_fontsize=10,
            frameon=False,
        )
        if ncol == 1 or legend.get_window_extent(renderer).width <= fig.bbox.width:
            return legend
        legend.remove()


def fewest_games(report: Report, script: str, env_id: str) -> int | None:
    """The fewest finished games of a seed (with at least one) of a script on an env id."""
    cell = report.cells.get((script, env_id))
    games = [len(run.returns) for run in cell.runs if len(run.returns)] if cell else []
    return min(games) if games else None


def panel_marks(report: Report, scripts, env_id: str) -> list[str]:
    """What a panel says about its curves: those drawn dashed because a seed finished fewer than
    `--curve-min-games` games, and step counts that differ between its runs (each curve stops
    where its shortest seed stops)."""
    marks = []
    few = [
        f"{script} {n}"
        for script in scripts
        if (n := fewest_games(report, script, env_id)) is not None
        and n < report.args.curve_min_games
    ]
    if few:  # a script a line: a panel is narrow
        marks.append("dashed, fewest games of a seed:\n" + "\n".join(few))
    runs = [run for cell in report.cells_of(scripts, [env_id]) for run in cell.runs]
    steps = sorted({run.last_step for run in runs if len(run.returns)})
    if len(steps) > 1:
        marks.append(f"steps differ: {' / '.join(map(fmt_steps, steps))}")
    return marks


def curves_caption(report: Report, scripts, env_ids, wall_clock: bool) -> str:
    """What a learning-curve figure's lines and bands are, as drawn: a curve of one seed has no
    band, the dashed and unfinished ones are named only when there are some."""
    args = report.args
    if args.curve_band == "ci":
        band = (
            f"{100 * args.confidence:g}% percentile bootstrap interval of that mean "
            f"({args.bootstrap_samples} resamples of the seeds)"
        )
    else:
        band = "± one standard deviation over seeds"
    cells = report.cells_of(scripts, env_ids)
    seeds = {sum(len(run.returns) > 0 for run in cell.runs) for cell in cells} - {0}
    runs = [run for cell in cells for run in cell.runs if len(run.returns)]
    axis = "minutes" if wall_clock else "steps"
    text = (
        f"Line: mean over seeds of each run's running mean of up to its last {args.last_n} "
        f"games, over the {axis} every seed covers (its last point: a run's score, "
        f"{score_text(runs, args.last_n)})"
    )
    if seeds == {1}:
        text += "; one seed a curve, so no band."
    elif 1 in seeds:
        text += f"; band: {band} (none where a curve has one seed)."
    else:
        text += f"; band: {band}."
    few = [r for r in runs if len(r.returns) < args.curve_min_games]
    if few:
        text += f" Dashed: a seed with fewer than {args.curve_min_games} finished games."
    if any(not run.finished for run in runs):
        text += " Runs below their step budget (`--include-unfinished`) are counted in the legend."
    return text


def plot_set(
    report: Report, scripts, env_ids, path: Path, wall_clock: bool, formats: list | None = None
) -> dict[str, str | None]:
    """The learning curves of a script set written to `path` (`curves_figure`), and beside it in
    each of `formats` (`curves_x.pdf`: the same name, another suffix). Returns {panel
    title: the text written in the panel instead of its curves (a panel with no finished game),
    or None}."""
    import matplotlib.pyplot as plt

    fig, panels = curves_figure(report, scripts, env_ids, wall_clock)
    try:
        save_figure(fig, path.parent, path.stem, formats or [path.suffix[1:]], PLOT_DPI)
    finally:
        plt.close(fig)
    return panels


def curves_figure(report: Report, scripts, env_ids, wall_clock: bool):
    """(figure, panels): one panel per env id, one line per script, the legend headed by the
    title (with the protocol), the caption below saying what the lines and bands are."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    nrows, ncols = panel_grid(len(env_ids))
    fig, axes = plt.subplots(
        nrows,
        ncols,
        figsize=figure_size(len(env_ids)),
        dpi=PLOT_DPI,
        squeeze=False,
        layout="constrained",
    )
    args = report.args
    band = (args.curve_band, args.bootstrap_samples, args.confidence, args.bootstrap_seed)
    panels: dict[str, str | None] = {}
    for i, ax in enumerate(axes.flat):
        if i >= len(env_ids):
            ax.set_axis_off()
            continue
        env_id = env_ids[i]
        for script in scripts:
            cell = report.cells.get((script, env_id))
            result = (
                curve_values(cell.runs, args.last_n, args.curve_points, wall_clock)
                if cell
                else None
            )
            color = report.colors.get(script, "k")
            label = script_label(report, script, env_ids)
            if result is None:
                ax.plot([], [], color=color, label=label)  # still in the legend
                continue
            x, values = result
            few = (fewest_games(report, script, env_id) or 0) < args.curve_min_games
            style = "--" if few else "-"
            ax.plot(x, values.mean(axis=0), style, color=color, label=label, linewidth=1.5)
            low, high = curve_band(values, *band)
            ax.fill_between(x, low, high, color=color, alpha=0.2, linewidth=0)
        panels[env_id] = empty_panel_text(report, scripts, env_id)
        if panels[env_id] is not None:  # no curve to draw: say why, not empty axes
            ax.set_title(env_id, fontsize=10)
            ax.set_xticks([])
            ax.set_yticks([])
            ax.text(0.5, 0.5, panels[env_id], ha="center", va="center", transform=ax.transAxes)
            continue
        # what a panel says of its curves goes under its title, never in a box over the data
        marks = panel_marks(report, scripts, env_id)
        ax.set_title("\n".join([env_id, *marks]), fontsize=8 if marks else 10)
        ax.set_xlabel("wall-clock time (minutes)" if wall_clock else "env steps", fontsize=8)
        ax.set_ylabel("episodic return", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    title = f"Learning curves, protocol: {report.protocol}"
    figure_legend(fig, *axes.flat[0].get_legend_handles_labels(), title)
    caption = curves_caption(report, scripts, env_ids, wall_clock).replace("`", "")
    fig.supxlabel(caption, fontsize=CAPTION_SIZE, wrap=True)
    return fig, panels
