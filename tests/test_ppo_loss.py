"""`ppo_loss`, `update` and `explained_variance`: transitions whose action EnvPool ignored
(`valids == 0`) must not influence anything, and with every transition valid the loss must be
CleanRL's usual clipped PPO loss."""

from __future__ import annotations

import copy
import importlib
import types

import numpy as np
import pytest
import torch
from loss_testing import BATCH, NUM_ACTIONS, as_minibatch, make_agent, make_args, make_batch

from cleanrl.ppo_atari_envpool import Rollout, ppo_loss, update
from cleanrl_utils.ppo.metrics import explained_variance

STAT_NAMES = ("value_loss", "policy_loss", "entropy", "old_approx_kl", "approx_kl", "clipfrac")


@pytest.fixture(autouse=True)
def one_torch_thread():
    # the machine is small and shared: one thread is faster and keeps results reproducible
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def perturb(batch, entries, seed=2):
    """A copy of `batch` with obs, action, old logprob, advantage, return and old value of
    `entries` replaced by other random (large but finite) data."""
    gen = torch.Generator().manual_seed(seed)
    out = {k: v.clone() for k, v in batch.items()}
    n = len(entries)
    out["obs"][entries] = torch.randint(0, 256, (n, 4, 84, 84), dtype=torch.uint8, generator=gen)
    out["actions"][entries] = (out["actions"][entries] + 1) % NUM_ACTIONS
    out["logprobs"][entries] += 3.0 * torch.randn(n, generator=gen)
    out["advantages"][entries] = 100.0 * torch.randn(n, generator=gen)
    out["returns"][entries] = 100.0 * torch.randn(n, generator=gen)
    out["values"][entries] = 100.0 * torch.randn(n, generator=gen)
    return out


def loss_stats_grads(agent, args, batch):
    agent.zero_grad()
    loss, stats = ppo_loss(agent, args, as_minibatch(batch, Rollout))
    loss.backward()
    grads = {name: p.grad.detach().clone() for name, p in agent.named_parameters()}
    return loss.detach(), {k: v.detach() for k, v in stats.items()}, grads


def assert_same(a, b, atol=1e-6):
    torch.testing.assert_close(a, b, rtol=1e-6, atol=atol)


def reference_loss(agent, args, obs, actions, logprobs, advantages, returns, values):
    """CleanRL's ppo_atari_envpool.py minibatch loss, without any mask."""
    _, newlogprob, entropy, newvalue = agent.get_action_and_value(obs, actions)
    logratio = newlogprob - logprobs
    ratio = logratio.exp()
    with torch.no_grad():
        old_approx_kl = (-logratio).mean()
        approx_kl = ((ratio - 1) - logratio).mean()
        clipfrac = ((ratio - 1.0).abs() > args.clip_coef).float().mean()
    mb_advantages = advantages
    if args.norm_adv:
        mb_advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    pg_loss1 = -mb_advantages * ratio
    pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
    pg_loss = torch.max(pg_loss1, pg_loss2).mean()
    newvalue = newvalue.view(-1)
    if args.clip_vloss:
        v_loss_unclipped = (newvalue - returns) ** 2
        v_clipped = values + torch.clamp(newvalue - values, -args.clip_coef, args.clip_coef)
        v_loss_clipped = (v_clipped - returns) ** 2
        v_loss = 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()
    else:
        v_loss = 0.5 * ((newvalue - returns) ** 2).mean()
    entropy_loss = entropy.mean()
    loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef
    stats = dict(
        value_loss=v_loss,
        policy_loss=pg_loss,
        entropy=entropy_loss,
        old_approx_kl=old_approx_kl,
        approx_kl=approx_kl,
        clipfrac=clipfrac,
    )
    return loss, stats


