"""The Atari-5 estimator (`cleanrl_utils/report/atari5.py`): hand-checked cases, the check against
CleanRL's published 57-game PPO table, the bootstrap interval and the game sets' expansion."""

import math
import re
from pathlib import Path

import numpy as np
import pytest

from cleanrl_utils.report import atari5
from cleanrl_utils.report.stats import load_human_random

TABLE = Path(__file__).parent / "data" / "cleanrl_ppo_57_games.md"


def cleanrl_table() -> dict[str, tuple[float, float]]:
    """game -> (ppo_atari_envpool_xla_jax, baselines ppo2): the mean final returns of CleanRL's
    published table (its source is the file's first line)."""
    rows = {}
    for line in TABLE.read_text().splitlines():
        if m := re.match(r"\|\s*(\w+)-v5\s*\|\s*([-\d.]+) ±[^|]*\|\s*([-\d.]+) ±", line):
            rows[m[1]] = (float(m[2]), float(m[3]))
    return rows


def test_the_table_has_its_source_and_57_games():
    assert TABLE.read_text().startswith("<!-- CleanRL's published 57-game table (vwxyzjn/cleanrl")
    assert sorted(cleanrl_table()) == sorted(atari5.ATARI57)
    assert sorted(atari5.ATARI57) == sorted(load_human_random())


def test_human_level_on_all_five_games_gives_85_05_percent():
    # the coefficients sum to 0.9653, not 1: 10**(0.9653 * log10(101)) - 1
    hns = {g: 1.0 for g in atari5.GAME_SETS["atari5"]}
    assert atari5.estimate("atari5", hns) == pytest.approx(85.0543, abs=1e-3)
    total = sum(atari5.COEFFICIENTS["atari5"].values())
    assert atari5.estimate("atari5", hns) == pytest.approx(101**total - 1)


def test_a_hand_computed_vector():
    hns = {"BattleZone": 0.5, "DoubleDunk": 2.0, "NameThisGame": 1.5, "Phoenix": 0.25, "Qbert": 1.0}
    y = (
        0.3819751237831753 * math.log10(51)
        + 0.0679099488887574 * math.log10(201)
        + 0.310804148620847 * math.log10(151)
        + 0.12412619402774641 * math.log10(26)
        + 0.08048518286466755 * math.log10(101)
    )
    assert atari5.estimate("atari5", hns) == pytest.approx(10**y - 1, rel=1e-12)
    # env ids name the games as well; games outside the model are ignored
    by_id = {f"{g}NoFrameskip-v4": v for g, v in hns.items()} | {"Pong-v5": 9.0}
    assert atari5.estimate("atari5", by_id) == pytest.approx(10**y - 1, rel=1e-12)


def test_below_random_games_count_as_random():
    at_random = {g: 0.0 for g in atari5.GAME_SETS["atari5"]}
    below = {g: -0.7 for g in atari5.GAME_SETS["atari5"]}
    assert atari5.estimate("atari5", at_random) == 0.0
    assert atari5.estimate("atari5", below) == 0.0


def test_a_missing_game_is_named():
    hns = {g: 1.0 for g in atari5.GAME_SETS["atari5"] if g != "Qbert"}
    with pytest.raises(ValueError, match="Atari-5 needs Qbert"):
        atari5.estimate("atari5", hns)
    assert atari5.missing_games("atari5", ["BattleZone-v5", "PhoenixNoFrameskip-v4"]) == [
        "DoubleDunk",
        "NameThisGame",
        "Qbert",
    ]
    assert atari5.missing_games("atari3-val", ["ALE/Assault-v5", "MsPacman", "YarsRevenge"]) == []


def test_the_fit_normalisation_keeps_two_decimals():
    # the project's Agent57 table rounds these random scores to -18.6, 2292.3, 163.9
    assert atari5.hns_fit("DoubleDunk", -18.55) == 0.0
    assert atari5.hns_fit("DoubleDunk-v5", -16.4) == pytest.approx(1.0)
    assert atari5.hns_fit("NameThisGameNoFrameskip-v4", 2292.35) == 0.0
    assert atari5.hns_fit("ALE/Qbert-v5", 163.88) == 0.0
    human = load_human_random()
    for game, (_, fit_human) in atari5.load_fit_scores().items():
        assert human[game][1] == fit_human  # the human scores are the project's


