"""`compute_advantages` against an independent NumPy reference, on hand-made trajectories.

Convention (see `compute_advantages` and `collect_rollout`): step t's transition is
(obs[t], actions[t]) -> (rewards[t], terminations[t], truncations[t], next obs). The observation
the env returned after step t is obs[t + 1] (or the rollout's `next_obs` after the last step), so
its value is values[t + 1] (or `next_value`). A termination has no future; a truncation
bootstraps from that value (the last real observation of the cut episode). Neither chains into
the next episode.

The reference computes each advantage as a lambda-return minus the value, from explicit n-step
returns that stop at the end of the episode containing t: a different formula from the script's
backward TD(lambda) recursion, so a shared mistake is unlikely.
"""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch
from gae_testing import hand_made_batch, reference_advantages

from cleanrl.ppo_atari_envpool import compute_advantages

GAMMA = 0.9
LAMBDA = 0.8


def run_script(rewards, values, next_value, terminations, truncations, gamma=GAMMA, lam=LAMBDA):
    as_tensor = lambda x: torch.as_tensor(np.asarray(x, np.float32))  # noqa: E731
    rollout = types.SimpleNamespace(
        rewards=as_tensor(rewards),
        values=as_tensor(values),
        terminations=as_tensor(terminations),
        truncations=as_tensor(truncations),
    )
    advantages, returns = compute_advantages(rollout, as_tensor(next_value), gamma, lam)
    return advantages.numpy().astype(np.float64), returns.numpy().astype(np.float64)


def test_matches_reference_on_hand_made_trajectories():
    batch = hand_made_batch()
    expected = reference_advantages(*batch, GAMMA, LAMBDA)
    advantages, _ = run_script(*batch)
    np.testing.assert_allclose(advantages, expected, rtol=0, atol=1e-5)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize(("gamma", "lam"), [(0.99, 0.95), (0.9, 0.5), (0.7, 1.0), (0.8, 0.0)])
def test_matches_reference_on_random_trajectories(seed, gamma, lam):
    rng = np.random.default_rng(seed)
    num_steps, num_envs = 16, 6
    rewards = rng.normal(size=(num_steps, num_envs)).astype(np.float32)
    values = rng.normal(size=(num_steps, num_envs)).astype(np.float32)
    next_value = rng.normal(size=num_envs).astype(np.float32)
    boundary = rng.random((num_steps, num_envs)) < 0.25
    is_term = rng.random((num_steps, num_envs)) < 0.5
    terminations = (boundary & is_term).astype(np.float32)
    truncations = (boundary & ~is_term).astype(np.float32)
    batch = rewards, values, next_value, terminations, truncations
    expected = reference_advantages(*batch, gamma, lam)
    advantages, _ = run_script(*batch, gamma=gamma, lam=lam)
    np.testing.assert_allclose(advantages, expected, rtol=0, atol=1e-5)


def test_termination_does_not_bootstrap():
    # one env, 3 steps, the episode terminates at step 1; step 2 starts a new episode
    rewards = [[0.5], [2.0], [-1.0]]
    values = [[1.0], [3.0], [7.0]]
    next_value = [11.0]
    terminations = [[0.0], [1.0], [0.0]]
    truncations = [[0.0], [0.0], [0.0]]
    advantages, _ = run_script(rewards, values, next_value, terminations, truncations)

    assert advantages[1, 0] == pytest.approx(2.0 - 3.0, abs=1e-6)  # r - V(s), no gamma * V(next)
    delta_0 = 0.5 + GAMMA * 3.0 - 1.0
    assert advantages[0, 0] == pytest.approx(delta_0 + GAMMA * LAMBDA * (2.0 - 3.0), abs=1e-5)
    assert advantages[2, 0] == pytest.approx(-1.0 + GAMMA * 11.0 - 7.0, abs=1e-5)

    # a termination at the last step of the rollout ignores next_value too
    advantages, _ = run_script([[2.0]], [[3.0]], [1000.0], [[1.0]], [[0.0]])
    assert advantages[0, 0] == pytest.approx(2.0 - 3.0, abs=1e-6)


