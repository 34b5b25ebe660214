"""The aggregates' figures, as rliable draws them and sized for a paper (matplotlib, imported only
when a figure is made): the interval estimates of the median, IQM, mean and optimality gap; the
performance profiles with their bands, on a linear and a log-scaled score axis; the probability
of improvement of each script over each other one. Each names its protocol in its title and the
runs and games it is made of in its caption."""

from __future__ import annotations

import itertools
from pathlib import Path

from cleanrl_utils.report.aggregate import LOG_TAU_FROM, Aggregate
from cleanrl_utils.report.estimates import METRICS
from cleanrl_utils.report.plots import figure_legend
from cleanrl_utils.report.style import save_figure
from cleanrl_utils.report.tables import plural

FIGURE_WIDTH = 7.0  # inches: a page's text
PLOT_DPI = 200
CAPTION_SIZE = 7


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def caption(agg: Aggregate, what: str) -> str:
    """The runs and games a figure is made of, and what its intervals are."""
    runs = "; ".join(
        f"{s}: {plural(agg.runs(s), 'run')} ({agg.seeds(s)} a game)" for s in agg.scripts
    )
    level = f"{100 * agg.confidence:g}%"
    text = (
        f"{plural(len(agg.games), 'game')}, {runs}. A run's score: {agg.score}, "
        f"human-normalised. {what} {level} stratified bootstrap intervals ({agg.samples} "
        "resamples of the seeds of each game)."
    )
    return text + (f" {agg.min_games[0].upper()}{agg.min_games[1:]}." if agg.min_games else "")


def _finish(fig, agg: Aggregate, title: str | None, what: str):
    """The figure with its title (unless a legend holds it) and its caption."""
    if title is not None:
        fig.suptitle(title, fontsize=10)
    fig.supxlabel(caption(agg, what).replace("`", ""), fontsize=CAPTION_SIZE, wrap=True)
    return fig


def estimates_figure(agg: Aggregate):
    """rliable's interval-estimates figure: a panel per statistic, a bar per script spanning its
    interval, a tick at its point estimate."""
    plt = _pyplot()
    rows = len(agg.scripts)
    height = 0.9 + 0.35 * rows + 0.6
    fig, axes = plt.subplots(
        1, len(METRICS), figsize=(FIGURE_WIDTH, height), dpi=PLOT_DPI, layout="constrained"
    )
    colors = agg.colors
    for ax, (metric, name) in zip(axes, METRICS.items()):
        for i, script in enumerate(agg.scripts):
            point, low, high = agg.estimates[script][metric]
            ax.barh(i, high - low, left=low, height=0.6, color=colors[script], alpha=0.75)
            ax.vlines(point, i - 0.3, i + 0.3, color="k")
        better = "lower" if metric == "optimality_gap" else "higher"
        ax.set_title(f"{name}\n({better} is better)", fontsize=8)
        ax.set_yticks(range(rows))
        ax.set_yticklabels(agg.scripts if ax is axes[0] else [], fontsize=7)
        ax.set_ylim(rows - 0.5, -0.5)
        ax.set_xlabel("human-normalised score", fontsize=7)
        ax.tick_params(labelsize=6)
        ax.xaxis.set_major_locator(plt.MaxNLocator(4))
        ax.grid(axis="x", alpha=0.3)
    return _finish(
        fig,
        agg,
        f"Interval estimates, protocol: {agg.protocol}",
        "Bars: point estimate (tick) and",
    )


def profiles_figure(agg: Aggregate):
    """Performance profiles: the fraction of runs above each score tau, with bands, against a
    linear and a log-scaled tau."""
    plt = _pyplot()
    from matplotlib.ticker import FuncFormatter

    fig, axes = plt.subplots(
        1, 2, figsize=(FIGURE_WIDTH, 3.4), dpi=PLOT_DPI, layout="constrained", sharey=True
    )
    colors = agg.colors
    for ax, log in zip(axes, (False, True)):
        shown = agg.taus >= LOG_TAU_FROM if log else agg.taus >= 0
        for script in agg.scripts:
            point, low, high = (v[shown] for v in agg.profiles[script])
            ax.plot(agg.taus[shown], point, color=colors[script], linewidth=1.5, label=script)
            ax.fill_between(agg.taus[shown], low, high, color=colors[script], alpha=0.2, lw=0)
        if log:
            ax.set_xscale("log")
            ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        ax.set_xlabel("human-normalised score τ" + (" (log scale)" if log else ""), fontsize=8)
        ax.set_ylim(-0.02, 1.02)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("fraction of runs with score > τ", fontsize=8)
    title = f"Performance profiles, protocol: {agg.protocol}"
    figure_legend(fig, *axes[0].get_legend_handles_labels(), title)
    return _finish(fig, agg, None, "Bands:")


def improvement_figure(agg: Aggregate):
    """rliable's probability-of-improvement figure: a bar per pair of scripts spanning the
    interval of P(X > Y), a tick at its estimate; X named on the left, Y on the right."""
    plt = _pyplot()
    pairs = list(itertools.combinations(agg.scripts, 2))
    height = 0.9 + 0.35 * len(pairs) + 0.6
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH, height), dpi=PLOT_DPI, layout="constrained")
    for i, pair in enumerate(pairs):  # a bar in the colour of its X
        point, low, high = agg.improvement[pair]
        ax.barh(i, high - low, left=low, height=0.6, color=agg.colors[pair[0]], alpha=0.75)
        ax.vlines(point, i - 0.3, i + 0.3, color="k")
    ax.axvline(0.5, color="grey", linestyle="--", linewidth=0.8)
    ax.set_xlim(0, 1)
    ax.set_ylim(len(pairs) - 0.5, -0.5)
    ax.set_yticks(range(len(pairs)))
    ax.set_yticklabels([x for x, _ in pairs], fontsize=7)
    ax.set_ylabel("script X", fontsize=8)
    right = ax.twinx()
    right.set_ylim(ax.get_ylim())
    right.set_yticks(range(len(pairs)))
    right.set_yticklabels([y for _, y in pairs], fontsize=7)
    right.set_ylabel("script Y", fontsize=8)
    ax.set_xlabel("P(X > Y): probability that a run of X scores above a run of Y", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(axis="x", alpha=0.3)
    title = f"Probability of improvement, protocol: {agg.protocol}"
    return _finish(fig, agg, title, "Bars: estimate (tick) and")


def write_figures(
    agg: Aggregate,
    out: Path,
    suffix: str,
    notes: list[str],
    formats: tuple[str, ...] | list[str] = ("png",),
) -> dict[str, str]:
    """The figures of `agg` under `out` (`estimates{suffix}.png`, `profiles{suffix}.png`,
    `improvement{suffix}.png` with two scripts or more), each in every one of `formats`;
    {kind: file name in the first format} of those written. A figure that fails is a note: a
    figure never takes the tables down with it."""
    plots = {"estimates": estimates_figure, "profiles": profiles_figure}
    if len(agg.scripts) > 1:
        plots["improvement"] = improvement_figure
    written = {}
    for kind, figure in plots.items():
        name = f"{kind}{suffix}.{formats[0]}"
        try:
            fig = figure(agg)
            try:
                name = save_figure(fig, out, f"{kind}{suffix}", formats, PLOT_DPI)
            finally:
                _pyplot().close(fig)
        except Exception as exc:
            notes.append(f"plot `{name}` failed: {type(exc).__name__}: {exc}")
            continue
        written[kind] = name
    return written
