"""The bad-input checks shared by the scripts: one `error:` line and exit code 2, before any work.

The table of bad inputs runs here, in-process, against each script's own `Args` and the checks
its `__main__` makes, in the same order (`check_ppo_args`, then the env id). Each script's test
file keeps one case as a real subprocess, which also checks the exit code and that nothing was
created on disk; `test_each_script_checks_its_env_id_before_any_work` runs each script's
`__main__` in-process to show that the script makes the env id check at all.
"""

from __future__ import annotations

import importlib
import runpy

import pytest
from checks_testing import (
    ALE_VECTOR,
    ENVPOOL,
    GYMNASIUM,
    LSTM,
    SCRIPT_CHECKS,
    XLA_JAX,
    XLA_JAX_SCAN,
    check_script_args,
    script_args,
    usage_error,
)
from scripts_testing import REPO_ROOT

from cleanrl_utils.checks.args import check_ppo_args
from cleanrl_utils.checks.env_ids import (
    ENV_ID_PROBLEMS,
    check_ale_vector_id,
    check_env_id,
    check_envpool_atari_id,
    check_gymnasium_atari_id,
    game_of,
)
from cleanrl_utils.console.errors import entry_point

GYMNASIUM_IDS = ["PongNoFrameskip-v4", "BreakoutNoFrameskip-v4", "Pong-v4", "ALE/Pong-v5"]
ENVPOOL_IDS = ["Pong-v5", "Breakout-v5", "SpaceInvaders-v5"]


def error_of(env_id, known, capsys) -> str:
    with pytest.raises(SystemExit) as exit_info, entry_point():
        check_env_id(env_id, known, "the library")
    assert exit_info.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    return line


def test_game_of_ignores_the_id_style():
    for env_id in ["Pong-v5", "PongNoFrameskip-v4", "ALE/Pong-v5", "PongDeterministic-v4"]:
        assert game_of(env_id) == "pong"
    assert game_of("SpaceInvaders-v5") == "spaceinvaders"


def test_known_ids_pass(capsys):
    """Every id of the list passes: no exit, nothing printed. The same id against the list
    without it stops with the line, so the pass is the list's doing."""
    for known in (ENVPOOL_IDS, GYMNASIUM_IDS):
        for env_id in known:
            assert check_env_id(env_id, known, "the library") is None
            assert capsys.readouterr() == ("", "")
            others = [k for k in known if k != env_id]
            line = error_of(env_id, others, capsys)
            assert line.startswith(f"error: unknown env id {env_id!r} for the library")
    # any iterable of ids, as a library lists them
    assert check_env_id("Pong-v5", (i for i in ENVPOOL_IDS), "EnvPool") is None
    assert capsys.readouterr() == ("", "")


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


@pytest.mark.parametrize(
    ("check", "good", "bad"),
    [
        (check_envpool_atari_id, "Breakout-v5", "BreakoutNoFrameskip-v4"),
        (check_gymnasium_atari_id, "BreakoutNoFrameskip-v4", "Breakout-v5"),
        (check_ale_vector_id, "ALE/Breakout-v5", "BreakoutNoFrameskip-v4"),
    ],
)
def test_each_env_id_check_says_its_problem_function_s_line(check, good, bad, capsys):
    """The scripts' env id checks exit with the line their problem functions return (which the
    tuner's probe asks without exiting), and pass what those find no problem with."""
    problem = ENV_ID_PROBLEMS[check]
    assert problem(good) is None and check(good) is None
    assert capsys.readouterr() == ("", "")
    said = problem(bad)
    assert said.startswith(f"unknown env id {bad!r} for ") and "did you mean" in said
    with pytest.raises(SystemExit) as exit_info, entry_point():
        check(bad)
    assert exit_info.value.code == 2 and capsys.readouterr().err == f"error: {said}\n"


# ---------------------------------------------------------------------------------------------
# each script's bad input
# ---------------------------------------------------------------------------------------------

# the smoke sizes of the scripts' test files, with which the bad minibatch counts were found
ENVPOOL_SMOKE = dict(num_envs=8, num_steps=32, total_timesteps=256)  # batch 256
GYMNASIUM_SMOKE = dict(num_envs=1, num_steps=64, total_timesteps=256)  # batch 64
# batch 48
XLA_SMOKE = dict(num_envs=8, num_steps=6, update_epochs=1, num_minibatches=1, total_timesteps=256)

