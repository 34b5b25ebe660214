"""What EnvPool 1.2 returns around Atari episode boundaries (real emulator, no mocks).

Every fact below is asserted by a test in this file, for

    envpool.make("Breakout-v5", env_type="gym", num_envs=1, episodic_life=True,
                 reward_clip=True, seed=S, max_episode_steps=M)

and the training script relies on them:

- API: ``reset()`` -> ``(obs, info)``; obs is uint8 ``(num_envs, 4, 84, 84)``; info holds (at
  least) ``lives``, ``reward``, ``terminated``, ``elapsed_step``, ``env_id``.
  ``step(a)`` -> ``(obs, reward, terminated, truncated, info)``.
- Life loss (lives left > 0):
  terminated=True | truncated=False | info["terminated"]=0 | lives -= 1.
- Step after a life loss ("reset step"): the action is IGNORED | reward 0 | no flags |
  elapsed_step NOT advanced | lives unchanged | frame stack continues
  (``obs[:3] == previous obs[1:]``).
- Game over (last life lost):
  terminated=True | truncated=False | info["terminated"]=1 | lives=0.
- Step after a game over: action IGNORED | reward 0 | no flags | elapsed_step=0 | lives=5 |
  fresh frame stack (all 4 frames equal, not a shift of the previous obs).
- Time limit: truncated=True | terminated=False | info["terminated"]=0 when
  elapsed_step == max_episode_steps; elapsed_step counts only steps whose action reached the
  game, so the reset steps after life losses do not count.
- Step after a truncation: action IGNORED | reward 0 | no flags | elapsed_step=0 | lives=5 |
  fresh frame stack.
- Rewards: info["reward"] is the raw game score; the returned reward is ``sign(info["reward"])``
  (checked on SpaceInvaders-v5, where an invader is worth 5..30 points).
- num_envs=8, sync mode (batch_size == num_envs): info["env_id"] is always ``arange(8)``.

Consequence for the training loop: the step following any ``terminated or truncated`` is a
"reset step": its action has no effect and its reward is 0, so it is not a real transition.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise

import envpool
import numpy as np

TASK = "Breakout-v5"
NOOP, FIRE, RIGHT, LEFT = 0, 1, 2, 3  # Breakout's minimal action set
N_ACTIONS = 4
FULL_LIVES = 5
NO_TIME_LIMIT = 27_000
INFO_KEYS = {"lives", "reward", "terminated", "elapsed_step", "env_id"}


def make_env(
    seed: int,
    max_episode_steps: int = NO_TIME_LIMIT,
    task: str = TASK,
    num_envs: int = 1,
):
    return envpool.make(
        task,
        env_type="gym",
        num_envs=num_envs,
        episodic_life=True,
        reward_clip=True,
        seed=seed,
        max_episode_steps=max_episode_steps,
    )


@dataclass(frozen=True)
class Step:
    """One result of ``reset()`` or ``step()`` for env 0, as plain Python values."""

    obs: np.ndarray  # (4, 84, 84) uint8
    reward: float
    terminated: bool
    truncated: bool
    info_terminated: int
    lives: int
    elapsed_step: int
    raw_reward: float


def _to_step(obs, reward, terminated, truncated, info) -> Step:
    return Step(
        obs=obs[0].copy(),
        reward=float(reward),
        terminated=bool(terminated),
        truncated=bool(truncated),
        info_terminated=int(info["terminated"][0]),
        lives=int(info["lives"][0]),
        elapsed_step=int(info["elapsed_step"][0]),
        raw_reward=float(info["reward"][0]),
    )


def reset(env) -> Step:
    obs, info = env.reset()
    return _to_step(obs, 0.0, False, False, info)


def step(env, action: int) -> Step:
    obs, reward, terminated, truncated, info = env.step(np.array([action]))
    return _to_step(obs, reward[0], terminated[0], truncated[0], info)


def is_life_loss(s: Step) -> bool:
    return s.terminated and s.info_terminated == 0


def is_game_over(s: Step) -> bool:
    return s.terminated and s.info_terminated == 1


def is_truncation(s: Step) -> bool:
    return s.truncated


def is_reset_step(prev: Step) -> bool:
    """The step following ``prev`` is a reset step."""
    return prev.terminated or prev.truncated


def assert_same_step(a: Step, b: Step) -> None:
    np.testing.assert_array_equal(a.obs, b.obs)
    assert (a.reward, a.terminated, a.truncated, a.info_terminated) == (
        b.reward,
        b.terminated,
        b.truncated,
        b.info_terminated,
    )
    assert (a.lives, a.elapsed_step, a.raw_reward) == (b.lives, b.elapsed_step, b.raw_reward)


def drive_until(
    envs: list,
    rng: np.random.Generator,
    stop: Callable[[Step], bool],
    max_steps: int = 2_000,
) -> list[list[Step]]:
    """Reset ``envs`` and step them all with the same random actions until ``stop`` holds for
    ``envs[0]``. Returns one history per env: ``[reset result, step 1, ..., stopping step]``."""
    histories = [[reset(env)] for env in envs]
    for _ in range(max_steps):
        action = int(rng.integers(N_ACTIONS))
        for env, history in zip(envs, histories, strict=True):
            history.append(step(env, action))
        if stop(histories[0][-1]):
            return histories
    raise AssertionError(f"boundary not reached within {max_steps} steps")


def step_after_boundary_with_two_actions(
    seed: int, stop: Callable[[Step], bool], max_episode_steps: int = NO_TIME_LIMIT
) -> tuple[list[Step], Step]:
    """Drive two identically seeded envs with identical actions up to a boundary, then send LEFT
    to one and RIGHT to the other. Asserts that both envs still agree (the action was ignored),
    that they keep agreeing under identical actions, and — as a control — that LEFT vs RIGHT do
    make them diverge on an ordinary step. Returns env A's history and its post-boundary step."""
    env_a = make_env(seed, max_episode_steps)
    env_b = make_env(seed, max_episode_steps)
    rng = np.random.default_rng(seed)
    hist_a, hist_b = drive_until([env_a, env_b], rng, stop)
    for a, b in zip(hist_a, hist_b, strict=True):  # precondition: the emulator is deterministic
        assert_same_step(a, b)

    after_a, after_b = step(env_a, LEFT), step(env_b, RIGHT)
    assert_same_step(after_a, after_b)

    prev = after_a
    for _ in range(40):
        action = int(rng.integers(N_ACTIONS))
        sa, sb = step(env_a, action), step(env_b, action)
        assert_same_step(sa, sb)
        prev = sa

    assert not is_reset_step(prev)  # control step below is an ordinary step
    control_a, control_b = step(env_a, LEFT), step(env_b, RIGHT)
    assert not np.array_equal(control_a.obs, control_b.obs)
    return hist_a, after_a


