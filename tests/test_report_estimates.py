"""The report's rliable statistics (`cleanrl_utils/report/estimates.py`) against rliable 1.2.0
itself on the same score matrices: the point estimates and the stratified bootstrap intervals
(the same resamples: rliable draws them from NumPy's global `RandomState`, seeded here), the
performance profiles and the probability of improvement; with unequal seeds per game, against
rliable on the matrix where each game's runs are repeated to the least common multiple of the
counts, and against a plain NumPy loop of the bootstrap as docs/report.md defines it."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
import scipy.stats

from cleanrl_utils.report.estimates import (
    interval_estimates,
    performance_profile,
    probability_of_improvement,
)

METRICS = ("median", "iqm", "mean", "optimality_gap")


@pytest.fixture(scope="module")
def rliable():
    """rliable's `library` and `metrics`. CI installs rliable (requirements-dev.txt), so there
    these tests must run; the lowest-versions and newest-Python checks do not install it."""
    if os.environ.get("CI") != "true":
        pytest.importorskip("rliable.library")
    from rliable import library, metrics

    return library, metrics


def rliable_metrics(metrics):
    """One function of the four statistics, in `METRICS` order, as rliable's README writes it."""
    return lambda x: np.array(
        [
            metrics.aggregate_median(x),
            metrics.aggregate_iqm(x),
            metrics.aggregate_mean(x),
            metrics.aggregate_optimality_gap(x),
        ]
    )


def ours(estimates: dict) -> tuple[np.ndarray, np.ndarray]:
    """(points, intervals 2 x 4) in rliable's layout."""
    values = np.array([estimates[m] for m in METRICS])
    return values[:, 0], values[:, 1:].T


# (runs, games): fewer runs than games, runs x games not a multiple of 4 (IQM cuts a whole
# run), one run (no resampling spread), a matrix of Atari-57's size
SHAPES = [(3, 7), (5, 2), (1, 4), (2, 3), (10, 57)]