# the same bad input in every script: (flags, words the error line must contain)
EVERY_SCRIPT = {
    "num-envs-0": (dict(num_envs=0), ["--num-envs", "0"]),
    "update-epochs-0": (dict(update_epochs=0), ["--update-epochs", "0"]),
    "negative-timesteps": (dict(total_timesteps=-5), ["--total-timesteps", "-5"]),
    "below-one-batch": (dict(total_timesteps=100), ["--total-timesteps 100", "one batch"]),
    "negative-checkpoint-every": (dict(checkpoint_every=-1), ["--checkpoint-every", "-1"]),
    "gamma-above-1": (dict(gamma=2.0), ["--gamma", "between 0 and 1", "2.0"]),
    "gae-lambda-above-1": (dict(gae_lambda=1.01), ["--gae-lambda", "between 0 and 1", "1.01"]),
    "negative-gamma": (dict(gamma=-0.5), ["--gamma", "-0.5"]),
    # a seed whose evaluation (seed + 1) is past a C int (the games' seeds in EnvPool and ALE)
    "seed-past-a-c-int": (dict(seed=2**31 - 1, num_envs=1), ["--seed", "2147483646"]),
    # the iterations, and the gradient steps of one, counted in int32 (the JAX scripts' schedule)
    "iterations-past-a-c-int": (dict(total_timesteps=2**45), ["--total-timesteps", "C int"]),
    "gradient-steps-past-a-c-int": (dict(update_epochs=2**31), ["--update-epochs", "C int"]),
    # no-op starts past a C int (pybind11's TypeError after the folder was made), or that the
    # gymnasium scripts would play for hours in Python while a stop signal waited
    "noop-max-past-its-bound": (
        dict(noop_max=3_000_000_000),
        ["--noop-max", "at most 10000", "3000000000"],
    ),
}
# bad input particular to one script (or one kind of script): (script, flags, words)
PARTICULAR = {
    # EnvPool scripts: EnvPool's Atari ids only
    "envpool-env-id-v6": (ENVPOOL, dict(env_id="Breakout-v6"), ["Breakout-v6", "Breakout-v5"]),
    "envpool-env-id-typo": (ENVPOOL, dict(env_id="Breakou-v5"), ["Breakou-v5", "Breakout-v5"]),
    "envpool-not-atari": (ENVPOOL, dict(env_id="CartPole-v1"), ["CartPole-v1", "Atari"]),
    "xla-env-id-typo": (XLA_JAX, dict(env_id="Breakou-v5"), ["Breakou-v5", "Breakout-v5"]),
    "scan-env-id-typo": (XLA_JAX_SCAN, dict(env_id="Breakou-v5"), ["Breakou-v5", "Breakout-v5"]),
    "ale_vector-not-atari": (ALE_VECTOR, dict(env_id="CartPole-v1"), ["CartPole-v1", "ALE"]),
    "ale_vector-batch": (ALE_VECTOR, dict(num_minibatches=3), ["--num-minibatches 3"]),
    # a time limit past the C int that receives it: EnvPool's steps, ALE's frames (4 a step)
    "envpool-max-episode-steps": (
        ENVPOOL,
        dict(max_episode_steps=4_000_000_000),
        ["--max-episode-steps", "at most 536870911", "4000000000"],
    ),
    "ale_vector-max-episode-steps": (
        ALE_VECTOR,
        dict(max_episode_steps=600_000_000),
        ["--max-episode-steps", "at most 536870911", "600000000"],
    ),
    "xla-max-episode-steps": (XLA_JAX, dict(max_episode_steps=2**31), ["--max-episode-steps"]),
    "scan-max-episode-steps": (
        XLA_JAX_SCAN,
        dict(max_episode_steps=2**31),
        ["--max-episode-steps"],
    ),
    # gymnasium scripts: ALE ids without frame skip only, with a hint for the EnvPool id style
    "gymnasium-envpool-id": (
        GYMNASIUM,
        dict(env_id="Breakout-v5"),
        ["'Breakout-v5'", "BreakoutNoFrameskip-v4"],
    ),
    "gymnasium-not-atari": (GYMNASIUM, dict(env_id="CartPole-v1"), ["'CartPole-v1'"]),
    "lstm-envpool-id": (
        LSTM,
        dict(env_id="Breakout-v5"),
        ["'Breakout-v5'", "BreakoutNoFrameskip-v4"],
    ),
    # a minibatch count that does not divide the batch
    "envpool-minibatches": (
        ENVPOOL,
        dict(ENVPOOL_SMOKE, num_minibatches=3),
        ["--num-minibatches 3", "256"],
    ),
    "gymnasium-minibatches": (
        GYMNASIUM,
        dict(GYMNASIUM_SMOKE, num_minibatches=3),
        ["--num-minibatches 3", "64"],
    ),
    "xla-minibatches": (XLA_JAX, dict(XLA_SMOKE, num_minibatches=5), ["--num-minibatches 5", "48"]),
    "scan-minibatches": (
        XLA_JAX_SCAN,
        dict(XLA_SMOKE, num_minibatches=5),
        ["--num-minibatches 5", "48"],
    ),
    "scan-num-envs-0-save-model": (
        XLA_JAX_SCAN,
        dict(save_model=True, num_envs=0),
        ["--num-envs", "0"],
    ),
    # the LSTM's minibatches are whole env sequences: they must divide the envs, not only the
    # batch (6 envs x 128 steps = 768 is divisible by 4)
    "lstm-minibatches-of-whole-envs": (
        LSTM,
        dict(num_envs=6),
        ["--num-minibatches 4", "--num-envs 6", "whole env sequences"],
    ),
    "lstm-minibatches-of-whole-envs-small": (
        LSTM,
        dict(num_envs=2, num_steps=64, total_timesteps=256),
        ["--num-minibatches 4", "--num-envs 2", "whole env sequences"],
    ),
}
BAD_INPUT = {
    **{
        f"{script}-{name}": (script, flags, words)
        for name, (flags, words) in EVERY_SCRIPT.items()
        for script in SCRIPT_CHECKS
    },
    **PARTICULAR,
}


