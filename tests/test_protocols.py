"""The evaluation protocols (`cleanrl_utils.envs.protocols`, docs/protocols.md): the five settings of
the games and `--protocol machado` in every script, each setting reaching the emulator of every
backend (EnvPool, ALE's vector env, gymnasium's ALE), and the protocol recorded (config.json,
the model file) and played again by the evaluator. Everything in-process, on real emulators; the
scripts' own runs under `--protocol machado` are in their modules (test_ppo_atari.py,
test_ppo_atari_envpool_cli.py, test_ppo_atari_envpool_xla_jax.py, test_ppo_atari_ale_vector.py).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import deque
from importlib import metadata
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from logs_testing import read_scalars

from cleanrl_utils.after_training import finish_training
from cleanrl_utils.checks.args import parse_args
from cleanrl_utils.console.errors import RunError, entry_point
from cleanrl_utils.envs import protocols
from cleanrl_utils.envs.protocols import MACHADO
from cleanrl_utils.evals import evaluate_model
from cleanrl_utils.evals.common import evaluation_games, parse_eval_args
from cleanrl_utils.files.machine import device_of
from cleanrl_utils.files.model_file import read_model, save_jax_model, save_torch_model
from cleanrl_utils.files.scripts import load_script
from cleanrl_utils.run import Run

SCRIPTS = [
    "ppo_atari_envpool",
    "ppo_atari",
    "ppo_atari_lstm",
    "ppo_atari_ale_vector",
    "ppo_atari_envpool_xla_jax",
    "ppo_atari_envpool_xla_jax_scan",
    "ppo_atari_multigpu",
    "ppo_atari_envpool_multigpu",
]
ENVPOOL_SCRIPTS = [name for name in SCRIPTS if "envpool" in name]
# one script per backend, and its spelling of Breakout
BACKENDS = {
    "envpool": ("ppo_atari_envpool", "Breakout-v5"),
    "ale_vector": ("ppo_atari_ale_vector", "Breakout-v5"),
    "gymnasium": ("ppo_atari", "BreakoutNoFrameskip-v4"),
}
SMALL = dict(num_envs=2, num_steps=4, num_minibatches=2, update_epochs=1, total_timesteps=40)


@pytest.fixture(scope="module")
def scripts():
    return {name: load_script(name) for name in SCRIPTS}


def backend(name: str):
    script_name, env_id = BACKENDS[name]
    return load_script(script_name), env_id


def play(script, env_id: str, seed: int, actions, **settings):
    """A fixed action sequence played in one env: its frames, lives and terminations."""
    envs = script.make_env(env_id, 1, seed, **settings)
    try:
        frames = [envs.reset()[0]]
        lives, terminations = [], 0
        for action in actions:
            obs, _, terminated, _, info = envs.step(np.array([action]))
            frames.append(obs)
            lives.append(int(info["lives"][0]))
            terminations += int(terminated[0])
        return np.stack(frames), lives, terminations
    finally:
        envs.close()


# -- the settings and --protocol ---------------------------------------------------------------


def test_every_script_defaults_to_the_published_settings_and_machado_sets_all_five(
    scripts, tmp_path
):
    for name, script in scripts.items():
        fields = {f.name for f in dataclasses.fields(script.Args)}
        assert {"protocol", *protocols.SETTINGS} <= fields, name
        assert protocols.settings(script.Args()) == protocols.published(name), name
        assert protocols.record(script.Args())["name"] == "published"
        argv = ["--protocol", "machado"]
        with Run(parse_args(script.Args, argv), f"{name}.py", tmp_path, argv) as run:
            assert run.protocol == MACHADO
            assert protocols.record(run.args) == {"name": "machado", **MACHADO}
        custom = protocols.record(script.Args(noop_max=5))
        assert custom == {"name": "custom", **protocols.published(name), "noop_max": 5}
    # the time limit of the published runs: EnvPool 0.6's 108,000 steps, ALE's 108,000 frames
    assert protocols.published("ppo_atari_envpool")["max_episode_steps"] == 108_000
    assert protocols.published("ppo_atari_lstm")["max_episode_steps"] == 27_000
    assert not list(tmp_path.iterdir())  # (nothing written before `start`)


@pytest.mark.parametrize(
    "argv, line",
    [
        (
            ["--protocol", "machado", "--noop-max", "30"],
            "--protocol machado means --noop-max 0, and this command also gives --noop-max 30",
        ),
        (
            ["--protocol", "machado", "--episodic-life"],
            "--protocol machado means --no-episodic-life, and this command also gives "
            "--episodic-life",
        ),
        (
            ["--protocol", "published", "--repeat-action-probability", "0.25"],
            "--protocol published means --repeat-action-probability 0.0, and this command also "
            "gives --repeat-action-probability 0.25",
        ),
        (["--protocol", "dopamine"], "--protocol 'dopamine' is not a protocol"),
        (["--repeat-action-probability", "1.5"], "must be between 0 and 1, got 1.5"),
        (["--noop-max", "-1"], "--noop-max must be 0 (no no-op starts) or positive, got -1"),
    ],
)
def test_a_setting_that_contradicts_the_protocol_is_one_error_line_and_exit_2_before_any_folder(
    scripts, tmp_path, capsys, argv, line
):
    for name, script in scripts.items():
        args = parse_args(script.Args, argv)
        with pytest.raises(SystemExit) as exc, entry_point():
            Run(args, f"{name}.py", tmp_path / "runs", argv)
        assert exc.value.code == 2
        (error,) = capsys.readouterr().err.strip().splitlines()
        assert error.startswith("error: ") and line in error, (name, error)
    assert not (tmp_path / "runs").exists()
    # the same settings given without the conflict: machado's values agree with it
    assert (
        protocols.protocol_problem(
            dict(protocol="machado", **MACHADO), {"protocol", *protocols.SETTINGS}
        )
        is None
    )


# -- each setting reaches the emulator ---------------------------------------------------------


def test_the_envpool_scripts_pass_every_setting_to_envpool(scripts):
    custom = dict(MACHADO, repeat_action_probability=0.1, noop_max=7, max_episode_steps=500)
    for name in ENVPOOL_SCRIPTS:
        for settings in (protocols.published(name), MACHADO, custom):
            envs = scripts[name].make_env("Breakout-v5", 1, 1, **settings)
            config = envs.spec.config
            for setting, value in settings.items():
                # EnvPool plays 0 to noop_max - 1 no-ops: its 1 is none (and 0 crashes it)
                wanted = max(value, 1) if setting == "noop_max" else value
                assert getattr(config, setting) == pytest.approx(wanted), (name, setting)
            assert config.reward_clip and config.use_fire_reset
            envs.close()


@pytest.mark.parametrize("name", BACKENDS)
def test_sticky_actions_change_what_a_fixed_action_sequence_does(name):
    script, env_id = backend(name)
    actions = np.random.default_rng(0).integers(4, size=150)
    no_noops = dict(noop_max=0)  # (else the no-op starts alone make the seeds' games differ)
    plain = [play(script, env_id, seed, actions, **no_noops)[0] for seed in (1, 2)]
    sticky = [
        play(script, env_id, seed, actions, repeat_action_probability=0.25, **no_noops)[0]
        for seed in (1, 2)
    ]
    # without sticky actions the emulator is deterministic: the seed changes nothing
    assert np.array_equal(plain[0], plain[1])
    # with them, each frame repeats the previous action with probability 0.25, drawn from the
    # seed: the same actions play differently
    assert not np.array_equal(sticky[0], sticky[1])
    assert not np.array_equal(sticky[0], plain[0])


@pytest.mark.parametrize("name", BACKENDS)
def test_the_full_action_space_gives_the_network_18_outputs_on_every_game(name):
    script, env_id = backend(name)
    games = {"Breakout": 4, "Pong": 6, "MsPacman": 9}
    for game, minimal in games.items():
        game_id = env_id.replace("Breakout", game)
        for full, actions in ((False, minimal), (True, 18)):
            envs = script.make_env(game_id, 1, 1, full_action_space=full)
            assert envs.single_action_space.n == actions, (game, full)
            assert script.Agent(envs).actor.out_features == actions, (game, full)
            envs.close()


def test_the_full_action_space_reaches_the_lstm_and_the_jax_networks():
    import jax

    lstm = load_script("ppo_atari_lstm")
    envs = lstm.make_env("PongNoFrameskip-v4", 1, 1, full_action_space=True)
    assert lstm.Agent(envs).actor.out_features == 18
    envs.close()
    for name in ("ppo_atari_envpool_xla_jax", "ppo_atari_envpool_xla_jax_scan"):
        script = load_script(name)
        envs = script.make_env("Pong-v5", 1, 1, full_action_space=True)
        agent = script.Agent(envs.action_space.n)
        obs = np.zeros((1, *envs.observation_space.shape), np.uint8)
        params = jax.eval_shape(agent.init, jax.random.PRNGKey(0), obs)
        assert jax.tree_util.tree_leaves(params.actor)[0].shape[-1] == 18  # (bias, then kernel)
        envs.close()


@pytest.mark.parametrize("name", BACKENDS)
def test_without_episodic_life_a_lost_life_ends_nothing_and_nothing_presses_fire(name):
    """Breakout after FIRE on reset, then only NOOPs: the ball is missed and a life lost. With
    episodic life that ends the training episode and FIRE is pressed for the agent (the ball comes
    back, lives go on falling); without, the game goes on and waits for the agent's FIRE."""
    script, env_id = backend(name)
    noops = np.zeros(600, dtype=np.int64)
    _, lives, terminations = play(script, env_id, 1, noops, noop_max=0, episodic_life=True)
    assert terminations >= 4 and min(lives) <= 1
    _, lives, terminations = play(script, env_id, 1, noops, noop_max=0, episodic_life=False)
    assert terminations == 0 and lives[0] == 5 and lives[-1] == 4


