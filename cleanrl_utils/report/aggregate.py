"""The human-normalised aggregates of one protocol's runs, as a paper reports them (rliable's
set): for each script, over the games that every script of the protocol ran, the median, IQM,
mean and optimality gap with stratified bootstrap intervals, the performance profile with its
band, and the probability of improvement of each script over each other one; their markdown and
the figures are `figures.py`'s."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from cleanrl_utils.report.cells import Report
from cleanrl_utils.report.estimates import (
    METRICS,
    interval_estimates,
    performance_profile,
    probability_of_improvement,
)
from cleanrl_utils.report.stats import game_name, load_human_random
from cleanrl_utils.report.tables import markdown_table, plural

TABLE_TAUS = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0)  # the profile table's thresholds (x human)
LOG_TAU_FROM = 0.05  # where the log-scaled profile starts (a score of 0 has no log)
Interval = tuple[float, float, float]  # point estimate, low, high


@dataclass
class Aggregate:
    """The aggregates of one protocol's scripts over their common games."""

    protocol: str
    scripts: list[str]
    games: list[str]
    scores: dict[str, list[np.ndarray]]  # script -> normalised run scores of each game
    estimates: dict[str, dict[str, Interval]] = field(default_factory=dict)
    taus: np.ndarray = field(default_factory=lambda: np.zeros(0))
    profiles: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=dict)
    improvement: dict[tuple[str, str], Interval] = field(default_factory=dict)
    confidence: float = 0.95
    samples: int = 0
    colors: dict[str, str] = field(default_factory=dict)  # script -> its colour (`style.py`)
    score: str = ""  # what a run's score is (`style.score_text`)
    min_games: str = ""  # a `--aggregate-min-games` below the default, said where it is used

    def runs(self, script: str) -> int:
        return sum(len(game) for game in self.scores[script])

    def seeds(self, script: str) -> str:
        """The runs per game of a script: `3 seeds`, or `2 to 3 seeds` where games differ."""
        counts = sorted({len(game) for game in self.scores[script]})
        if len(counts) == 1:
            return plural(counts[0], "seed")
        return f"{counts[0]} to {counts[-1]} seeds"


def normalised_scores(report: Report) -> tuple[dict[str, dict[str, np.ndarray]], list[str]]:
    """script -> game -> the human-normalised final return of each of its seeds (the runs of a
    game's env ids together: `Breakout-v5` and `BreakoutNoFrameskip-v4` are one game), and a
    line for each env id without random and human scores."""
    known = load_human_random()
    by_script: dict[str, dict[str, list[float]]] = {}
    unknown: dict[str, list[str]] = {}
    for (script, env_id), cell in sorted(report.cells.items()):
        if not cell.finals:
            continue
        game = game_name(env_id)
        if game not in known:
            unknown.setdefault(script, []).append(env_id)
            continue
        random, human = known[game]
        scores = [(final - random) / (human - random) for final in cell.finals]
        by_script.setdefault(script, {}).setdefault(game, []).extend(scores)
    lines = [f"{s}: no random and human scores for {', '.join(e)}" for s, e in unknown.items()]
    arrays = {s: {g: np.asarray(v) for g, v in games.items()} for s, games in by_script.items()}
    return arrays, lines


def compute(report: Report) -> tuple[Aggregate | None, list[str]]:
    """The aggregates of `report`'s scripts that have at least `--aggregate-min-games` games with
    known scores, over the games they all ran; None when there are not that many, and the lines
    that say what was left out and why."""
    args = report.args
    by_script, lines = normalised_scores(report)
    enough = [s for s in report.scripts if len(by_script.get(s, {})) >= args.aggregate_min_games]
    for script in report.scripts:
        if script not in enough:
            lines.append(
                f"{script}: {plural(len(by_script.get(script, {})), 'game')} with known scores, "
                f"fewer than `--aggregate-min-games` {args.aggregate_min_games}: left out"
            )
    if not enough:
        return None, lines
    games = sorted(set.intersection(*(set(by_script[s]) for s in enough)))
    for script in enough:
        extra = sorted(set(by_script[script]) - set(games))
        if extra:
            lines.append(
                f"{script}: {plural(len(extra), 'game')} not every script ran, left out of "
                f"the aggregates: {', '.join(extra)}"
            )
    if len(games) < args.aggregate_min_games:
        lines.append(
            f"the scripts share {plural(len(games), 'game')}, fewer than "
            f"`--aggregate-min-games` {args.aggregate_min_games}: no aggregate"
        )
        return None, lines
    scores = {s: [by_script[s][g] for g in games] for s in enough}
    for script in enough:
        if all(len(game) == 1 for game in scores[script]):
            lines.append(
                f"{script}: one seed a game, so its intervals have no width (the bootstrap "
                "resamples the seeds of each game): they say nothing about the spread over seeds"
            )
    agg = Aggregate(report.protocol, enough, games, scores)
    agg.confidence, agg.samples = args.confidence, args.bootstrap_samples
    agg.colors, agg.score, agg.min_games = report.colors, report.score, min_games_text(args)
    boot = (args.bootstrap_samples, args.confidence, args.bootstrap_seed)
    highest = max(max(float(g.max()) for g in scores[s]) for s in enough)
    top = max(1.0, highest * 1.05)
    agg.taus = np.unique(
        np.concatenate(
            [
                np.linspace(0.0, top, 101),
                np.geomspace(LOG_TAU_FROM, top, 80),
                [t for t in TABLE_TAUS if t <= top],
            ]
        )
    )
    for script in enough:
        agg.estimates[script] = interval_estimates(scores[script], *boot)
        agg.profiles[script] = performance_profile(scores[script], agg.taus, *boot)
    for x, y in itertools.combinations(enough, 2):
        p, low, high = probability_of_improvement(scores[x], scores[y], *boot)
        agg.improvement[x, y] = (p, low, high)
        agg.improvement[y, x] = (1.0 - p, 1.0 - high, 1.0 - low)
    return agg, lines