@pytest.mark.parametrize("script", SCRIPT_CHECKS)
def test_the_defaults_of_every_script_pass(script, capsys):
    check_script_args(script, script_args(script))
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize(("script", "flags", "words"), BAD_INPUT.values(), ids=list(BAD_INPUT))
def test_bad_input_is_one_error_line_naming_the_flag(capsys, script, flags, words):
    line = usage_error(capsys, script, **flags)
    for word in words:
        assert word in line, f"{word!r} not in {line!r}"


def test_only_the_lstm_needs_minibatches_that_divide_the_envs(capsys):
    # the batch arithmetic alone accepts 6 envs in 4 minibatches: whole sequences do not
    for script in (ENVPOOL, GYMNASIUM, XLA_JAX, XLA_JAX_SCAN, ALE_VECTOR):
        check_script_args(script, script_args(script, num_envs=6))
    check_ppo_args(script_args(LSTM, num_envs=6))
    assert capsys.readouterr() == ("", "")
    line = usage_error(capsys, LSTM, num_envs=6)
    assert "whole env sequences" in line
    # 8 envs in 4 minibatches of 2 whole sequences: fine
    check_script_args(LSTM, script_args(LSTM, num_envs=8, num_minibatches=4))


@pytest.mark.parametrize(
    ("env_id", "check"),
    [
        ("Breakout-v5", check_envpool_atari_id),
        ("SpaceInvaders-v5", check_envpool_atari_id),
        ("BreakoutNoFrameskip-v4", check_gymnasium_atari_id),
        ("MsPacmanNoFrameskip-v4", check_gymnasium_atari_id),
        # ALE's vector env: ALE's spelling and EnvPool's, so command lines carry over
        ("ALE/Breakout-v5", check_ale_vector_id),
        ("Breakout-v5", check_ale_vector_id),
        ("SpaceInvaders-v5", check_ale_vector_id),
    ],
)
def test_atari_ids_of_each_library_pass(capsys, env_id, check):
    check(env_id)
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize(
    ("env_id", "check", "words"),
    [
        # the other library's id of the same game is suggested
        ("BreakoutNoFrameskip-v4", check_envpool_atari_id, ["did you mean Breakout-v5"]),
        ("ALE/Breakout-v5", check_gymnasium_atari_id, ["did you mean BreakoutNoFrameskip-v"]),
        ("Breakout-v4", check_gymnasium_atari_id, ["did you mean BreakoutNoFrameskip-v"]),
        # not an Atari game at all
        ("CartPole-v1", check_gymnasium_atari_id, ["without frame skip"]),
        ("BreakoutNoFrameskip-v4", check_ale_vector_id, ["did you mean ALE/Breakout-v5"]),
        ("ALE/Breakuot-v5", check_ale_vector_id, ["did you mean ALE/Breakout-v5"]),
        ("ALE/Breakout-v4", check_ale_vector_id, ["did you mean ALE/Breakout-v5"]),
    ],
)
def test_ids_the_scripts_cannot_use_get_a_hint(capsys, env_id, check, words):
    with pytest.raises(SystemExit) as exit_info, entry_point():
        check(env_id)
    assert exit_info.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: unknown env id {env_id!r}")
    for word in words:
        assert word in line, f"{word!r} not in {line!r}"