@pytest.mark.parametrize("name", BACKENDS)
def test_no_op_starts_vary_the_first_state_and_noop_max_0_has_none(name):
    script, env_id = backend(name)

    def start_states(noop_max: int) -> set:
        states = set()
        for seed in range(1, 7):
            envs = script.make_env(env_id, 1, seed, noop_max=noop_max)
            obs, info = envs.reset()
            if name == "envpool":  # the emulator's RAM after the reset
                state = info["ram"][0].tobytes()
            elif name == "ale_vector":  # the frames played in the reset (no RAM there)
                state = int(info["episode_frame_number"][0])
            else:
                state = envs.unwrapped.envs[0].unwrapped.ale.getRAM().tobytes()
            states.add((state, obs.tobytes()))
            envs.close()
        return states

    assert len(start_states(0)) == 1
    assert len(start_states(30)) > 1


@pytest.mark.parametrize("name", BACKENDS)
def test_the_time_limit_in_agent_steps_reaches_the_emulator(name):
    script, env_id = backend(name)
    envs = script.make_env(env_id, 1, 1, max_episode_steps=50, noop_max=0, episodic_life=False)
    envs.reset()
    actions = np.random.default_rng(0).integers(4, size=60)
    truncated_at = []
    for step, action in enumerate(actions, 1):
        truncated = envs.step(np.array([action]))[3]
        if truncated[0]:
            truncated_at.append(step)
    envs.close()
    # (ALE counts the frames of the reset, FIRE included, into the limit: a step or two less;
    # EnvPool counts from its reset step)
    assert truncated_at and 47 <= truncated_at[0] <= 51, truncated_at