@pytest.mark.parametrize(("norm_adv", "clip_vloss"), [(True, True), (False, False)])
def test_ignored_action_transitions_do_not_change_loss_or_gradients(norm_adv, clip_vloss):
    agent = make_agent()
    args = make_args(norm_adv=norm_adv, clip_vloss=clip_vloss)
    batch = make_batch(agent)
    invalid = torch.nonzero(batch["valids"] == 0).flatten()
    assert 0 < len(invalid) < BATCH

    loss, stats, grads = loss_stats_grads(agent, args, batch)
    assert 0 < stats["clipfrac"] < 1  # the batch exercises both sides of the clip

    for seed in range(3):
        loss_p, stats_p, grads_p = loss_stats_grads(agent, args, perturb(batch, invalid, seed))
        assert_same(loss_p, loss)
        for name in STAT_NAMES:
            assert_same(stats_p[name], stats[name])
        for name, grad in grads.items():
            assert_same(grads_p[name], grad)

    # control: the same perturbation of one valid entry does change the loss and the gradients
    valid = torch.nonzero(batch["valids"] == 1).flatten()[:1]
    loss_p, _, grads_p = loss_stats_grads(agent, args, perturb(batch, valid))
    assert abs(loss_p - loss) > 1e-3
    assert not torch.allclose(grads_p["critic.bias"], grads["critic.bias"], rtol=0, atol=1e-4)


@pytest.mark.parametrize(("norm_adv", "clip_vloss"), [(True, True), (True, False), (False, True)])
def test_all_valid_matches_unmasked_reference(norm_adv, clip_vloss):
    agent = make_agent()
    args = make_args(norm_adv=norm_adv, clip_vloss=clip_vloss)
    batch = make_batch(agent, num_invalid=0)
    assert bool((batch["valids"] == 1).all())

    loss, stats, grads = loss_stats_grads(agent, args, batch)
    agent.zero_grad()
    ref_batch = {k: v for k, v in batch.items() if k != "valids"}
    ref_loss, ref_stats = reference_loss(agent, args, **ref_batch)
    ref_loss.backward()

    assert 0 < ref_stats["clipfrac"] < 1
    assert_same(loss, ref_loss.detach())
    for name in STAT_NAMES:
        assert_same(stats[name], ref_stats[name].detach())
    for name, p in agent.named_parameters():
        assert_same(grads[name], p.grad)


def test_masked_loss_equals_unmasked_reference_on_the_valid_entries():
    agent = make_agent()
    args = make_args()
    batch = make_batch(agent, num_invalid=5)
    keep = batch["valids"] == 1

    loss, stats, grads = loss_stats_grads(agent, args, batch)
    agent.zero_grad()
    ref_batch = {k: v[keep] for k, v in batch.items() if k != "valids"}
    ref_loss, ref_stats = reference_loss(agent, args, **ref_batch)
    ref_loss.backward()

    assert_same(loss, ref_loss.detach())
    for name in STAT_NAMES:
        assert_same(stats[name], ref_stats[name].detach())
    for name, p in agent.named_parameters():
        assert_same(grads[name], p.grad)


def test_ratio_is_one_before_first_gradient_step():
    agent = make_agent()
    batch = make_batch(agent, num_invalid=4)
    with torch.no_grad():
        _, logprobs, _, values = agent.get_action_and_value(batch["obs"], batch["actions"])
    batch["logprobs"] = logprobs
    batch["values"] = values.flatten()
    batch["logprobs"][:4] += 5.0  # garbage on the invalid entries must not show either
    _, stats = ppo_loss(agent, make_args(), as_minibatch(batch, Rollout))
    assert abs(stats["approx_kl"].item()) < 1e-6
    assert abs(stats["old_approx_kl"].item()) < 1e-6
    assert stats["clipfrac"].item() == 0.0


@pytest.mark.parametrize("num_valid", [0, 1])
def test_minibatch_with_at_most_one_valid_transition_stays_finite(num_valid):
    # a shuffled minibatch can hold (almost) only reset steps; that must not poison the update
    agent = make_agent()
    batch = make_batch(agent, batch=4, num_invalid=4 - num_valid)
    loss, stats, grads = loss_stats_grads(agent, make_args(), batch)
    assert torch.isfinite(loss)
    assert all(torch.isfinite(v) for v in stats.values())
    assert all(torch.isfinite(g).all() for g in grads.values())
    if num_valid == 0:
        assert loss.item() == 0.0
        assert all((g == 0).all() for g in grads.values())