@pytest.mark.parametrize("script", SCRIPT_CHECKS)
def test_each_script_checks_its_env_id_before_any_work(monkeypatch, tmp_path, capsys, script):
    """The script itself (its `__main__`, in-process): an id of the other library is rejected
    before a run folder exists."""
    env_id = "Breakout-v5" if script in (GYMNASIUM, LSTM) else "BreakoutNoFrameskip-v4"
    path = REPO_ROOT / "cleanrl" / f"{script}.py"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.argv", [str(path), "--env-id", env_id])
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_path(str(path), run_name="__main__")
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: unknown env id {env_id!r}"), lines
    assert not list(tmp_path.iterdir())  # no runs/, videos/, wandb/


@pytest.mark.parametrize("script", list(SCRIPT_CHECKS))
@pytest.mark.parametrize("flag", ["--batch-size", "--minibatch-size", "--num-iterations"])
def test_the_derived_sizes_are_not_flags(script, flag, capsys):
    """They are computed from the other flags: offering them would overwrite what was given."""
    import tyro

    module = importlib.import_module(f"cleanrl.{script}")
    with pytest.raises(SystemExit) as exit_info:
        tyro.cli(module.Args, args=[flag, "64"])
    assert exit_info.value.code == 2
    with pytest.raises(SystemExit):
        tyro.cli(module.Args, args=["--help"])
    assert flag not in capsys.readouterr().out
    assert module.Args().batch_size == 0  # filled in by the script, after the resume


@pytest.mark.parametrize(
    ("script", "flags"),
    [
        (ALE_VECTOR, ["--max-episode-steps", "600000000"]),
        (ENVPOOL, ["--max-episode-steps", "4000000000"]),
        (ENVPOOL, ["--seed", "2147483647", "--num-envs", "1"]),
        (ENVPOOL, ["--noop-max", "3000000000"]),
        (GYMNASIUM, ["--noop-max", "3000000000"]),
    ],
)
def test_an_integer_past_the_c_type_that_takes_it_is_refused_by_the_parser(script, flags, capsys):
    """Before any run folder: the command line's parse says it (it passed, and EnvPool's or
    ALE's pybind11 raised a TypeError after the folder was made)."""
    from cleanrl_utils.checks.args import parse_args

    with pytest.raises(SystemExit) as exit_info, entry_point():
        parse_args(importlib.import_module(f"cleanrl.{script}").Args, flags)
    assert exit_info.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: {flags[0]} must be ") and flags[1] in line


@pytest.mark.parametrize("script", [ALE_VECTOR, ENVPOOL])
def test_the_emulators_take_the_largest_values_the_checks_allow(script):
    """The limits are the C types' own: the largest time limit, env count at the largest seed,
    and that seed's evaluation (seed + 1, one env), are taken by EnvPool and ALE."""
    from cleanrl_utils.checks.args import C_INT_FLAGS, SEED_LIMIT, number_problem

    make_env = importlib.import_module(f"cleanrl.{script}").make_env
    steps, num_envs = C_INT_FLAGS["max_episode_steps"][0], 2
    noop_max = C_INT_FLAGS["noop_max"][0]
    seed = SEED_LIMIT - num_envs
    limits = dict(max_episode_steps=steps, noop_max=noop_max)
    args = script_args(script, seed=seed, num_envs=num_envs, **limits)
    assert number_problem(args) is None
    assert number_problem(vars(args) | {"max_episode_steps": steps + 1}) is not None
    assert number_problem(vars(args) | {"noop_max": noop_max + 1}) is not None
    assert number_problem(vars(args) | {"seed": seed + 1}) is not None
    for env_seed, envs_count in [(seed, num_envs), (seed + 1, 1)]:
        envs = make_env("Breakout-v5", envs_count, env_seed, **limits)
        envs.reset()
        envs.close()
