# docs: docs/atari5.md
"""Atari-5: the 57-game median human-normalised score estimated from a few games.

Aitchison, Sweetser and Hutter (2023), "Atari-5: Distilling the Arcade Learning Environment down
to Five Games", ICML 2023 (PMLR 202, 421-438; code: https://github.com/maitchison/Atari-5). A
linear model with no intercept, fitted on published algorithms, predicts
log10(1 + the 57-game median HNS in percent) from each game's log10(1 + max(HNS%, 0)):

    y = sum over the model's games of coef * log10(1 + max(100 * hns, 0)),  estimate = 10**y - 1

Three models: Atari-5 (report on it), Atari-3-Val (tune on it: no game shared with Atari-5) and
Atari-10 (its own coefficients, a tighter error). Their games are normalised with the random and
human scores the models were fitted with (`cleanrl_utils/data/atari5_fit_scores.csv`), which keep
two decimals where the project's Agent57 table rounds to one: near random play on DoubleDunk,
whose human-random gap is 2.15 points, the rounding alone moves the estimate by several percent.

The game sets also name games on the command line: `--env-ids atari5` of the launcher and the
tuner (`expand_env_ids`), in the script's own id style. Pure numpy, no matplotlib.
"""

from __future__ import annotations

import csv
import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from cleanrl_utils.report.stats import game_name

FIT_SCORES = Path(__file__).resolve().parent.parent / "data" / "atari5_fit_scores.csv"

ATARI57 = [
    "Alien", "Amidar", "Assault", "Asterix", "Asteroids", "Atlantis", "BankHeist", "BattleZone",
    "BeamRider", "Berzerk", "Bowling", "Boxing", "Breakout", "Centipede", "ChopperCommand",
    "CrazyClimber", "Defender", "DemonAttack", "DoubleDunk", "Enduro", "FishingDerby", "Freeway",
    "Frostbite", "Gopher", "Gravitar", "Hero", "IceHockey", "Jamesbond", "Kangaroo", "Krull",
    "KungFuMaster", "MontezumaRevenge", "MsPacman", "NameThisGame", "Phoenix", "Pitfall", "Pong",
    "PrivateEye", "Qbert", "Riverraid", "RoadRunner", "Robotank", "Seaquest", "Skiing", "Solaris",
    "SpaceInvaders", "StarGunner", "Surround", "Tennis", "TimePilot", "Tutankham", "UpNDown",
    "Venture", "VideoPinball", "WizardOfWor", "YarsRevenge", "Zaxxon",
]  # fmt: skip

# The models' coefficients (the paper's code refitted from its dataset.csv, to 15 digits), per game
COEFFICIENTS: dict[str, dict[str, float]] = {
    "atari5": {
        "BattleZone": 0.3819751237831753,
        "DoubleDunk": 0.0679099488887574,
        "NameThisGame": 0.310804148620847,
        "Phoenix": 0.12412619402774641,
        "Qbert": 0.08048518286466755,
    },
    "atari3-val": {
        "Assault": 0.3352529798243203,
        "MsPacman": 0.4236379909065204,
        "YarsRevenge": 0.1916184632131803,
    },
    "atari10": {
        "Amidar": 0.08246357439570691,
        "Bowling": 0.0559032813915904,
        "Frostbite": 0.06912572845204429,
        "KungFuMaster": 0.09861731598935165,
        "Riverraid": 0.048594292965417056,
        "BattleZone": 0.18882008828001498,
        "DoubleDunk": 0.08519154019954558,
        "NameThisGame": 0.12869695652405946,
        "Phoenix": 0.16432707026384483,
        "Qbert": 0.05922863791062832,
    },
}
MODELS = tuple(COEFFICIENTS)
NAMES = {"atari5": "Atari-5", "atari3-val": "Atari-3-Val", "atari10": "Atari-10"}
# the models' 10-fold cross-validated mean error, relative (the paper's Table 2)
ERRORS = {"atari5": 0.104, "atari3-val": 0.171, "atari10": 0.072}

GAME_SETS: dict[str, list[str]] = {
    **{model: list(games) for model, games in COEFFICIENTS.items()},
    "atari57": list(ATARI57),
}

CAVEAT = (
    "The model was fitted on published algorithms at 50M frames and more, with 57-game medians "
    "above 40%, under mixed evaluation protocols, so at small budgets it is an extrapolation; on "
    "CleanRL's own 57-game PPO table (10M steps) it ran 25% low."
)
CITATION = (
    'Aitchison, Sweetser and Hutter (2023), "Atari-5: Distilling the Arcade Learning Environment '
    'down to Five Games", ICML'
)
BIBTEX = """@inproceedings{aitchison2023atari5,
  title     = {Atari-5: Distilling the Arcade Learning Environment down to Five Games},
  author    = {Aitchison, Matthew and Sweetser, Penny and Hutter, Marcus},
  booktitle = {Proceedings of the 40th International Conference on Machine Learning},
  series    = {Proceedings of Machine Learning Research},
  volume    = {202},
  pages     = {421--438},
  year      = {2023},
  publisher = {PMLR}
}"""

# the gymnasium scripts take `PongNoFrameskip-v4`; the EnvPool and ALE vector scripts `Pong-v5`
GYMNASIUM_SCRIPTS = ("ppo_atari.py", "ppo_atari_lstm.py", "ppo_atari_multigpu.py")
_SET_LIKE = re.compile(r"atari[a-z0-9-]*")


