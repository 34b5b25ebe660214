"""Helpers for the tests of `ppo_loss` and `update` (tests/test_ppo_loss.py, tests/test_compile.py,
tests/test_ppo_atari_envpool_xla_jax.py): a small agent of `cleanrl/ppo_atari_envpool.py`, a
minibatch whose ratios and values get clipped, and a batch as any script's `Rollout`."""

from __future__ import annotations

import types
from dataclasses import fields

import gymnasium
import torch

from cleanrl.ppo_atari_envpool import Agent

NUM_ACTIONS = 4
BATCH = 16


def make_args(**overrides):
    args = dict(clip_coef=0.1, norm_adv=True, clip_vloss=True, ent_coef=0.01, vf_coef=0.5)
    args.update(overrides)
    return types.SimpleNamespace(**args)


def make_agent(seed=0):
    torch.manual_seed(seed)
    envs = types.SimpleNamespace(single_action_space=gymnasium.spaces.Discrete(NUM_ACTIONS))
    return Agent(envs)


def make_batch(agent, seed=1, batch=BATCH, num_invalid=6):
    """A minibatch in which the old policy and old values differ from the agent's, so ratios
    and value predictions get clipped; the first `num_invalid` entries are invalid."""
    gen = torch.Generator().manual_seed(seed)
    obs = torch.randint(0, 256, (batch, 4, 84, 84), dtype=torch.uint8, generator=gen)
    actions = torch.randint(0, NUM_ACTIONS, (batch,), generator=gen)
    with torch.no_grad():
        _, logprobs, _, values = agent.get_action_and_value(obs, actions)
    logprobs = logprobs + 0.2 * torch.randn(batch, generator=gen)
    values = values.flatten() + 0.3 * torch.randn(batch, generator=gen)
    advantages = 1.5 * torch.randn(batch, generator=gen) + 0.5
    returns = values + advantages
    valids = torch.ones(batch)
    valids[:num_invalid] = 0.0
    return dict(
        obs=obs,
        actions=actions,
        logprobs=logprobs,
        advantages=advantages,
        returns=returns,
        values=values,
        valids=valids,
    )


def as_minibatch(batch: dict, rollout_class):
    """The arrays of `batch` as the minibatch a script's `ppo_loss` takes: a `rollout_class` (the
    script's Rollout), the fields the loss does not read None."""
    return rollout_class(**{f.name: batch.get(f.name) for f in fields(rollout_class)})