# -- the records and the evaluator -------------------------------------------------------------


def test_config_json_records_the_protocol_packages_and_device_and_the_evaluation_its_last_step(
    tmp_path,
):
    script = load_script("ppo_atari_envpool")
    argv = ["--protocol", "machado"]
    args = dataclasses.replace(parse_args(script.Args, argv), save_model=True, **SMALL)
    with Run(args, script.__file__, tmp_path, argv) as run:
        args = run.args
        args.batch_size = args.num_envs * args.num_steps
        args.minibatch_size = args.batch_size // args.num_minibatches
        args.num_iterations = args.total_timesteps // args.batch_size
        run.start()
        state = {"agent": torch.nn.Linear(2, 2), "avg_returns": deque(maxlen=20)}
        run.restore(state)
        record = json.loads((run.dir / "config.json").read_text())
        assert record["protocol"] == {"name": "machado", **MACHADO}
        for name in ("torch", "envpool", "ale-py", "gymnasium", "numpy"):
            assert record["packages"][name] == metadata.version(name)
        # `--cuda` is on by default; the device is the one the agent is on, and `cuda` says it
        assert args.cuda is True
        assert record["device"]["framework"] == "torch"
        assert record["device"]["type"] == "cpu"  # (the agent above is on the CPU)
        assert record["args"]["cuda"] is False
        assert record["device"]["name"]
        for iteration in range(1, args.num_iterations + 1):
            run.end_iteration(iteration, iteration * args.batch_size, [], state)
        finish_training(run, lambda path: None, lambda **games: [3.0, 4.0])
    last = args.num_iterations * args.batch_size
    assert read_scalars(run.dir)["eval/episodic_return"] == [(last, 3.0), (last, 4.0)]


