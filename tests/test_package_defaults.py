"""The defaults of EnvPool, gymnasium/ale-py and JAX that the scripts take without naming them.

The scripts name the settings they change (`max_episode_steps`, `episodic_life`, `reward_clip`
for EnvPool; the wrappers for gymnasium) and take the rest from the packages: the published
preprocessing holds only while these defaults do. They held with the pins (EnvPool 1.2.5, JAX
0.10.2, Python 3.11) and with the newest releases on Python 3.12 and 3.13 (EnvPool 1.2.7, JAX
0.12; `.ci/other-pythons`); a release that changes one fails here, not silently in a learning
curve. EnvPool's behaviour at episode boundaries is pinned by test_envpool_boundaries.py."""

from __future__ import annotations

import pytest


def test_envpool_atari_defaults_are_the_deepmind_preprocessing():
    envpool = pytest.importorskip("envpool")

    config = envpool.make_spec("Breakout-v5").config
    defaults = {name: getattr(config, name) for name in config._fields}
    assert {
        "frame_skip": 4,  # an agent step is 4 emulator frames (max-pooled)
        "noop_max": 30,  # up to 30 no-ops at the start of a game
        "repeat_action_probability": 0.0,  # no sticky actions (ALE's own v5 has 0.25)
        "use_fire_reset": True,  # FIRE after a reset (and after a lost life with episodic_life)
        "full_action_space": False,  # Breakout's 4 actions, not 18
        "img_height": 84,
        "img_width": 84,
        "gray_scale": True,
        "stack_num": 4,
        "zero_discount_on_life_loss": False,
        # what the scripts set themselves, so a changed default would not reach them
        "episodic_life": False,
        "reward_clip": False,
        "max_episode_steps": 27000,
    }.items() <= defaults.items()


def test_envpool_gym_envs_reset_on_the_next_step():
    """The evaluator and the EpisodeStatistics of the EnvPool scripts assume next-step autoreset
    (the step after a done ignores its action), as EnvPool says in its metadata."""
    envpool = pytest.importorskip("envpool")
    from gymnasium.vector import AutoresetMode

    envs = envpool.make_gym("Breakout-v5", num_envs=1, seed=1, episodic_life=True, reward_clip=True)
    try:
        assert envs.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
        obs, info = envs.reset()
        assert obs.shape == (1, 4, 84, 84) and obs.dtype.name == "uint8"
        assert {"lives", "reward", "terminated", "elapsed_step", "env_id"} <= set(info)
    finally:
        envs.close()


def test_ale_noframeskip_v4_is_one_frame_per_step_without_sticky_actions():
    """ppo_atari.py and ppo_atari_lstm.py do the frame skip, no-ops and FIRE in their own
    wrappers: the env must add none of its own."""
    gym = pytest.importorskip("gymnasium")
    ale_py = pytest.importorskip("ale_py")

    gym.register_envs(ale_py)
    spec = gym.spec("BreakoutNoFrameskip-v4")
    assert spec.kwargs["frameskip"] == 1
    assert spec.kwargs["repeat_action_probability"] == 0.0
    assert spec.kwargs["full_action_space"] is False
    assert spec.kwargs["max_num_frames_per_episode"] == 108_000  # the published 30-minute cap
    assert gym.vector.AutoresetMode.SAME_STEP.value == "SameStep"  # (what the scripts ask for)


def test_jax_apis_the_scripts_use():
    jax = pytest.importorskip("jax")
    pytest.importorskip("flax")
    import numpy as np
    from flax.training.train_state import TrainState

    tree = jax.tree_util.tree_map(lambda x: x + 1, {"a": np.zeros(2)})
    assert np.asarray(tree["a"]).tolist() == [1.0, 1.0]
    key = jax.random.PRNGKey(1)  # raw uint32 keys, as the scripts and the checkpoints keep them
    assert key.shape == (2,) and key.dtype == np.uint32
    assert TrainState.__dataclass_fields__.keys() >= {"step", "params", "opt_state", "tx"}
