"""rliable's statistics (Agarwal et al. 2021, "Deep Reinforcement Learning at the Edge of the
Statistical Precipice"), computed here without rliable: the median, interquartile mean (IQM),
mean and optimality gap of human-normalised scores with stratified bootstrap intervals, the
performance profile with its confidence band, and the probability of improvement of one script
over another.

Scores come as one array per game, the scores of its runs, so games may have unequal numbers of
runs (a seed that crashed on one game). On a full matrix (every game the same number of runs)
every number here is rliable 1.2.0's own, intervals included: the resamples are drawn as rliable
draws them (NumPy's legacy `RandomState`, one `randint` over the runs x games matrix per
resample, seeded once), so the same seed gives rliable's intervals. With unequal runs per game,
every statistic is rliable's on the matrix in which each game's runs are repeated up to the least
common multiple of the run counts (every game weighs the same, whatever its number of runs), and
the bootstrap resamples each game's own runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

METRICS = {"median": "Median", "iqm": "IQM", "mean": "Mean", "optimality_gap": "Optimality gap"}
CHUNK = 1000  # resamples computed at once (memory: CHUNK x runs x games floats)


@dataclass(frozen=True)
class Scores:
    """The runs x games matrix of one script, padded where a game has fewer runs: run i of game
    m is `values[i, m]` for i < `counts[m]`."""

    values: np.ndarray  # (most runs of a game, games)
    counts: np.ndarray  # (games,) runs of each game

    @classmethod
    def of(cls, scores_by_game) -> Scores:
        """From one array of run scores per game (or a runs x games matrix, as rliable takes)."""
        if isinstance(scores_by_game, np.ndarray) and scores_by_game.ndim == 2:
            scores_by_game = list(scores_by_game.T)
        games = [np.asarray(s, dtype=np.float64).ravel() for s in scores_by_game]
        if not games or min(map(len, games)) == 0:
            raise ValueError("every game needs the score of at least one run")
        counts = np.array([len(g) for g in games])
        values = np.zeros((counts.max(), len(games)))
        for m, game in enumerate(games):
            values[: len(game), m] = game
        return cls(values, counts)

    @property
    def units(self) -> np.ndarray:
        """Each run's weight, in whole units where the counts allow: the least common multiple of
        the counts over its game's count (every game weighs the same); 0 for the padding."""
        lcm = math.lcm(*map(int, self.counts))
        if lcm * len(self.counts) < 2**53:
            per_game = lcm // self.counts
        else:  # (absurd counts: weights as floats, the same to rounding)
            per_game = 1.0 / self.counts
        return np.where(np.arange(len(self.values))[:, None] < self.counts, per_game, 0)

    def resampled(self, rs: np.random.RandomState, reps: int) -> np.ndarray:
        """`reps` stratified bootstrap resamples, (reps, runs, games): each game's runs drawn
        with replacement from its own runs, as rliable's `StratifiedBootstrap` draws them."""
        index = rs.randint(0, self.counts, size=(reps, *self.values.shape))
        return self.values[index, np.arange(len(self.counts))]


def aggregates(values: np.ndarray, scores: Scores) -> dict[str, np.ndarray]:
    """The four statistics of `values` (..., runs, games), laid out as `scores`: the median and
    the mean over games of each game's mean, the IQM (25% trimmed mean of every run's score) and
    the optimality gap (1 minus the mean of the scores clipped at 1, human level)."""
    valid = np.arange(values.shape[-2])[:, None] < scores.counts
    game_means = np.where(valid, values, 0.0).sum(axis=-2) / scores.counts
    clipped = np.where(valid, np.minimum(values, 1.0), 0.0).sum(axis=-2) / scores.counts
    return {
        "median": np.median(game_means, axis=-1),
        "iqm": interquartile_mean(values, scores.units),
        "mean": game_means.mean(axis=-1),
        "optimality_gap": 1.0 - clipped.mean(axis=-1),
    }


def interquartile_mean(values: np.ndarray, units: np.ndarray) -> np.ndarray:
    """The 25% trimmed mean of `values` (..., runs, games), each run weighing `units`: the runs
    weigh units, int(total / 4) units are cut from each end (as `scipy.stats.trim_mean`, which
    this is when every unit is 1), and a run at a cut counts with its units that are kept."""
    flat = values.reshape(*values.shape[:-2], -1)
    weights = np.broadcast_to(units.ravel(), flat.shape)
    order = np.argsort(flat, axis=-1, kind="stable")
    flat = np.take_along_axis(flat, order, axis=-1)
    weights = np.take_along_axis(weights, order, axis=-1)
    total = units.sum()
    cut = total // 4
    upper = np.cumsum(weights, axis=-1)
    kept = np.clip(np.minimum(upper, total - cut) - np.maximum(upper - weights, cut), 0, None)
    return (kept * flat).sum(axis=-1) / (total - 2 * cut)