DEFAULT_MIN_GAMES = 5  # `--aggregate-min-games`'s default


def min_games_text(args) -> str:
    """What a `--aggregate-min-games` below the default changes, for the tables and captions
    that rest on it; empty at the default or above."""
    if args.aggregate_min_games >= DEFAULT_MIN_GAMES:
        return ""
    return (
        f"`--aggregate-min-games {args.aggregate_min_games}`, below the default "
        f"{DEFAULT_MIN_GAMES}: aggregates over so few games say little about a suite"
    )


def interval_text(value: Interval) -> str:
    point, low, high = value
    return f"{point:.3f} [{low:.3f}, {high:.3f}]"


def explanation(args, score: str) -> str:
    """What the aggregates are, once at the top of `aggregate.md`; `score`, what a run's score
    is (`style.score_text`)."""
    level = f"{100 * args.confidence:g}%"
    return (
        "Human-normalised score of a run: (return - random) / (human - random), with the random "
        "and human scores of `cleanrl_utils/data/atari_human_random_scores.csv`; a run's return "
        f"is its final return, {score}. As rliable (Agarwal "
        "et al. 2021), over the games that every script of a protocol ran: **median** and "
        "**mean** over games of each game's mean over seeds; **IQM**, the mean of the middle "
        "50% of all runs' scores; **optimality gap**, how far the runs fall short of human "
        "level on average (1 - the mean of min(score, 1)); lower is better. A game with fewer "
        "seeds than another weighs the same as it. "
        f"[{level} stratified bootstrap interval: {args.bootstrap_samples} resamples of the "
        f"seeds of each game, seed {args.bootstrap_seed}.] **Performance profile**: the "
        "fraction of runs with a score above each threshold τ. **Probability of improvement** "
        "P(X > Y): the probability that a run of X scores above a run of Y on a game (ties "
        "count one half), averaged over games.\n\n"
    )


def aggregate_markdown(agg: Aggregate | None, lines: list[str], images: dict[str, str]) -> str:
    """The aggregates of one protocol (`compute`): the estimates, profiles and improvement
    tables, links to `images` ({kind: file name} of the figures written: `figures.py`), and the
    lines on what was left out."""
    text = ""
    if agg is not None:
        games = ", ".join(agg.games)
        text += f"Over {plural(len(agg.games), 'game')}: {games}.\n\n"
        if agg.min_games:
            text += f"**{agg.min_games[0].upper()}{agg.min_games[1:]}.**\n\n"
        header = ["script", "games", "runs", "median", "IQM", "mean", "optimality gap"]
        rows = [
            [s, str(len(agg.games)), str(agg.runs(s))]
            + [interval_text(agg.estimates[s][m]) for m in METRICS]
            for s in agg.scripts
        ]
        text += markdown_table(header, rows)
        if "estimates" in images:
            text += f"\n![interval estimates]({images['estimates']})\n"
        taus = [t for t in TABLE_TAUS if t <= agg.taus[-1]]
        at = [int(np.searchsorted(agg.taus, t)) for t in taus]
        rows = []
        for script in agg.scripts:
            point, low, high = agg.profiles[script]
            rows.append([script] + [interval_text((point[i], low[i], high[i])) for i in at])
        text += (
            "\nPerformance profile: the fraction of runs with a human-normalised score above "
            "τ, with its interval.\n\n"
            + markdown_table(["script"] + [f"τ = {t:g}" for t in taus], rows)
        )
        if "profiles" in images:
            text += f"\n![performance profiles]({images['profiles']})\n"
        if len(agg.scripts) > 1:
            rows = [
                [f"**{x}**"]
                + ["–" if x == y else interval_text(agg.improvement[x, y]) for y in agg.scripts]
                for x in agg.scripts
            ]
            text += (
                "\nProbability of improvement P(X > Y) of the row's script X over the "
                "column's Y (the interval of P(Y > X) is one minus that of P(X > Y)).\n\n"
                + markdown_table(["X \\ Y"] + agg.scripts, rows)
            )
            if "improvement" in images:
                text += f"\n![probability of improvement]({images['improvement']})\n"
    else:
        text += "No script has enough games for an aggregate.\n"
    if lines:
        text += "\n" + "".join(f"- {line}\n" for line in lines)
    return text