def test_cleanrl_table_true_median_and_the_estimates():
    # CleanRL's ppo_atari_envpool_xla_jax at 10M steps: the true 57-game median, and what the
    # models estimate from their few games (docs/atari5.md quotes these numbers)
    rows = cleanrl_table()
    human = load_human_random()
    agent57 = {g: (v[0] - human[g][0]) / (human[g][1] - human[g][0]) for g, v in rows.items()}
    assert round(100 * float(np.median(list(agent57.values()))), 1) == 102.3
    fit = {
        g: atari5.hns_fit(g, rows[g][0]) for g in atari5.ATARI57 if g in atari5.load_fit_scores()
    }
    assert round(atari5.estimate("atari5", fit), 1) == 76.6  # 25% low
    assert round(atari5.estimate("atari5", agent57), 1) == 76.5  # the Agent57 table's rounding
    assert round(atari5.estimate("atari10", agent57), 1) == 78.1
    assert round(atari5.estimate("atari10", fit), 1) == 78.3  # DoubleDunk's rounding
    assert round(atari5.estimate("atari3-val", fit), 1) == 114.3
    assert round(atari5.estimate("atari3-val", agent57), 1) == 114.3
    # OpenAI baselines' ppo2 in the same table
    ppo2 = {g: (v[1] - human[g][0]) / (human[g][1] - human[g][0]) for g, v in rows.items()}
    assert round(100 * float(np.median(list(ppo2.values()))), 1) == 79.6
    assert round(atari5.estimate("atari5", ppo2), 1) == 68.0
    ppo2_fit = {g: atari5.hns_fit(g, rows[g][1]) for g in atari5.GAME_SETS["atari5"]}
    assert round(atari5.estimate("atari5", ppo2_fit), 1) == 68.1


def test_interval_of_equal_seeds_has_no_width():
    returns = {g: np.full(3, atari5.load_fit_scores()[g][1]) for g in atari5.GAME_SETS["atari5"]}
    point, low, high = atari5.estimate_with_interval("atari5", returns, reps=200, seed=1)
    assert point == pytest.approx(85.0543, abs=1e-3)
    assert low == pytest.approx(point) and high == pytest.approx(point)


def test_interval_is_seeded_and_holds_the_point():
    rng = np.random.default_rng(0)
    fit = atari5.load_fit_scores()
    returns = {
        f"{g}-v5": fit[g][0] + (fit[g][1] - fit[g][0]) * rng.uniform(0.2, 1.5, size=3)
        for g in atari5.GAME_SETS["atari5"]
    }
    first = atari5.estimate_with_interval("atari5", returns, reps=500, seed=7)
    assert atari5.estimate_with_interval("atari5", returns, reps=500, seed=7) == first
    assert atari5.estimate_with_interval("atari5", returns, reps=500, seed=8) != first
    point, low, high = first
    assert low < point < high
    means = {g: atari5.hns_fit(g, float(np.mean(v))) for g, v in returns.items()}
    assert point == pytest.approx(atari5.estimate("atari5", means))


def test_game_sets():
    assert atari5.GAME_SETS["atari5"] == [
        "BattleZone",
        "DoubleDunk",
        "NameThisGame",
        "Phoenix",
        "Qbert",
    ]
    assert not set(atari5.GAME_SETS["atari3-val"]) & set(atari5.GAME_SETS["atari5"])
    assert set(atari5.GAME_SETS["atari5"]) < set(atari5.GAME_SETS["atari10"])
    assert len(atari5.GAME_SETS["atari57"]) == 57
    assert atari5.ERRORS == {"atari5": 0.104, "atari3-val": 0.171, "atari10": 0.072}
    assert "aitchison2023atari5" in atari5.BIBTEX and "421--438" in atari5.BIBTEX
    assert "25% low" in atari5.CAVEAT and "extrapolation" in atari5.CAVEAT


@pytest.mark.parametrize(
    "command, first",
    [
        ("python cleanrl/ppo_atari_envpool.py", "BattleZone-v5"),
        ("python cleanrl/ppo_atari_ale_vector.py --track", "BattleZone-v5"),
        ("uv run python cleanrl/ppo_atari_envpool_xla_jax_scan.py", "BattleZone-v5"),
        ("python cleanrl/ppo_atari.py --capture_video", "BattleZoneNoFrameskip-v4"),
        ("python /x/ppo_atari_lstm.py", "BattleZoneNoFrameskip-v4"),
        ("torchrun --nproc_per_node 2 cleanrl/ppo_atari_multigpu.py", "BattleZoneNoFrameskip-v4"),
    ],
)
def test_sets_expand_to_the_scripts_id_style(command, first):
    ids, lines = atari5.expand_env_ids(["atari5"], command)
    assert ids[0] == first and len(ids) == 5
    assert lines == [f"--env-ids atari5: {' '.join(ids)}"]


def test_sets_mix_with_plain_ids_and_unknown_sets_are_named():
    ids, lines = atari5.expand_env_ids(["Pong-v5", "atari3-val", "Assault-v5"], "python x.py")
    assert ids == ["Pong-v5", "Assault-v5", "MsPacman-v5", "YarsRevenge-v5"]
    assert len(lines) == 1
    assert atari5.expand_env_ids(["Pong-v5"], "python x.py") == (["Pong-v5"], [])
    ids, lines = atari5.expand_env_ids(["atari5", "atari10", "Qbert-v5"], "python x.py")
    assert len(ids) == 10 and len(lines) == 2  # games of both sets once
    assert atari5.expand_env_ids(["Pong-v5", "Pong-v5"], "x")[0] == ["Pong-v5", "Pong-v5"]
    with pytest.raises(ValueError, match="unknown game set 'atari7'.*atari5, atari3-val"):
        atari5.expand_env_ids(["atari7"], "python x.py")
    for plain in ("ALE/Pong-v5", "Atari5", "atari-v5"):
        assert not atari5.is_set_name(plain)