def make_rollout(agent, num_steps=4, num_envs=2, seed=3):
    gen = torch.Generator().manual_seed(seed)
    sizes = types.SimpleNamespace(num_steps=num_steps, num_envs=num_envs)
    rollout = Rollout.zeros(sizes, (4, 84, 84), "cpu")
    rollout.obs[:] = torch.randint(0, 256, rollout.obs.shape, dtype=torch.uint8, generator=gen)
    rollout.actions[:] = torch.randint(0, NUM_ACTIONS, rollout.actions.shape, generator=gen)
    with torch.no_grad():
        _, logprobs, _, values = agent.get_action_and_value(
            rollout.obs.flatten(0, 1), rollout.actions.flatten()
        )
    rollout.logprobs[:] = logprobs.view(num_steps, num_envs)
    rollout.values[:] = values.view(num_steps, num_envs)
    rollout.valids[:] = 1.0
    rollout.valids[1, 0] = rollout.valids[3, 1] = 0.0
    advantages = torch.randn(num_steps, num_envs, generator=gen)
    return rollout, advantages, advantages + rollout.values


def run_update(agent, rollout, advantages, returns):
    agent = copy.deepcopy(agent)
    optimizer = torch.optim.Adam(agent.parameters(), lr=2.5e-4, eps=1e-5)
    args = make_args(
        batch_size=rollout.valids.numel(),
        minibatch_size=rollout.valids.numel() // 2,
        update_epochs=2,
        max_grad_norm=0.5,
        target_kl=None,
    )
    np.random.seed(0)  # the minibatch shuffle
    stats = update(ppo_loss, agent, optimizer, args, rollout, advantages, returns)
    return agent, stats


def test_update_ignores_invalid_transitions():
    agent = make_agent()
    rollout, advantages, returns = make_rollout(agent)
    trained, stats = run_update(agent, rollout, advantages, returns)

    gen = torch.Generator().manual_seed(4)
    other = copy.deepcopy(rollout)
    other_adv, other_ret = advantages.clone(), returns.clone()
    for t, env in [(1, 0), (3, 1)]:  # the invalid entries
        other.obs[t, env] = torch.randint(0, 256, (4, 84, 84), dtype=torch.uint8, generator=gen)
        other.actions[t, env] = (other.actions[t, env] + 1) % NUM_ACTIONS
        other.logprobs[t, env] -= 2.0
        other.values[t, env] += 50.0
        other_adv[t, env], other_ret[t, env] = 80.0, -60.0
    trained_other, stats_other = run_update(agent, other, other_adv, other_ret)

    for name in STAT_NAMES:
        assert_same(stats_other[name], stats[name])
    for p, p_other in zip(trained.parameters(), trained_other.parameters()):
        assert_same(p_other, p)

    # control: the same change to a valid entry changes the trained weights
    other_adv, other_ret = advantages.clone(), returns.clone()
    other_adv[0, 0], other_ret[0, 0] = 80.0, -60.0
    trained_other, _ = run_update(agent, rollout, other_adv, other_ret)
    diff = max(
        (p - q).abs().max().item() for p, q in zip(trained.parameters(), trained_other.parameters())
    )
    assert diff > 1e-5


def test_explained_variance_uses_only_valid_steps():
    values = torch.tensor([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]])
    returns = torch.tensor([[0.5, 1.0], [1.5, 4.0], [4.0, 6.0]])
    valids = torch.tensor([[1.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    keep = valids.bool()
    y_true, y_pred = returns[keep].numpy(), values[keep].numpy()
    expected = 1 - np.var(y_true - y_pred) / np.var(y_true)
    assert explained_variance(values, returns, valids) == pytest.approx(expected, abs=1e-6)

    garbage_values, garbage_returns = values.clone(), returns.clone()
    garbage_values[1, 1], garbage_returns[1, 1] = 1e3, -1e3
    result = explained_variance(garbage_values, garbage_returns, valids)
    assert result == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize(
    "script", ["ppo_atari_envpool", "ppo_atari", "ppo_atari_lstm", "ppo_atari_ale_vector"]
)
def test_frames_are_the_observations_over_255_in_channels_last_layout(script):
    frames = importlib.import_module(f"cleanrl.{script}").frames
    gen = torch.Generator().manual_seed(0)
    obs = torch.randint(0, 256, (3, 4, 84, 84), dtype=torch.uint8, generator=gen)
    original = obs.clone()
    x = frames(obs)
    assert x.dtype == torch.float32 and x.shape == obs.shape
    assert x.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(x, obs.float() / 255.0)
    assert torch.equal(obs, original)  # the in-place division works on a copy
