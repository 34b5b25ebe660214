"""The report's statistics: mean and std over seeds, the learning curves (running means over
games, averaged over seeds) and their bands, the human-normalised aggregates (`estimates.py`:
rliable's), and the reference numbers kept in `cleanrl_utils/data/` (random and human scores,
the published results)."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np

from cleanrl_utils.report.estimates import interval_estimates, percentile_interval
from cleanrl_utils.report.loading import RunLog

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
HUMAN_RANDOM_SCORES = DATA_DIR / "atari_human_random_scores.csv"
PUBLISHED_RESULTS = DATA_DIR / "published_ppo_atari.csv"


def mean_std(values) -> tuple[float, float]:
    """Mean and population standard deviation (numpy's default, as the published tables)."""
    values = np.asarray(values, dtype=np.float64)
    return float(values.mean()), float(values.std())


def trimmed_mean(values: np.ndarray, proportion: float = 0.25, axis: int = -1) -> np.ndarray:
    """Mean of the values left after cutting `int(proportion * n)` from each end (as
    `scipy.stats.trim_mean`); with 0.25 this is the interquartile mean."""
    values = np.sort(np.asarray(values, dtype=np.float64), axis=axis)
    n = values.shape[axis]
    cut = int(proportion * n)
    return np.take(values, np.arange(cut, n - cut), axis=axis).mean(axis=axis)


def aggregate_with_ci(
    scores_by_game: list[np.ndarray], samples: int, confidence: float, seed: int
) -> dict[str, tuple[float, float, float]]:
    """{statistic: (point, low, high)}: rliable's median, IQM, mean and optimality gap of the
    normalised scores (one array of run scores per game) with stratified bootstrap percentile
    intervals (`estimates.interval_estimates`)."""
    return interval_estimates(scores_by_game, samples, confidence, seed)


def curve_values(
    runs: list[RunLog], last_n: int, points: int, wall_clock: bool
) -> tuple[np.ndarray, np.ndarray] | None:
    """(x, values): each run's running mean of its last `last_n` games, one row per run with a
    game, at `points` points over the range that every such run covers (env steps, or minutes
    with `wall_clock`); None when no run has a game."""
    series = []
    for run in runs:
        if len(run.returns) == 0:
            continue
        running = np.convolve(run.returns, np.ones(last_n), "full")[: len(run.returns)]
        running /= np.minimum(np.arange(1, len(run.returns) + 1), last_n)
        if wall_clock:
            x = np.maximum.accumulate((run.walls - run.start_wall) / 60)
            end = (run.runtime_s or 0) / 60
        else:
            x = run.steps.astype(np.float64)
            end = float(run.last_step)
        series.append((x, running, max(end, x[-1])))
    if not series:
        return None
    lo, hi = max(s[0][0] for s in series), min(s[2] for s in series)
    if hi < lo:
        hi = lo
    grid = np.linspace(lo, hi, points)
    return grid, np.stack([np.interp(grid, x, y) for x, y, _ in series])


def curve(
    runs: list[RunLog], last_n: int, points: int, wall_clock: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(x, mean, std) over runs of `curve_values`; None when no run has a game."""
    result = curve_values(runs, last_n, points, wall_clock)
    if result is None:
        return None
    grid, values = result
    return grid, values.mean(axis=0), values.std(axis=0)


def curve_band(
    values: np.ndarray, kind: str, samples: int, confidence: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) around the mean over runs of `values` (runs, points): `std`, one standard
    deviation each side; `ci`, the percentile bootstrap interval of the mean (the runs resampled
    with replacement, the same resample at every point)."""
    mean = values.mean(axis=0)
    if kind == "std":
        std = values.std(axis=0)
        return mean - std, mean + std
    rs = np.random.RandomState(seed)
    index = rs.randint(0, len(values), size=(samples, len(values)))
    return percentile_interval(values[index].mean(axis=1), confidence)


def window_means(run: RunLog, window: int, count: int) -> list[float | None]:
    """The mean score of the run's games that ended in each of `count` windows of `window` env
    steps ((0, window], (window, 2 window], ...); None for a window without a finished game."""
    means = []
    for k in range(count):
        inside = (run.steps > k * window) & (run.steps <= (k + 1) * window)
        means.append(float(np.mean(run.returns[inside])) if inside.any() else None)
    return means


# ---------------------------------------------------------------------------------------------
# Data kept in the repository: human and random scores, published results
# ---------------------------------------------------------------------------------------------


def _read_csv(path: Path) -> list[dict[str, str]]:
    lines = [line for line in path.read_text().splitlines() if line and not line.startswith("#")]
    return list(csv.DictReader(lines))


def load_human_random(path: Path = HUMAN_RANDOM_SCORES) -> dict[str, tuple[float, float]]:
    """game -> (random score, human score)."""
    return {row["game"]: (float(row["random"]), float(row["human"])) for row in _read_csv(path)}


def load_published(path: Path = PUBLISHED_RESULTS) -> dict[tuple[str, str], dict]:
    """(script, env id) -> the published row, numbers as floats."""
    out = {}
    for row in _read_csv(path):
        out[row["script"], row["env_id"]] = {
            key: float(value) for key, value in row.items() if key not in ("script", "env_id")
        }
    return out


def game_name(env_id: str) -> str:
    """`Pong-v5`, `PongNoFrameskip-v4`, `ALE/Pong-v5` -> `Pong`."""
    name = env_id.split("/")[-1]
    name = re.sub(r"-v\d+$", "", name)
    return re.sub(r"(NoFrameskip|Deterministic)$", "", name)