def test_device_of_a_jax_state():
    import jax.numpy as jnp

    device = device_of({"agent_state": {"params": jnp.zeros(2)}, "avg_returns": []})
    assert device["framework"] == "jax" and device["type"] == "cpu" and device["name"]


def custom_settings() -> dict:
    """Machado's settings with games cut at 100 steps: a custom protocol, quick to play."""
    return dict(MACHADO, max_episode_steps=100)


def test_the_model_file_records_the_protocol_and_the_evaluator_plays_under_it(tmp_path, capsys):
    script = load_script("ppo_atari_envpool")
    args = script.Args(**custom_settings())
    envs = script.make_env(args.env_id, 1, 1, **protocols.settings(args))
    agent = script.Agent(envs)
    envs.close()
    path = tmp_path / "ppo_atari_envpool.cleanrl_model"
    save_torch_model(path, agent, args, script.__file__)
    model = read_model(path)
    assert model.protocol == {"name": "custom", **custom_settings()}

    eval_args = parse_eval_args(["--model-path", str(path), "--eval-episodes", "1"])
    capsys.readouterr()
    (episodic_return,) = evaluate_model(model, eval_args)
    out = capsys.readouterr().out
    said = (
        "games with seed 2 (the run's own evaluation's), under the custom protocol "
        "(repeat_action_probability=0.25, full_action_space=True, episodic_life=False, "
        "noop_max=0, max_episode_steps=100) (the one it was trained with)"
    )
    assert said in out, out
    # the game is cut at the recorded time limit (a random agent's game of Breakout is longer)
    assert re.search(r"^eval_episode=0, episodic_return=[\d.]+, episodic_length=100$", out, re.M)

    # told otherwise: Machado's settings (the same action set), said so
    eval_args = parse_eval_args(["--model-path", str(path), "--protocol", "machado"])
    make_env, seed = evaluation_games(model, script, eval_args)
    assert make_env.keywords == MACHADO and seed == 2
    assert "(--protocol; it was trained under custom)" in capsys.readouterr().out
    # the published protocol's minimal action set is not the network's: one error line
    eval_args = parse_eval_args(["--model-path", str(path), "--protocol", "published"])
    with pytest.raises(SystemExit) as exc, entry_point():
        evaluation_games(model, script, eval_args)
    assert exc.value.code == 2
    assert "--protocol published plays the minimal action set" in capsys.readouterr().err


def test_a_jax_model_file_records_the_protocol_and_a_file_without_one_is_published(tmp_path):
    import jax

    script = load_script("ppo_atari_envpool_xla_jax")
    args = script.Args(protocol="machado", **MACHADO)
    shapes = jax.eval_shape(script.Agent(18).init, jax.random.PRNGKey(0), np.zeros((1, 4, 84, 84)))
    params = jax.tree_util.tree_map(lambda x: np.zeros(x.shape, x.dtype), shapes)
    path = tmp_path / "ppo_atari_envpool_xla_jax.cleanrl_model"
    save_jax_model(path, params, args, script.__file__)
    assert read_model(path).protocol == {"name": "machado", **MACHADO}
    # a checkpoint, or a file of an older version, records none: its arguments say it (the
    # settings they lack are the script's published ones)
    old = {"env_id": "Breakout-v5", "seed": 1, "max_episode_steps": 27_000}
    assert protocols.record(old, "ppo_atari_envpool_xla_jax") == {
        "name": "custom",
        **protocols.published("ppo_atari_envpool_xla_jax"),
        "max_episode_steps": 27_000,
    }
    assert protocols.record({"env_id": "BreakoutNoFrameskip-v4"}, "ppo_atari")["name"] == (
        "published"
    )


