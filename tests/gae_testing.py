"""Helpers for the tests of GAE (tests/test_gae.py, the JAX scripts' tests): an independent NumPy
reference, and hand-made trajectories with episode boundaries at the interesting places.

The reference computes each advantage as a lambda-return minus the value, from explicit n-step
returns that stop at the end of the episode containing t: a different formula from the scripts'
backward TD(lambda) recursion, so a shared mistake is unlikely.
"""

from __future__ import annotations

import numpy as np


def reference_advantages(rewards, values, next_value, terminations, truncations, gamma, lam):
    """Plain-Python GAE: advantage = lambda-return - V, per env and per episode."""
    rewards, values = np.asarray(rewards, np.float64), np.asarray(values, np.float64)
    next_value = np.asarray(next_value, np.float64)
    terminations = np.asarray(terminations, bool)
    truncations = np.asarray(truncations, bool)
    num_steps, num_envs = rewards.shape
    advantages = np.zeros((num_steps, num_envs))
    for env in range(num_envs):
        for t in range(num_steps):
            # the last step of the episode that step t belongs to (or of the rollout)
            end = t
            while end < num_steps - 1 and not (terminations[end, env] or truncations[end, env]):
                end += 1
            if terminations[end, env]:
                final_value = 0.0  # nothing follows a termination
            elif end + 1 < num_steps:
                final_value = values[end + 1, env]  # truncation: the stored last real obs
            else:
                final_value = next_value[env]  # truncation or plain end of the rollout

            def n_step_return(n, t=t, end=end, final_value=final_value, env=env):
                discounted = sum(gamma**i * rewards[t + i, env] for i in range(n))
                boot = final_value if t + n - 1 == end else values[t + n, env]
                return discounted + gamma**n * boot

            horizon = end - t + 1
            lam_return = (1 - lam) * sum(
                lam ** (n - 1) * n_step_return(n) for n in range(1, horizon)
            ) + lam ** (horizon - 1) * n_step_return(horizon)
            advantages[t, env] = lam_return - values[t, env]
    return advantages


def flags(num_steps, num_envs, where):
    out = np.zeros((num_steps, num_envs), np.float32)
    for t, env in where:
        out[t, env] = 1.0
    return out


def hand_made_batch():
    """7 steps x 5 envs, with boundaries at the interesting places."""
    num_steps, num_envs = 7, 5
    rng = np.random.default_rng(0)
    rewards = rng.choice([-1.0, 0.0, 0.0, 1.0], size=(num_steps, num_envs)).astype(np.float32)
    values = rng.normal(size=(num_steps, num_envs)).astype(np.float32)
    next_value = rng.normal(size=num_envs).astype(np.float32)
    terminations = flags(
        num_steps,
        num_envs,
        [
            (2, 1),  # env 1: termination mid-rollout ...
            (3, 2),  # env 2: consecutive boundaries: termination, termination, ...
            (4, 2),
            (1, 3),  # env 3: truncation then termination right after it
            (6, 3),  # ... and a termination at the last step
        ],
    )
    truncations = flags(
        num_steps,
        num_envs,
        [
            (5, 1),  # env 1: ... then a truncation mid-rollout
            (5, 2),  # env 2: ... then truncation, truncation (the last step)
            (6, 2),
            (0, 3),  # env 3: truncation at the first step
            (6, 4),  # env 4: one truncation at the last step
        ],
    )
    # env 0 has no boundary at all
    return rewards, values, next_value, terminations, truncations
