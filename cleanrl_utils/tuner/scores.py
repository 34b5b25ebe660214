"""A trial's objective: each run's metric read back from its TensorBoard events, averaged over
the last values, normalised per game and aggregated over games, then averaged over seeds; or,
with the aggregations `atari5`, `atari3-val` and `atari10`, that model's estimate of the 57-game
median human-normalised score (`cleanrl_utils/report/atari5.py`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cleanrl_utils.report import atari5
from cleanrl_utils.report.events import event_files, read_event_file
from cleanrl_utils.report.stats import game_name, load_human_random, trimmed_mean

# CleanRL's names first ("average"), then the IQM of rliable (Agarwal et al. 2021)
AGGREGATIONS = {
    "average": np.mean,
    "mean": np.mean,
    "median": np.median,
    "iqm": lambda values: float(trimmed_mean(np.asarray(values), 0.25)),
    "max": np.max,
    "min": np.min,
}
# the Atari-5 paper's models (Aitchison, Sweetser and Hutter, ICML 2023): the objective is the
# model's estimate of the 57-game median HNS, in percent, over the model's games
ESTIMATES = atari5.MODELS
NORMALIZATIONS = ("auto", "human", "none")


def metric_values(run_dir: str | Path, metric: str) -> tuple[list[tuple[int, float]], int]:
    """(step, value) of `metric` in every event file of a run folder, in step order, and the last
    step the run logged anything at. A resumed run's file voids what the earlier files logged
    from its purge step on (what the stopped process logged after its checkpoint); a file still
    being written is read up to its last whole record."""
    values: list[tuple[int, float]] = []
    last_step = 0
    for path in event_files(run_dir):
        data = read_event_file(path, (metric,))
        if data.purge_step is not None:
            values = [(step, value) for step, value in values if step < data.purge_step]
            last_step = min(last_step, data.purge_step)
        values += [(step, value) for step, _, value in data.scalars[metric]]
        last_step = max(last_step, data.last_step)
    return sorted(values, key=lambda sv: sv[0]), last_step


def window_mean(values: list[tuple[int, float]], window: int, up_to: int | None = None):
    """The mean of the last `window` values (logged at or before step `up_to`); None if none."""
    kept = [v for step, v in values if up_to is None or step <= up_to]
    return float(np.mean(kept[-window:])) if kept else None


@dataclass(frozen=True)
class Normalizer:
    """Per env id, the (low, high) mapped to (0, 1): `target_scores` where given (CleanRL's
    `[min, max]`), else the random and human scores of the game (human-normalised score); None:
    the raw metric."""

    bounds: Mapping[str, tuple[float, float] | None]
    scale: str = "raw"  # what a score is, for labels: raw, human-normalised, target-normalised

    @classmethod
    def make(
        cls,
        env_ids: Sequence[str],
        target_scores: Mapping[str, Sequence[float] | None] | None,
        normalization: str,
    ) -> Normalizer:
        """`normalization`: `auto` (target scores where given, else human-normalised where the
        game has human and random scores, else raw), `human` (human-normalised; every game must
        have scores) or `none` (raw). Raises ValueError with the reason when it cannot be done."""
        if normalization not in NORMALIZATIONS:
            raise ValueError(
                f"unknown normalization {normalization!r} (one of {', '.join(NORMALIZATIONS)})"
            )
        targets = dict(target_scores or {})
        human = load_human_random()
        bounds: dict[str, tuple[float, float] | None] = {}
        scales = set()
        for env_id in env_ids:
            target = targets.get(env_id)
            if normalization == "none":
                bounds[env_id] = None
            elif target is not None and normalization == "auto":
                if len(target) != 2 or float(target[1]) == float(target[0]):
                    raise ValueError(
                        f"target_scores[{env_id!r}] must be [min, max] with min != max, got {target}"
                    )
                bounds[env_id] = (float(target[0]), float(target[1]))
                scales.add("target-normalised")
            elif game_name(env_id) in human:
                bounds[env_id] = human[game_name(env_id)]
                scales.add("human-normalised")
            elif normalization == "human":
                raise ValueError(
                    f"{env_id}: the game {game_name(env_id)!r} has no human and random scores "
                    "in cleanrl_utils/data/atari_human_random_scores.csv"
                )
            else:
                bounds[env_id] = None
        raw = [e for e, b in bounds.items() if b is None]
        if raw and len(raw) < len(bounds) and normalization == "auto":
            raise ValueError(
                f"{', '.join(raw)}: no target scores and no human and random scores, so the "
                "games cannot be put on one scale; give target_scores for them"
            )
        scale = " and ".join(sorted(scales, reverse=True)) if scales else "raw"
        return cls(bounds, scale)

    def __call__(self, env_id: str, score: float) -> float:
        bound = self.bounds[env_id]
        if bound is None:
            return score
        low, high = bound
        return (score - low) / (high - low)

    def for_estimate(self, model: str) -> Normalizer:
        """This normaliser with the games of an Atari-5 `model` human-normalised as the model was
        fitted (`atari5.hns_fit`); raises ValueError when a game of the model is missing or is
        not human-normalised (target scores, `none`)."""
        if missing := atari5.missing_games(model, self.bounds):
            raise ValueError(
                f"--aggregation {model} needs --env-ids with its games, missing "
                f"{', '.join(missing)} (e.g. --env-ids {model})"
            )
        fit, human = atari5.load_fit_scores(), load_human_random()
        bounds = dict(self.bounds)
        for env_id, bound in self.bounds.items():
            game = game_name(env_id)
            if game in atari5.COEFFICIENTS[model]:
                if bound != human[game]:
                    how = "--normalization none" if bound is None else "target scores"
                    raise ValueError(
                        f"--aggregation {model} human-normalises {env_id}, not with {how}"
                    )
                bounds[env_id] = fit[game]
        return Normalizer(bounds, self.scale)

    def describe(self) -> str:
        if all(b is None for b in self.bounds.values()):
            return "the raw metric"
        return "; ".join(
            f"{env_id}: {'raw' if b is None else f'{b[0]:g} -> 0, {b[1]:g} -> 1'}"
            for env_id, b in self.bounds.items()
        )


def estimate_objective(scores: Mapping[tuple[str, int], float], model: str) -> float | None:
    """The estimate (percent) of an Atari-5 `model` from (env id, seed) -> human-normalised score
    (normalised as the model was fitted, `Normalizer.for_estimate`): the model applied to each
    game's mean over the seeds scored so far, as the paper applies it to an algorithm's per-game
    scores. A game of the model with no score yet counts as random play (0): an intermediate value
    is then a lower bound, the same for every trial at the same mark, so the pruner compares like
    with like. None when no game of the model has a score."""
    games = atari5.COEFFICIENTS[model]
    by_game: dict[str, list[float]] = {}
    for (env_id, _), value in scores.items():
        by_game.setdefault(game_name(env_id), []).append(value)
    if not any(g in by_game for g in games):
        return None
    return atari5.estimate(model, {g: float(np.mean(by_game.get(g, [0.0]))) for g in games})


def aggregation_words(aggregation: str) -> str:
    """`average over games` or `Atari-3-Val estimate (%) of the 57-game median, from games`."""
    if aggregation in ESTIMATES:
        return f"{atari5.NAMES[aggregation]} estimate (%) of the 57-game median, from games"
    return f"{aggregation} over games"


def aggregate(scores: Mapping[tuple[str, int], float], aggregation: str) -> float | None:
    """The objective of (env id, seed) -> normalised score: per seed, the aggregation over the
    games that seed has a score for; then the mean over seeds (as CleanRL). An Atari-5 model's
    name (`ESTIMATES`): its estimate, `estimate_objective`."""
    if aggregation in ESTIMATES:
        return estimate_objective(scores, aggregation)
    fn = AGGREGATIONS[aggregation]
    seeds = sorted({seed for _, seed in scores})
    per_seed = [float(fn([v for (_, s), v in scores.items() if s == seed])) for seed in seeds]
    return float(np.mean(per_seed)) if per_seed else None