def test_a_resumed_run_keeps_its_protocol_and_refuses_another(tmp_path, capsys):
    script = load_script("ppo_atari_envpool")

    def start(argv):
        args = dataclasses.replace(parse_args(script.Args, argv), **SMALL)
        run = Run(args, script.__file__, tmp_path, argv)
        run.args.batch_size = run.args.num_envs * run.args.num_steps
        run.args.minibatch_size = run.args.batch_size // run.args.num_minibatches
        run.args.num_iterations = run.args.total_timesteps // run.args.batch_size
        return run

    argv = ["--protocol", "machado", "--checkpoint-every", "1"]
    with start(argv) as run:
        run.start()
        state = {"agent": torch.nn.Linear(2, 2), "avg_returns": deque(maxlen=20)}
        run.restore(state)
        run.end_iteration(1, run.args.batch_size, [], state)  # (1 of 5: a checkpoint, unfinished)
    # resumed without --protocol: the checkpoint's settings, not the defaults
    argv = ["--resume", str(run.dir)]
    with start(argv) as resumed:
        assert resumed.protocol == MACHADO and resumed.args.protocol == "machado"
    record = json.loads((run.dir / "config.json").read_text())
    assert record["protocol"] == {"name": "machado", **MACHADO}
    # another protocol, or a setting of another one, for the same run: one error line, exit 2
    for argv in (["--protocol", "published"], ["--repeat-action-probability", "0.0"]):
        capsys.readouterr()
        with pytest.raises(SystemExit) as exc, entry_point():
            start(["--resume", str(run.dir), *argv])
        assert exc.value.code == 2
        (error,) = capsys.readouterr().err.strip().splitlines()
        assert error.startswith("error: --resume: the checkpoint was made with"), error


def test_a_run_made_with_machados_settings_one_by_one_resumes_under_protocol_machado(tmp_path):
    """The five settings given one by one make the machado protocol (config.json says so);
    `--resume RUN --protocol machado` goes on with them (it was refused: "the checkpoint was
    made with --protocol None", a flag nobody can give); `--protocol published` is refused,
    naming the setting that differs."""
    script = load_script("ppo_atari_envpool")

    def start(argv):
        args = dataclasses.replace(parse_args(script.Args, argv), **SMALL)
        run = Run(args, script.__file__, tmp_path, argv)
        run.args.batch_size = run.args.num_envs * run.args.num_steps
        run.args.minibatch_size = run.args.batch_size // run.args.num_minibatches
        run.args.num_iterations = run.args.total_timesteps // run.args.batch_size
        return run

    one_by_one = ["--repeat-action-probability", "0.25", "--full-action-space",
                  "--no-episodic-life", "--noop-max", "0", "--max-episode-steps", "27000"]  # fmt: skip
    with start([*one_by_one, "--checkpoint-every", "1"]) as run:
        run.start()
        state = {"agent": torch.nn.Linear(2, 2), "avg_returns": deque(maxlen=20)}
        run.restore(state)
        run.end_iteration(1, run.args.batch_size, [], state)
    assert json.loads((run.dir / "config.json").read_text())["protocol"]["name"] == "machado"
    with start(["--resume", str(run.dir), "--protocol", "machado"]) as resumed:
        assert resumed.protocol == MACHADO and resumed.start_iteration == 2
    with pytest.raises(RunError, match=r"made with --repeat-action-probability 0\.25, this "
                       r"command gives --protocol published, which means "
                       r"--repeat-action-probability 0\.0"):  # fmt: skip
        start(["--resume", str(run.dir), "--protocol", "published"])


def test_processes_given_one_protocol_spelled_two_ways_agree():
    """Rank 0 given `--protocol machado`, rank 1 the five settings one by one: the same games,
    no disagreement (it was: `--protocol: machado on rank 0, None on rank 1`); another setting
    is one."""
    from cleanrl_utils.distributed.agreement import disagreement, run_view

    script = load_script("ppo_atari_envpool")

    def view(args):
        run = SimpleNamespace(script=script.__name__, script_file=script.__file__, payload=None,
                              args=protocols.resolved(args), name="RUN", runs_dir="runs")  # fmt: skip
        return run_view(run)

    named = view(script.Args(protocol="machado"))
    assert disagreement([named, view(script.Args(**MACHADO))]) is None
    other = view(script.Args(**(MACHADO | {"noop_max": 5})))
    assert "--noop-max: 0 on rank 0, 5 on rank 1" in disagreement([named, other])