@pytest.mark.parametrize(("runs", "games"), SHAPES)
def test_interval_estimates_are_rliables_on_full_matrices(rliable, runs, games):
    library, metrics = rliable
    rng = np.random.default_rng(runs * 100 + games)
    # rounded to one decimal: ties, as Atari scores have (a game's random score, a capped one)
    scores = rng.gamma(2.0, 0.6, size=(runs, games)).round(1)
    np.random.seed(7)
    points, intervals = library.get_interval_estimates(
        {"x": scores}, rliable_metrics(metrics), reps=600
    )
    point, interval = ours(interval_estimates(list(scores.T), 600, 0.95, 7))
    np.testing.assert_allclose(point, points["x"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(interval, intervals["x"], rtol=1e-12, atol=1e-12)
    if runs > 1:
        assert (interval[1] > interval[0]).all()  # a real spread, not two copies of the point


def test_interval_level_and_seed_are_rliables(rliable):
    library, metrics = rliable
    scores = np.random.default_rng(3).normal(1.0, 1.0, size=(4, 9))
    np.random.seed(11)
    _, intervals = library.get_interval_estimates(
        {"x": scores}, rliable_metrics(metrics), reps=400, confidence_interval_size=0.8
    )
    _, interval = ours(interval_estimates(list(scores.T), 400, 0.8, 11))
    np.testing.assert_allclose(interval, intervals["x"], rtol=1e-12, atol=1e-12)
    _, other_seed = ours(interval_estimates(list(scores.T), 400, 0.8, 12))
    assert not np.allclose(other_seed, intervals["x"])


@pytest.mark.parametrize(("runs", "games"), SHAPES[:4])
def test_performance_profiles_are_rliables(rliable, runs, games):
    library, _ = rliable
    scores = np.random.default_rng(games).gamma(2.0, 0.6, size=(runs, games)).round(1)
    taus = np.linspace(0.0, 3.0, 31)  # on the rounded scores too: `>`, not `>=`
    np.random.seed(5)
    profiles, bands = library.create_performance_profile({"x": scores}, taus, reps=300)
    point, low, high = performance_profile(list(scores.T), taus, 300, 0.95, 5)
    np.testing.assert_allclose(point, profiles["x"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.stack([low, high]), bands["x"], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("x_runs", "y_runs", "games"), [(3, 5, 4), (4, 1, 3)])
def test_probability_of_improvement_is_rliables(rliable, x_runs, y_runs, games):
    """Its bootstrap is rliable's `StratifiedIndependentBootstrap`: X and Y resampled apart, so
    they may have different numbers of runs."""
    library, metrics = rliable
    rng = np.random.default_rng(x_runs + y_runs)
    x = rng.normal(1.0, 1.0, size=(x_runs, games)).round(1)
    y = rng.normal(0.8, 1.0, size=(y_runs, games)).round(1)
    np.random.seed(3)
    points, intervals = library.get_interval_estimates(
        {"x,y": [x, y]}, metrics.probability_of_improvement, reps=200
    )
    point, low, high = probability_of_improvement(list(x.T), list(y.T), 200, 0.95, 3)
    assert point == pytest.approx(float(points["x,y"]), abs=1e-12)
    assert [low, high] == pytest.approx(intervals["x,y"].ravel().tolist(), abs=1e-12)
    swapped = probability_of_improvement(list(y.T), list(x.T), 200, 0.95, 3)[0]
    assert point + swapped == pytest.approx(1.0)


# ---------------------------------------------------------------------------------------------
# unequal seeds per game: every game weighs the same


RUN_COUNTS = [(2, 3, 5), (1, 4, 4, 2), (3, 2, 2, 2, 2, 1, 7)]


def games_of(counts, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.gamma(2.0, 0.6, size=n).round(1) for n in counts]


def repeated(games: list[np.ndarray]) -> np.ndarray:
    """The runs x games matrix in which each game's runs are repeated up to the least common
    multiple of the run counts."""
    lcm = math.lcm(*map(len, games))
    return np.stack([np.repeat(game, lcm // len(game)) for game in games], axis=1)


@pytest.mark.parametrize("counts", RUN_COUNTS)
def test_with_unequal_seeds_each_statistic_is_rliables_on_the_repeated_matrix(rliable, counts):
    _, metrics = rliable
    games = games_of(counts, len(counts))
    point, _ = ours(interval_estimates(games, 10, 0.95, 0))
    np.testing.assert_allclose(point, rliable_metrics(metrics)(repeated(games)), atol=1e-12)
    taus = np.linspace(0.0, 3.0, 31)
    profile = performance_profile(games, taus, 10, 0.95, 0)[0]
    expected = [np.mean(repeated(games) > tau) for tau in taus]
    np.testing.assert_allclose(profile, expected, atol=1e-12)


def reference_bootstrap(games: list[np.ndarray], reps: int, seed: int) -> np.ndarray:
    """The bootstrap of the four statistics as docs/report.md defines it, one resample at a
    time: draw each game's runs from its own runs (the draws of one resample as one `randint`
    over the most runs x the games, as rliable draws them, a game keeping the first of its
    column), repeat them to the common count, then rliable's definitions on that matrix."""
    rs = np.random.RandomState(seed)
    counts = np.array([len(g) for g in games])
    values = []
    for _ in range(reps):
        index = rs.randint(0, counts, size=(counts.max(), len(games)))
        drawn = [game[index[: len(game), m]] for m, game in enumerate(games)]
        matrix = repeated(drawn)
        game_means = matrix.mean(axis=0)
        values.append(
            [
                np.median(game_means),
                scipy.stats.trim_mean(matrix, 0.25, axis=None),
                game_means.mean(),
                1 - np.minimum(matrix, 1).mean(),
            ]
        )
    return np.array(values)


@pytest.mark.parametrize("counts", RUN_COUNTS)
def test_with_unequal_seeds_the_intervals_are_those_of_the_numpy_reference(counts):
    games = games_of(counts, 10 + len(counts))
    boot = reference_bootstrap(games, 300, 4)
    expected = np.percentile(boot, [2.5, 97.5], axis=0)
    _, interval = ours(interval_estimates(games, 300, 0.95, 4))
    np.testing.assert_allclose(interval, expected, rtol=1e-12, atol=1e-12)
    assert (interval[1] > interval[0]).all()


def test_probability_of_improvement_with_unequal_seeds_is_the_mean_over_games_of_pairs_won():
    """Game 1: X (1, 3) against Y (2): one pair won of two; game 2: X (5) against Y (5, 0, 9):
    a tie (one half) and a win of three pairs. P(X > Y) = (1/2 + 1.5/3) / 2 = 1/2."""
    x = [np.array([1.0, 3.0]), np.array([5.0])]
    y = [np.array([2.0]), np.array([5.0, 0.0, 9.0])]
    point, low, high = probability_of_improvement(x, y, 200, 0.95, 0)
    assert point == pytest.approx(0.5)
    assert 0.0 <= low < point < high <= 1.0


def pairs_won(x: list[np.ndarray], y: list[np.ndarray]) -> float:
    """P(X > Y) pair by pair, game by game: the definition, in plain loops."""
    per_game = []
    for xs, ys in zip(x, y):
        won = [1.0 if a > b else 0.5 if a == b else 0.0 for a in xs for b in ys]
        per_game.append(sum(won) / len(won))
    return sum(per_game) / len(per_game)


@pytest.mark.parametrize(("x_counts", "y_counts"), [((2, 3, 5), (4, 1, 2)), ((1, 4), (3, 3))])
def test_probability_of_improvement_with_unequal_seeds_is_the_numpy_references(x_counts, y_counts):
    """The interval: percentiles of P(X > Y) over resamples, each drawing X's runs of every game
    from its own (one `randint` over the most runs x the games, a game keeping the first of its
    column), then Y's, from one `RandomState(seed)`, as rliable's independent bootstrap does."""
    x, y = games_of(x_counts, 1), games_of(y_counts, 2)
    rs, boot = np.random.RandomState(9), []
    for _ in range(150):
        drawn = []
        for games in (x, y):
            counts = np.array([len(g) for g in games])
            index = rs.randint(0, counts, size=(counts.max(), len(games)))
            drawn.append([game[index[: len(game), m]] for m, game in enumerate(games)])
        boot.append(pairs_won(*drawn))
    low, high = np.percentile(boot, [2.5, 97.5])
    point, *interval = probability_of_improvement(x, y, 150, 0.95, 9)
    assert point == pytest.approx(pairs_won(x, y), abs=1e-12)
    assert interval == pytest.approx([low, high], abs=1e-12)
    assert low < high


def test_scores_need_a_run_on_every_game():
    with pytest.raises(ValueError, match="at least one run"):
        interval_estimates([np.array([1.0]), np.array([])], 10, 0.95, 0)