def test_reset_returns_obs_and_info_and_step_returns_five_tuple():
    env = make_env(seed=0)
    result = env.reset()
    assert isinstance(result, tuple) and len(result) == 2
    obs, info = result
    assert obs.dtype == np.uint8 and obs.shape == (1, 4, 84, 84)
    assert INFO_KEYS <= set(info)
    assert info["lives"].tolist() == [FULL_LIVES]
    assert info["elapsed_step"].tolist() == [0]
    assert info["terminated"].tolist() == [0]
    assert info["reward"].tolist() == [0.0]
    assert info["env_id"].tolist() == [0]

    result = env.step(np.array([FIRE]))
    assert isinstance(result, tuple) and len(result) == 5
    obs, reward, terminated, truncated, info = result
    assert obs.dtype == np.uint8 and obs.shape == (1, 4, 84, 84)
    assert reward.shape == terminated.shape == truncated.shape == (1,)
    assert terminated.dtype == np.bool_ and truncated.dtype == np.bool_
    assert INFO_KEYS <= set(info)
    assert info["elapsed_step"].tolist() == [1]


def test_life_loss_is_terminated_without_game_over_flag():
    (history,) = drive_until([make_env(seed=1)], np.random.default_rng(1), is_life_loss)
    before, loss = history[-2], history[-1]
    assert loss.terminated and not loss.truncated
    assert loss.info_terminated == 0
    assert before.lives == FULL_LIVES and loss.lives == FULL_LIVES - 1
    assert loss.elapsed_step == len(history) - 1  # no earlier boundary: every step counted


def test_step_after_life_loss_ignores_action_and_keeps_frame_stack():
    history, after = step_after_boundary_with_two_actions(seed=1, stop=is_life_loss)
    loss = history[-1]
    assert after.reward == 0.0 and after.raw_reward == 0.0
    assert not after.terminated and not after.truncated and after.info_terminated == 0
    assert after.elapsed_step == loss.elapsed_step  # the reset step is not counted
    assert after.lives == loss.lives == FULL_LIVES - 1
    np.testing.assert_array_equal(after.obs[:3], loss.obs[1:])  # frame stack continues


def test_game_over_is_terminated_with_game_over_flag_and_zero_lives():
    (history,) = drive_until([make_env(seed=2)], np.random.default_rng(2), is_game_over)
    over = history[-1]
    assert over.terminated and not over.truncated
    assert over.info_terminated == 1 and over.lives == 0
    life_losses = [s for s in history if is_life_loss(s)]
    assert [s.lives for s in life_losses] == [4, 3, 2, 1]
    # no flag on any other step; only life-loss steps and the game-over step end an episode
    assert sum(s.terminated or s.truncated for s in history) == len(life_losses) + 1


