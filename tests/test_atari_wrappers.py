"""The classic DeepMind preprocessing of `cleanrl/ppo_atari.py` (the LSTM script has the same
wrappers with a stack of 1), each wrapper on a real game. The wrappers that gymnasium does not
ship live in `cleanrl_utils/envs/atari_wrappers.py`; the script's `make_env` puts them in order."""

from __future__ import annotations

import cv2
import gymnasium as gym
import numpy as np
import pytest
from atari_testing import BREAKOUT, FIRE, LEFT, NOOP, find_wrapper, one_torch_thread, wrapper_chain

from cleanrl.ppo_atari import make_env
from cleanrl_utils.envs.atari_wrappers import EpisodicLife, FireReset, GrayscaleOpenCV, NoopReset

__all__ = ["one_torch_thread"]  # the module's autouse fixture

SPACE_INVADERS = "SpaceInvadersNoFrameskip-v4"


def play_until(env, action, stop, max_steps=500):
    for _ in range(max_steps):
        result = env.step(action)
        if stop(*result):
            return result
    raise AssertionError(f"not reached within {max_steps} steps")


def test_wrappers_are_in_reference_order():
    envs = make_env(BREAKOUT, 1, seed=1)
    assert wrapper_chain(envs.unwrapped.envs[0]) == [
        "FrameStackObservation",
        "GrayscaleOpenCV",
        "ResizeObservation",
        "TransformReward",
        "FireReset",
        "EpisodicLife",
        "MaxAndSkipObservation",
        "NoopReset",
        "RecordEpisodeStatistics",
        "OrderEnforcing",
        "PassiveEnvChecker",
        "AtariEnv",
    ]
    envs.close()


def test_games_without_fire_get_no_fire_reset():
    envs = make_env("MsPacmanNoFrameskip-v4", 1, seed=1)
    assert "FIRE" not in envs.unwrapped.envs[0].unwrapped.get_action_meanings()
    assert "FireReset" not in wrapper_chain(envs.unwrapped.envs[0])
    assert "EpisodicLife" in wrapper_chain(envs.unwrapped.envs[0])
    envs.close()


def test_noop_reset_takes_no_more_no_ops_than_the_scripts_checks_allow():
    """Its loop in a reset holds a stop signal until it ends (3 billion no-ops: hours): past the
    bound the command line refuses (`checks.NOOP_MAX_LIMIT`), it is not made."""
    from cleanrl_utils.checks.args import NOOP_MAX_LIMIT

    with pytest.raises(ValueError, match="noop_max"):
        NoopReset(gym.make(BREAKOUT), noop_max=NOOP_MAX_LIMIT + 1)
    with pytest.raises(ValueError, match="noop_max"):
        NoopReset(gym.make(BREAKOUT), noop_max=-1)
    NoopReset(gym.make(BREAKOUT), noop_max=NOOP_MAX_LIMIT).reset(seed=0)


def test_noop_reset_starts_games_after_1_to_30_noop_frames():
    env = NoopReset(gym.make(BREAKOUT), noop_max=30)
    ale = env.unwrapped.ale
    starts = []
    for _ in range(20):  # unseeded resets draw from the seeded generator
        env.reset(seed=1) if not starts else env.reset()
        starts.append(ale.getEpisodeFrameNumber())
    env.reset(seed=1)
    assert ale.getEpisodeFrameNumber() == starts[0]  # seeded
    assert all(1 <= frames <= 30 for frames in starts), starts
    assert len(set(starts)) >= 8, starts
    env.close()


def test_max_and_skip_repeats_the_action_4_frames_and_maxes_the_last_two():
    wrapped = gym.wrappers.MaxAndSkipObservation(gym.make(BREAKOUT), skip=4)
    raw = gym.make(BREAKOUT)
    wrapped.reset(seed=1)
    raw.reset(seed=1)
    rng = np.random.default_rng(1)
    max_differs_from_last, total_reward = 0, 0.0
    for _ in range(150):  # (the game ends after 186 steps, where the last obs may be stale)
        action = int(rng.integers(4))
        obs, reward, terminated, truncated, _ = wrapped.step(action)
        assert not (terminated or truncated)
        frames, rewards = [], []
        for _ in range(4):
            frame, raw_reward, *_ = raw.step(action)
            frames.append(frame)
            rewards.append(raw_reward)
        np.testing.assert_array_equal(obs, np.maximum(frames[2], frames[3]))
        assert reward == sum(rewards)
        max_differs_from_last += not np.array_equal(obs, frames[3])
        total_reward += reward
    assert max_differs_from_last > 0  # the ball moves: the max of two frames is not the last one
    assert total_reward > 0  # and rewards are summed over the 4 frames
    wrapped.close()
    raw.close()


def test_lost_life_ends_the_training_episode_but_not_the_game():
    env = EpisodicLife(gym.wrappers.MaxAndSkipObservation(gym.make(BREAKOUT), skip=4))
    ale = env.unwrapped.ale
    env.reset(seed=1)
    for lives_left in (4, 3, 2, 1):
        env.step(FIRE)
        _, _, terminated, truncated, _ = play_until(env, NOOP, lambda *r: r[2] or r[3])
        assert terminated and not truncated
        assert ale.lives() == lives_left and not ale.game_over()
        frame = ale.getEpisodeFrameNumber()
        env.reset()  # the game goes on: one no-op step, same lives
        assert ale.getEpisodeFrameNumber() == frame + 4
        assert ale.lives() == lives_left
    env.step(FIRE)
    _, _, terminated, _, _ = play_until(env, NOOP, lambda *r: r[2] or r[3])
    assert terminated and ale.game_over() and ale.lives() == 0
    env.reset()  # game over: a new game
    assert ale.lives() == 5 and ale.getEpisodeFrameNumber() == 0
    env.close()


