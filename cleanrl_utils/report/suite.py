"""The suite-level answer without 57 games: for each method (exp name or variant) of a protocol
that ran every game of Atari-5, Atari-10 or Atari-3-Val, the model's estimate of its 57-game median
human-normalised score (`atari5.py`), with a stratified bootstrap interval over seeds, the model's
cross-validated error and its caveat, for aggregate.md, a figure, the paragraph and a LaTeX table;
a method with some but not all games of a set gets a note naming the missing ones."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cleanrl_utils.report.atari5 import (
    CAVEAT,
    COEFFICIENTS,
    ERRORS,
    MODELS,
    NAMES,
    estimate_with_interval,
    missing_games,
)
from cleanrl_utils.report.cells import Report
from cleanrl_utils.report.stats import game_name
from cleanrl_utils.report.tables import markdown_table, plural


@dataclass
class SuiteEstimate:
    """One method's estimate of the 57-game median HNS (percent) from one model's games."""

    model: str  # `atari5`, `atari10`, `atari3-val`
    method: str
    point: float
    low: float
    high: float
    seeds: str  # `3 seeds a game`, `2 to 3 seeds a game`

    @property
    def name(self) -> str:
        return NAMES[self.model]

    def text(self) -> str:
        """`76.6% [70.1%, 80.2%]`."""
        return f"{self.point:.1f}% [{self.low:.1f}%, {self.high:.1f}%]"


def returns_by_game(report: Report, method: str) -> dict[str, np.ndarray]:
    """game -> the final returns of a method's seeds (its env ids of one game together)."""
    found: dict[str, list[float]] = {}
    for (script, env_id), cell in sorted(report.cells.items()):
        if script == method and cell.finals:
            found.setdefault(game_name(env_id), []).extend(cell.finals)
    return {game: np.asarray(values) for game, values in found.items()}


def suite_estimates(report: Report) -> tuple[list[SuiteEstimate], list[str]]:
    """The estimates of every method of `report` and model whose games it ran (Atari-5 first),
    and a line for each method that ran more than half but not all of a model's games (one game of
    a set, Qbert in a sweep of three games, is no attempt at the set; Atari-5's five games are
    half of Atari-10's)."""
    args = report.args
    estimates, lines = [], []
    for method in report.scripts:
        games = returns_by_game(report, method)
        for model in MODELS:
            missing = missing_games(model, games)
            present = len(COEFFICIENTS[model]) - len(missing)
            if not missing:
                counts = sorted({len(games[g]) for g in COEFFICIENTS[model]})
                seeds = plural(counts[0], "seed") if len(counts) == 1 else (
                    f"{counts[0]} to {counts[-1]} seeds"
                )  # fmt: skip
                point, low, high = estimate_with_interval(
                    model, {g: games[g] for g in COEFFICIENTS[model]},
                    args.bootstrap_samples, args.confidence, args.bootstrap_seed,
                )  # fmt: skip
                estimates.append(SuiteEstimate(model, method, point, low, high, f"{seeds} a game"))
            elif 2 * present > len(COEFFICIENTS[model]):  # (a set it meant to run)
                lines.append(
                    f"{method}: no {NAMES[model]} estimate of the 57-game median: it lacks "
                    f"{', '.join(missing)} (it ran {present} of the set's "
                    f"{len(COEFFICIENTS[model])} games)"
                )
    return estimates, lines


def suite_markdown(report: Report, estimates: list[SuiteEstimate], lines: list[str]) -> str:
    """The estimates' table for aggregate.md, with what they mean and do not."""
    if not estimates and not lines:
        return ""
    text = "#### The 57-game median, estimated from a few games\n\n"
    if estimates:
        level = f"{100 * report.args.confidence:g}%"
        rows = [
            [
                e.method,
                e.name,
                e.text(),
                f"± {100 * ERRORS[e.model]:.1f}%",
                e.seeds,
            ]
            for e in estimates
        ]
        text += (
            "The 57-game median human-normalised score of each method, estimated by the "
            "Atari-5 models (Aitchison, Sweetser and Hutter, 2023) from its games' mean scores "
            f"over seeds (normalised with the scores the models were fitted with), with a {level} "
            f"stratified bootstrap interval over seeds ({report.args.bootstrap_samples} "
            "resamples) and the model's own cross-validated mean error (relative), which the "
            f"interval does not hold. **{CAVEAT}**\n\n"
        )
        text += markdown_table(
            ["method", "model", f"estimate [{level} interval]", "model's error", "seeds"], rows
        )
    if lines:
        text += "\n" + "".join(f"- {line}\n" for line in lines)
    return text + "\n"