def profile(values: np.ndarray, scores: Scores, taus: np.ndarray) -> np.ndarray:
    """The performance profile: for each tau, the fraction of runs with a score above it (each
    game weighing the same), (..., taus)."""
    units = scores.units
    flat, weights = values.reshape(*values.shape[:-2], -1), units.ravel()
    return np.stack([((flat > tau) * weights).sum(axis=-1) for tau in taus], axis=-1) / (
        units.sum()
    )


def improvement(x: np.ndarray, x_counts, y: np.ndarray, y_counts) -> np.ndarray:
    """P(X > Y): for each game the probability that a run of X scores above a run of Y (ties
    count one half: the Mann-Whitney U statistic over the number of pairs), averaged over
    games; x (..., runs of X, games), y (..., runs of Y, games)."""
    x_valid = np.arange(x.shape[-2])[:, None] < x_counts
    y_valid = np.arange(y.shape[-2])[:, None] < y_counts
    a, b = x[..., :, None, :], y[..., None, :, :]
    wins = (a > b) + 0.5 * (a == b)
    pairs = x_valid[:, None, :] & y_valid[None, :, :]
    per_game = (wins * pairs).sum(axis=(-3, -2)) / (np.asarray(x_counts) * y_counts)
    return per_game.mean(axis=-1)


def percentile_interval(boot: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """The percentile interval of bootstrap values (reps, ...), as rliable (through `arch`)
    takes it."""
    alpha = (1.0 - confidence) / 2
    low, high = np.percentile(boot, [100 * alpha, 100 * (1.0 - alpha)], axis=0)
    return low, high


def _bootstrap(statistic, scores: Scores, reps: int, seed: int) -> np.ndarray:
    """`statistic(resampled values)` of `reps` resamples, stacked, drawn with `seed`."""
    rs = np.random.RandomState(seed)
    parts = []
    for start in range(0, reps, CHUNK):
        parts.append(statistic(scores.resampled(rs, min(CHUNK, reps - start))))
    return np.concatenate(parts)


def interval_estimates(
    scores_by_game, reps: int, confidence: float, seed: int
) -> dict[str, tuple[float, float, float]]:
    """{metric: (point estimate, low, high)} of the four `METRICS`, with `confidence` percentile
    intervals from `reps` stratified bootstrap resamples (the same resamples for all four)."""
    scores = Scores.of(scores_by_game)
    point = aggregates(scores.values, scores)
    boot = _bootstrap(
        lambda values: np.stack(list(aggregates(values, scores).values()), axis=-1),
        scores,
        reps,
        seed,
    )
    low, high = percentile_interval(boot, confidence)
    return {
        name: (float(point[name]), float(low[i]), float(high[i])) for i, name in enumerate(METRICS)
    }


def performance_profile(
    scores_by_game, taus, reps: int, confidence: float, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(profile, low, high) at each of `taus`: the fraction of runs with a score above tau and
    its stratified bootstrap band (rliable's `create_performance_profile`, score distributions)."""
    scores, taus = Scores.of(scores_by_game), np.asarray(taus, dtype=np.float64)
    point = profile(scores.values, scores, taus)
    boot = _bootstrap(lambda values: profile(values, scores, taus), scores, reps, seed)
    return (point, *percentile_interval(boot, confidence))


def probability_of_improvement(
    x_by_game, y_by_game, reps: int, confidence: float, seed: int
) -> tuple[float, float, float]:
    """(P(X > Y), low, high): the probability of improvement of X over Y on the same games (in
    the same order), with the interval of rliable's `StratifiedIndependentBootstrap`: each
    resample draws X's runs of every game, then Y's, from one `RandomState(seed)`."""
    x, y = Scores.of(x_by_game), Scores.of(y_by_game)
    if len(x.counts) != len(y.counts):
        raise ValueError(f"X has {len(x.counts)} games, Y {len(y.counts)}: not the same games")
    point = float(improvement(x.values, x.counts, y.values, y.counts))
    rs = np.random.RandomState(seed)
    boot = []
    for start in range(0, reps, CHUNK):
        draws = [
            (x.resampled(rs, 1)[0], y.resampled(rs, 1)[0])
            for _ in range(start, min(reps, start + CHUNK))
        ]
        xs, ys = np.stack([d[0] for d in draws]), np.stack([d[1] for d in draws])
        boot.append(improvement(xs, x.counts, ys, y.counts))
    low, high = percentile_interval(np.concatenate(boot), confidence)
    return point, float(low), float(high)