def load_fit_scores(path: Path = FIT_SCORES) -> dict[str, tuple[float, float]]:
    """game -> (random, human): the scores the models were fitted with."""
    with open(path, newline="") as f:
        rows = csv.DictReader(line for line in f if not line.startswith("#"))
        return {row["game"]: (float(row["random"]), float(row["human"])) for row in rows}


_FIT = load_fit_scores()


def _check_model(model: str) -> dict[str, float]:
    if model not in COEFFICIENTS:
        raise ValueError(f"unknown model {model!r} (one of {', '.join(MODELS)})")
    return COEFFICIENTS[model]


def hns_fit(game: str, raw_return: float | np.ndarray) -> float | np.ndarray:
    """The human-normalised score (a fraction: 0 = random, 1.0 = human) of a raw return on
    `game` (a game name, `BattleZone`, or any env id of it), with the random and human scores
    the models were fitted with."""
    game = game_name(game)
    if game not in _FIT:
        raise ValueError(f"{game!r} is in none of the Atari-5 models (no fit scores)")
    random, human = _FIT[game]
    return (np.asarray(raw_return, dtype=np.float64) - random) / (human - random) + 0.0


def missing_games(model: str, games_present) -> list[str]:
    """The games of `model` that `games_present` (game names or env ids) lacks, in the model's
    order."""
    present = {game_name(g) for g in games_present}
    return [g for g in _check_model(model) if g not in present]


def estimate(model: str, hns_by_game: Mapping[str, float]) -> float:
    """The 57-game median HNS estimated by `model`, in percent (100.0 = human level).

    `hns_by_game`: each of the model's games (a game name or an env id) -> its mean
    human-normalised score as a fraction (1.0 = human), normalised with `hns_fit`. Games below
    random are clipped to 0 as the paper does; other games are ignored. ValueError when a game of
    the model is missing."""
    coefs = _check_model(model)
    by_game = {game_name(g): float(v) for g, v in hns_by_game.items()}
    missing = [g for g in coefs if g not in by_game]
    if missing:
        raise ValueError(f"{NAMES[model]} needs {', '.join(missing)}")
    y = sum(c * np.log10(1 + max(100 * by_game[g], 0.0)) for g, c in coefs.items())
    return float(10**y - 1)


def estimate_with_interval(
    model: str,
    returns_by_game: Mapping[str, Sequence[float] | np.ndarray],
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float, float]:
    """(point, low, high) in percent. `returns_by_game`: game name or env id -> the raw final
    returns of its runs (one per seed). The point estimate is the model on each game's mean
    return over seeds (normalised with `hns_fit`); the interval is the percentile interval of a
    stratified bootstrap over seeds (each game's runs resampled with replacement, the games
    fixed), drawn with NumPy's `RandomState(seed)`. It says how much the seeds move the estimate,
    not the model's own error (`ERRORS`)."""
    coefs = _check_model(model)
    by_game = {game_name(g): np.asarray(v, dtype=np.float64) for g, v in returns_by_game.items()}
    missing = [g for g in coefs if g not in by_game or by_game[g].size == 0]
    if missing:
        raise ValueError(f"{NAMES[model]} needs {', '.join(missing)}")
    hns = {g: np.asarray(hns_fit(g, by_game[g])) for g in coefs}
    point = estimate(model, {g: float(v.mean()) for g, v in hns.items()})
    rs = np.random.RandomState(seed)
    y = np.zeros(reps)
    for g, c in coefs.items():  # games in the model's order, each one draw of reps x runs
        runs = hns[g]
        means = runs[rs.randint(0, runs.size, size=(reps, runs.size))].mean(axis=1)
        y += c * np.log10(1 + np.maximum(100 * means, 0.0))
    boot = 10**y - 1
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(boot, [tail, 100 - tail])
    return point, float(low), float(high)


def script_of(command: str) -> str | None:
    """The file name of the first `.py` script in a command line (`ppo_atari.py`), or None."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    return next((Path(w).name for w in words if w.endswith(".py")), None)


def env_id_style(command: str) -> str:
    """`{game}NoFrameskip-v4` for the gymnasium scripts, else `{game}-v5` (EnvPool, ALE's vector
    env), for the script that `command` runs."""
    return "{game}NoFrameskip-v4" if script_of(command) in GYMNASIUM_SCRIPTS else "{game}-v5"


def is_set_name(word: str) -> bool:
    """True for a word that names a game set or looks like one (lowercase `atari...` without
    `-v`): `atari5`, `atari3-val`, `atari57`, `atari7`."""
    return word in GAME_SETS or (bool(_SET_LIKE.fullmatch(word)) and "-v" not in word)


def expand_env_ids(env_ids: Sequence[str], command: str) -> tuple[list[str], list[str]]:
    """(the env ids with each game set replaced by its games in the script's id style, a line per
    set used: `--env-ids atari5: BattleZone-v5 DoubleDunk-v5 ...`). Plain ids are kept as given;
    a game that a set brings twice (or a set and a plain id) is kept once, a plain id given twice
    stays twice (for the caller to refuse). ValueError (one line naming the sets) for an unknown
    set."""
    style = env_id_style(command)
    out: list[str] = []
    from_sets: set[str] = set()
    lines: list[str] = []
    for word in env_ids:
        if not is_set_name(word):
            if word not in from_sets:
                out.append(word)
            continue
        if word not in GAME_SETS:
            raise ValueError(
                f"--env-ids: unknown game set {word!r} (the sets: {', '.join(GAME_SETS)})"
            )
        ids = [style.format(game=g) for g in GAME_SETS[word]]
        lines.append(f"--env-ids {word}: {' '.join(ids)}")
        out += [e for e in ids if e not in out]
        from_sets.update(ids)
    return out, lines