def suite_sentence(estimates: list[SuiteEstimate], latex: bool) -> str:
    """The paragraph's sentence on the estimates (empty without one)."""
    if not estimates:
        return ""
    cite = "\\citep{aitchison2023atari5}" if latex else "(Aitchison, Sweetser and Hutter, 2023)"
    parts = [
        f"{e.method} {e.text()} by {e.name} (its cross-validated error: "
        f"{100 * ERRORS[e.model]:.1f}%)"
        for e in estimates
    ]
    return (
        " We estimate the median human-normalised score over all 57 games from a few games with "
        f"the linear models of Atari-5 {cite}: {'; '.join(parts)}, with 95% stratified "
        f"bootstrap intervals over seeds. {CAVEAT}"
    )


def suite_figure(estimates: list[SuiteEstimate], colors: dict[str, str], protocol: str):
    """The estimates as rliable draws intervals: a bar per method and model spanning its
    interval, a tick at the point, and the model's error as a thin line around the point."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from cleanrl_utils.report.figures import CAPTION_SIZE, FIGURE_WIDTH, PLOT_DPI

    rows = len(estimates)
    fig, ax = plt.subplots(
        figsize=(FIGURE_WIDTH, 1.3 + 0.35 * rows + 0.6), dpi=PLOT_DPI, layout="constrained"
    )
    for i, e in enumerate(estimates):
        ax.barh(
            i, e.high - e.low, left=e.low, height=0.6, color=colors.get(e.method, "k"), alpha=0.75
        )
        error = ERRORS[e.model] * e.point
        ax.hlines(i, e.point - error, e.point + error, color="k", linewidth=0.8)
        ax.vlines(e.point, i - 0.3, i + 0.3, color="k")
    ax.set_yticks(range(rows))
    ax.set_yticklabels([f"{e.method}\n({e.name})" for e in estimates], fontsize=7)
    ax.set_ylim(rows - 0.5, -0.5)
    ax.set_xlabel("estimated 57-game median human-normalised score (%)", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(axis="x", alpha=0.3)
    fig.suptitle(
        f"The 57-game median estimated from a few games, protocol: {protocol}", fontsize=10
    )
    caption = (
        "Bars: the 95% stratified bootstrap interval over seeds; tick: the estimate; thin line: "
        "± the model's cross-validated mean error (Aitchison, Sweetser and Hutter, 2023). " + CAVEAT
    )
    fig.supxlabel(caption, fontsize=CAPTION_SIZE, wrap=True)
    return fig


def suite_latex(estimates: list[SuiteEstimate], protocol: str, slug: str, booktabs, escape) -> str:
    """The LaTeX table of the estimates (`booktabs`, `escape`: paper.py's)."""
    if not estimates:
        return ""
    rows = [
        [
            escape(e.method),
            e.name,
            f"{e.point:.1f} [{e.low:.1f}, {e.high:.1f}]",
            f"{100 * ERRORS[e.model]:.1f}",
        ]
        for e in estimates
    ]
    caption = (
        "The 57-game median human-normalised score (\\%) estimated from a few games by the "
        f"Atari-5 models \\citep{{aitchison2023atari5}}, protocol {escape(protocol)}: estimate "
        "[95\\% stratified bootstrap interval over seeds] and the model's cross-validated mean "
        f"error (\\%, relative). {escape(CAVEAT)}"
    )
    return "\n" + booktabs(
        "llcc", ["Method", "Model", "Estimate", "Error"], rows, caption, f"tab:atari5-{slug}"
    )
