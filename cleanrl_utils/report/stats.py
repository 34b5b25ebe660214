"""The report's statistics: mean and std over seeds, the learning curves (running means over
games, averaged over seeds), the human-normalised median and IQM with stratified bootstrap
intervals, and the reference numbers kept in `cleanrl_utils/data/` (random and human scores,
the published results)."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np

from cleanrl_utils.report.runlogs import RunLog

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
    """Median (over games, of each game's mean over seeds) and interquartile mean (over all
    runs of all games) of normalised scores, each with a stratified bootstrap percentile
    interval: the seeds of each game are resampled with replacement, games kept fixed."""
    rng = np.random.default_rng(seed)
    game_means, pooled = [], []
    for scores in scores_by_game:
        idx = rng.integers(0, len(scores), size=(samples, len(scores)))
        resampled = scores[idx]
        game_means.append(resampled.mean(axis=1))
        pooled.append(resampled)
    boot_median = np.median(np.stack(game_means, axis=1), axis=1)
    boot_iqm = trimmed_mean(np.concatenate(pooled, axis=1), 0.25, axis=1)
    alpha = (1 - confidence) / 2
    point_median = float(np.median([s.mean() for s in scores_by_game]))
    point_iqm = float(trimmed_mean(np.concatenate(scores_by_game), 0.25))
    return {
        "median": (point_median, *np.quantile(boot_median, [alpha, 1 - alpha]).tolist()),
        "iqm": (point_iqm, *np.quantile(boot_iqm, [alpha, 1 - alpha]).tolist()),
    }


def curve(
    runs: list[RunLog], last_n: int, points: int, wall_clock: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Mean and std over runs of each run's running mean of its last `last_n` games, at `points`
    points over the range that every run covers (env steps, or minutes with `wall_clock`)."""
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
    values = np.stack([np.interp(grid, x, y) for x, y, _ in series])
    return grid, values.mean(axis=0), values.std(axis=0)


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