def test_truncation_bootstraps_from_final_value():
    # one env, 3 steps, truncated at step 1: obs[2] is the last real observation of the cut
    # episode (step 2 is EnvPool's reset step), so V(last real obs) = values[2]
    rewards = [[0.5], [2.0], [0.0]]
    values = [[1.0], [3.0], [7.0]]
    next_value = [11.0]
    terminations = [[0.0], [0.0], [0.0]]
    truncations = [[0.0], [1.0], [0.0]]
    advantages, _ = run_script(rewards, values, next_value, terminations, truncations)

    truncated_advantage = 2.0 + GAMMA * 7.0 - 3.0  # r + gamma * V(last real obs) - V(s)
    assert advantages[1, 0] == pytest.approx(truncated_advantage, abs=1e-5)
    delta_0 = 0.5 + GAMMA * 3.0 - 1.0
    assert advantages[0, 0] == pytest.approx(
        delta_0 + GAMMA * LAMBDA * truncated_advantage, abs=1e-5
    )

    # a truncation at the last step of the rollout bootstraps from next_value
    advantages, _ = run_script([[2.0]], [[3.0]], [11.0], [[0.0]], [[1.0]])
    assert advantages[0, 0] == pytest.approx(2.0 + GAMMA * 11.0 - 3.0, abs=1e-5)


@pytest.mark.parametrize("kind", ["termination", "truncation"])
@pytest.mark.parametrize("boundary", [0, 2, 4])
def test_advantage_does_not_leak_across_episode_boundary(kind, boundary):
    num_steps, num_envs = 6, 3
    rng = np.random.default_rng(boundary)
    rewards = rng.normal(size=(num_steps, num_envs)).astype(np.float32)
    values = rng.normal(size=(num_steps, num_envs)).astype(np.float32)
    next_value = rng.normal(size=num_envs).astype(np.float32)
    terminations = np.zeros((num_steps, num_envs), np.float32)
    truncations = np.zeros((num_steps, num_envs), np.float32)
    (terminations if kind == "termination" else truncations)[boundary] = 1.0
    before, _ = run_script(rewards, values, next_value, terminations, truncations)

    # everything that belongs to the next episode: its rewards and flags, and its values; after a
    # truncation values[boundary + 1] is the old episode's last real observation, so it stays
    first_new_value = boundary + 1 if kind == "termination" else boundary + 2
    rewards[boundary + 1 :] = rng.normal(size=rewards[boundary + 1 :].shape) * 10
    values[first_new_value:] = rng.normal(size=values[first_new_value:].shape) * 10
    next_value = rng.normal(size=num_envs).astype(np.float32) * 10
    terminations[boundary + 2 :: 2] = 1.0
    truncations[boundary + 3 :: 2] = 1.0
    after, _ = run_script(rewards, values, next_value, terminations, truncations)

    np.testing.assert_allclose(after[: boundary + 1], before[: boundary + 1], rtol=0, atol=1e-6)
    assert np.abs(after[boundary + 1 :] - before[boundary + 1 :]).max() > 1e-2  # control


def test_returns_equal_advantages_plus_values():
    batch = hand_made_batch()
    advantages, returns = run_script(*batch)
    np.testing.assert_allclose(returns, advantages + batch[1], rtol=0, atol=1e-5)
    expected = reference_advantages(*batch, GAMMA, LAMBDA) + batch[1]
    np.testing.assert_allclose(returns, expected, rtol=0, atol=1e-5)


def test_lambda_one_is_discounted_return_and_lambda_zero_is_td_error():
    rewards = np.array([[1.0], [0.0], [2.0], [-1.0]], np.float32)
    values = np.array([[0.3], [0.1], [-0.4], [0.9]], np.float32)
    next_value = np.array([5.0], np.float32)
    no_flags = np.zeros_like(rewards)

    advantages, _ = run_script(rewards, values, next_value, no_flags, no_flags, lam=1.0)
    monte_carlo = sum(GAMMA**i * rewards[i, 0] for i in range(4)) + GAMMA**4 * 5.0
    assert advantages[0, 0] == pytest.approx(monte_carlo - 0.3, abs=1e-5)

    advantages, _ = run_script(rewards, values, next_value, no_flags, no_flags, lam=0.0)
    next_values = np.array([0.1, -0.4, 0.9, 5.0])
    td_errors = rewards[:, 0] + GAMMA * next_values - values[:, 0]
    np.testing.assert_allclose(advantages[:, 0], td_errors, rtol=0, atol=1e-5)