def test_step_after_game_over_ignores_action_restores_lives_and_restarts_frame_stack():
    history, after = step_after_boundary_with_two_actions(seed=2, stop=is_game_over)
    over = history[-1]
    assert after.reward == 0.0 and after.raw_reward == 0.0
    assert not after.terminated and not after.truncated and after.info_terminated == 0
    assert after.elapsed_step == 0 and after.lives == FULL_LIVES
    assert all(np.array_equal(frame, after.obs[0]) for frame in after.obs)  # fresh stack
    assert not np.array_equal(after.obs[:3], over.obs[1:])


def test_time_limit_truncates_at_elapsed_step_counting_only_game_steps():
    max_steps = 100
    (history,) = drive_until(
        [make_env(seed=1, max_episode_steps=max_steps)], np.random.default_rng(1), is_truncation
    )
    trunc = history[-1]
    assert trunc.truncated and not trunc.terminated and trunc.info_terminated == 0
    assert trunc.elapsed_step == max_steps
    assert 0 < trunc.lives < FULL_LIVES  # episode was cut short, with life losses before it
    life_losses = sum(is_life_loss(s) for s in history)
    assert life_losses == FULL_LIVES - trunc.lives
    # step() calls made = counted game steps + one uncounted reset step per life loss
    assert len(history) - 1 == max_steps + life_losses
    counted = [s.elapsed_step for prev, s in pairwise(history) if not is_reset_step(prev)]
    assert counted == list(range(1, max_steps + 1))


def test_step_after_truncation_ignores_action_and_restarts_episode():
    history, after = step_after_boundary_with_two_actions(
        seed=1, stop=is_truncation, max_episode_steps=100
    )
    trunc = history[-1]
    assert trunc.lives < FULL_LIVES
    assert after.reward == 0.0 and after.raw_reward == 0.0
    assert not after.terminated and not after.truncated and after.info_terminated == 0
    assert after.elapsed_step == 0 and after.lives == FULL_LIVES
    assert all(np.array_equal(frame, after.obs[0]) for frame in after.obs)  # fresh stack


def test_reward_is_sign_of_raw_info_reward():
    env = make_env(seed=0, task="SpaceInvaders-v5")
    rng = np.random.default_rng(0)
    env.reset()
    rewards, raw_rewards = [], []
    while not any(r > 1 for r in raw_rewards):
        assert len(rewards) < 1_000, "no raw reward > 1 seen"
        _, reward, _, _, info = env.step(rng.integers(env.action_space.n, size=1))
        rewards.append(float(reward[0]))
        raw_rewards.append(float(info["reward"][0]))
    assert raw_rewards[-1] > 1 and rewards[-1] == 1.0
    np.testing.assert_array_equal(rewards, np.sign(raw_rewards))


def test_sync_pool_returns_results_in_env_id_order():
    num_envs = 8
    env = make_env(seed=0, max_episode_steps=100, num_envs=num_envs)
    assert env.config["batch_size"] == num_envs  # sync mode
    rng = np.random.default_rng(0)
    _, info = env.reset()
    assert info["env_id"].tolist() == list(range(num_envs))
    boundaries = 0
    for _ in range(250):
        _, _, terminated, truncated, info = env.step(rng.integers(N_ACTIONS, size=num_envs))
        assert info["env_id"].tolist() == list(range(num_envs))
        boundaries += int(np.sum(terminated | truncated))
    assert boundaries > num_envs  # the order holds across episode boundaries too


def test_the_scripts_cut_games_at_108000_steps_as_the_published_runs():
    """EnvPool 1.2's own Atari default is 27,000 agent steps; the published runs used EnvPool 0.6,
    whose default was 108,000. The three EnvPool scripts pass `--max-episode-steps` (108,000 by
    default) to the env, in training and in their evaluation."""
    import cleanrl.ppo_atari_envpool as torch_script
    import cleanrl.ppo_atari_envpool_xla_jax as jax_script
    import cleanrl.ppo_atari_envpool_xla_jax_scan as scan_script

    assert envpool.make_gym("Breakout-v5", num_envs=1).spec.config.max_episode_steps == 27_000
    for script in (torch_script, jax_script, scan_script):
        assert script.Args().max_episode_steps == 108_000
        default = script.make_env("Breakout-v5", 1, seed=1)  # as the evaluation builds it
        assert default.spec.config.max_episode_steps == 108_000
        machado = script.make_env("Breakout-v5", 2, 1, max_episode_steps=27_000)
        assert machado.spec.config.max_episode_steps == 27_000
        default.close(), machado.close()


def test_the_evaluation_plays_with_the_training_runs_time_limit():
    import cleanrl.ppo_atari_envpool as torch_script
    from cleanrl_utils.evals.common import with_training_env

    for args in ({"max_episode_steps": 27_000}, torch_script.Args(max_episode_steps=27_000)):
        envs = with_training_env(torch_script.make_env, args)("Breakout-v5", 1, 1)
        assert envs.spec.config.max_episode_steps == 27_000
        envs.close()
    # arguments with none of the protocol's settings: the make_env is used as it is
    assert with_training_env(torch_script.make_env, {"seed": 1}) is torch_script.make_env
