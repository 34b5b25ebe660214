"""The bad-input checks shared by the scripts: one `error:` line and exit code 2."""

from __future__ import annotations

import pytest

from cleanrl_utils.checks import check_env_id, game_of

GYMNASIUM_IDS = ["PongNoFrameskip-v4", "BreakoutNoFrameskip-v4", "Pong-v4", "ALE/Pong-v5"]
ENVPOOL_IDS = ["Pong-v5", "Breakout-v5", "SpaceInvaders-v5"]


def error_of(env_id, known, capsys) -> str:
    with pytest.raises(SystemExit) as exit_info:
        check_env_id(env_id, known, "the library")
    assert exit_info.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    return line


def test_game_of_ignores_the_id_style():
    for env_id in ["Pong-v5", "PongNoFrameskip-v4", "ALE/Pong-v5", "PongDeterministic-v4"]:
        assert game_of(env_id) == "pong"
    assert game_of("SpaceInvaders-v5") == "spaceinvaders"


def test_known_ids_pass():
    check_env_id("Pong-v5", ENVPOOL_IDS, "EnvPool")


def test_the_same_game_in_the_other_id_style_is_suggested(capsys):
    line = error_of("Pong-v5", GYMNASIUM_IDS, capsys)
    assert line.startswith("error: unknown env id 'Pong-v5' for the library; did you mean ")
    assert line.split("did you mean ")[1].startswith("PongNoFrameskip-v4")
    line = error_of("BreakoutNoFrameskip-v4", ENVPOOL_IDS, capsys)
    assert "did you mean Breakout-v5" in line


def test_typos_get_close_matches_and_nonsense_gets_no_hint(capsys):
    assert "did you mean Breakout-v5" in error_of("Breakuot-v5", ENVPOOL_IDS, capsys)
    assert error_of("CartPole-v1", ENVPOOL_IDS, capsys) == (
        "error: unknown env id 'CartPole-v1' for the library"
    )