def test_fire_reset_launches_the_ball_after_reset_and_after_a_lost_life():
    def lives_lost_doing_nothing(env, steps=150):
        ale = env.unwrapped.ale
        lives = ale.lives()
        for _ in range(steps):
            _, _, terminated, _, _ = env.step(NOOP)
            if terminated:
                break
        return lives - ale.lives()

    def episodic_life():
        return EpisodicLife(gym.wrappers.MaxAndSkipObservation(gym.make(BREAKOUT), skip=4))

    with_fire = FireReset(episodic_life())
    with_fire.reset(seed=1)
    assert with_fire.unwrapped.ale.getEpisodeFrameNumber() == 8  # FIRE, then action 2
    assert lives_lost_doing_nothing(with_fire) == 1
    with_fire.reset()  # after the lost life, FIRE again
    assert lives_lost_doing_nothing(with_fire) == 1

    without = episodic_life()
    without.reset(seed=1)
    assert lives_lost_doing_nothing(without) == 0  # the ball waits for FIRE


def test_rewards_are_clipped_to_their_sign_and_statistics_keep_the_raw_score():
    envs = make_env(SPACE_INVADERS, 1, seed=1)
    env = envs.unwrapped.envs[0]
    stats = find_wrapper(env, "RecordEpisodeStatistics")
    env.reset()
    rng = np.random.default_rng(1)
    clipped, raw = [], []
    while len(clipped) < 3:
        score = stats.episode_returns
        _, reward, terminated, truncated, _ = env.step(int(rng.integers(env.action_space.n)))
        if reward != 0:
            clipped.append(reward)
            raw.append(stats.episode_returns - score)
        if terminated:  # a lost life: the reset goes on with the game and keeps its score
            score = stats.episode_returns
            env.reset()
            assert stats.episode_returns >= score
        assert not truncated
    assert clipped == [1.0, 1.0, 1.0]
    assert all(r >= 5 and r % 5 == 0 for r in raw), raw  # invaders are worth 5 to 30 points
    envs.close()


def test_observation_is_max_of_last_two_frames_resized_to_84x84_gray_in_a_stack_of_4():
    envs = make_env(BREAKOUT, 1, seed=1)
    env = envs.unwrapped.envs[0]
    ale = env.unwrapped.ale
    obs, _ = env.reset()
    assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
    assert all(np.array_equal(frame, obs[0]) for frame in obs)  # a new stack after a reset
    for action in (LEFT, LEFT, FIRE, NOOP, LEFT):
        state = ale.cloneState()
        new_obs, *_ = env.step(action)
        np.testing.assert_array_equal(new_obs[:3], obs[1:])  # the stack shifts by one
        ale.restoreState(state)  # replay the same 4 frames on the emulator itself
        screens = []
        for _ in range(4):
            ale.act(env.unwrapped._action_set[action])
            screens.append(ale.getScreenRGB())
        small = cv2.resize(
            np.maximum(screens[2], screens[3]), (84, 84), interpolation=cv2.INTER_AREA
        )
        gray = cv2.cvtColor(small, cv2.COLOR_RGB2GRAY)  # the published runs' conversion
        np.testing.assert_array_equal(new_obs[3], gray)
        obs = new_obs
    envs.close()


def test_grayscale_is_the_published_runs_opencv_conversion():
    """gymnasium 0.29 (the published runs) converted with OpenCV; gymnasium 1.x weighs the colours
    differently. The expected gray levels here are OpenCV's fixed-point formula, computed alone."""
    env = gym.wrappers.ResizeObservation(gym.make(BREAKOUT), (84, 84))
    env.reset(seed=3)
    for _ in range(40):
        rgb, *_ = env.step(FIRE)
    r, g, b = (rgb[..., i].astype(np.int64) for i in range(3))
    expected = ((r * 4899 + g * 9617 + b * 1868 + (1 << 13)) >> 14).astype(np.uint8)
    gray = GrayscaleOpenCV(env).observation(rgb)
    assert gray.shape == (84, 84) and gray.dtype == np.uint8
    np.testing.assert_array_equal(gray, expected)
    gymnasiums = gym.wrappers.GrayscaleObservation(env).observation(rgb)
    assert (gymnasiums != gray).mean() > 0.05  # the conversion the published runs did not use


def test_the_first_reset_is_the_one_seeded_reset():
    """`make_env` seeds the games at the caller's first reset: one reset, as published (before,
    the games were reset twice and the first game started 12 frames later)."""
    envs = make_env(BREAKOUT, 2, seed=5)
    first, _ = envs.reset()
    frames = [env.unwrapped.ale.getEpisodeFrameNumber() for env in envs.unwrapped.envs]
    envs.close()
    raw = make_env(BREAKOUT, 2, seed=5).unwrapped  # the vector env itself, reset once by hand
    seeded, _ = raw.reset(seed=5)
    assert frames == [env.unwrapped.ale.getEpisodeFrameNumber() for env in raw.envs]
    np.testing.assert_array_equal(first, seeded)
    again, _ = raw.reset()  # a second reset starts other games
    assert not np.array_equal(again, seeded)
    raw.close()
