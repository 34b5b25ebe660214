"""The two JAX scripts, `cleanrl/ppo_atari_envpool_xla_jax.py` (jitted steps driven by Python
loops) and `cleanrl/ppo_atari_envpool_xla_jax_scan.py` (everything in `jax.lax.scan`): the same
algorithm as `cleanrl/ppo_atari_envpool.py`, checked against it and against each other.

In-process tests: GAE (scan == loop == NumPy reference == the torch script), the loss (invalid
transitions are ignored; equal to the torch loss on the same weights), the update (scan == loop,
with and without a KL early stop), and the rollout on real EnvPool steps through the XLA
interface (what it records, validity, episode statistics, scan == loop).

End-to-end tests run the real scripts in subprocesses at the small settings of the user-known
command lines (the first JIT compile dominates their time). They are started together, once
per module, and shared by the tests that read them.
"""

from __future__ import annotations

import json
import math
import os
import re
import runpy
import sys
import types
from functools import cache, partial
from pathlib import Path

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import torch
from flax.training.train_state import TrainState
from gae_testing import hand_made_batch, reference_advantages
from logs_testing import LOGGED_EVERY_ITERATION
from loss_testing import as_minibatch
from scripts_testing import (
    REPO_ROOT,
    ScriptProcess,
    assert_usage_error,
    describe,
    module_runs,
    run_script,
)

from cleanrl import ppo_atari_envpool as torch_script
from cleanrl import ppo_atari_envpool_xla_jax as loop_script
from cleanrl import ppo_atari_envpool_xla_jax_scan as scan_script
from cleanrl_utils.console.errors import RunError
from cleanrl_utils.envs.protocols import MACHADO

# the scripts and evaluators started here fork from a process that runs JAX's threads; they
# exec at once (subprocess's C fork-exec), so Python's generic deadlock warning does not apply
pytestmark = [
    pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning"),
    pytest.mark.xdist_group(__name__),
]

XLA_JAX = REPO_ROOT / "cleanrl" / "ppo_atari_envpool_xla_jax.py"
XLA_JAX_SCAN = REPO_ROOT / "cleanrl" / "ppo_atari_envpool_xla_jax_scan.py"
SCRIPTS = {"xla_jax": loop_script, "xla_jax_scan": scan_script}
OBS_SHAPE = (4, 84, 84)
NUM_ACTIONS = 4


def to_np(x):
    return np.asarray(x, dtype=np.float64)


# ---------------------------------------------------------------------------------------------
# GAE
# ---------------------------------------------------------------------------------------------


def gae_rollout(script, rewards, values, terminations, truncations):
    """The script's own Rollout (a pytree: the scan GAE is jitted) holding what GAE reads."""
    return script.Rollout(
        obs=None,
        actions=None,
        logprobs=None,
        rewards=rewards,
        terminations=terminations,
        truncations=truncations,
        values=values,
        valids=None,
    )


def jax_advantages(script, rewards, values, next_value, terminations, truncations, gamma, lam):
    rollout = gae_rollout(script, rewards, values, terminations, truncations)
    return script.compute_advantages(rollout, next_value, gamma, lam)


def all_advantages(rewards, values, next_value, terminations, truncations, gamma, lam):
    """Advantages from the loop GAE, the scan GAE, the torch script and the NumPy reference."""
    batch = [np.asarray(x, np.float32) for x in (rewards, values, next_value)]
    flags = [np.asarray(x, bool) for x in (terminations, truncations)]
    out = {
        name: to_np(jax_advantages(script, *batch, *flags, gamma, lam)[0])
        for name, script in SCRIPTS.items()
    }
    as_tensor = lambda x: torch.as_tensor(np.asarray(x, np.float32))  # noqa: E731
    rewards_t, values_t, next_value_t, terminations_t, truncations_t = map(
        as_tensor, (*batch, *flags)
    )
    rollout = types.SimpleNamespace(
        rewards=rewards_t, values=values_t, terminations=terminations_t, truncations=truncations_t
    )
    torch_adv, _ = torch_script.compute_advantages(rollout, next_value_t, gamma, lam)
    out["torch"] = to_np(torch_adv)
    out["reference"] = reference_advantages(*batch, *flags, gamma, lam)
    return out


def test_gae_scan_equals_loop_equals_reference_and_torch_on_hand_made_trajectories():
    batch = hand_made_batch()  # terminations and truncations mid-rollout, at its ends, in a row
    out = all_advantages(*batch, 0.9, 0.8)
    for name in ("xla_jax", "xla_jax_scan", "torch"):
        np.testing.assert_allclose(out[name], out["reference"], rtol=0, atol=1e-5, err_msg=name)
    np.testing.assert_allclose(out["xla_jax_scan"], out["xla_jax"], rtol=0, atol=1e-6)
    for script in SCRIPTS.values():  # returns = advantages + values
        advantages, returns = jax_advantages(script, *batch, 0.9, 0.8)
        np.testing.assert_allclose(to_np(returns), to_np(advantages) + batch[1], atol=1e-6)


@pytest.mark.parametrize(("gamma", "lam"), [(0.99, 0.95), (0.7, 1.0), (0.8, 0.0)])
def test_gae_scan_equals_loop_equals_reference_and_torch_on_random_trajectories(gamma, lam):
    rng = np.random.default_rng(0)
    num_steps, num_envs = 16, 6
    rewards, values = rng.normal(size=(2, num_steps, num_envs))
    next_value = rng.normal(size=num_envs)
    boundary = rng.random((num_steps, num_envs)) < 0.25
    is_term = rng.random((num_steps, num_envs)) < 0.5
    out = all_advantages(
        rewards, values, next_value, boundary & is_term, boundary & ~is_term, gamma, lam
    )
    for name in ("xla_jax", "xla_jax_scan", "torch"):
        np.testing.assert_allclose(out[name], out["reference"], rtol=0, atol=1e-5, err_msg=name)


def test_gae_truncation_bootstraps_and_termination_does_not():
    # one env, truncated at step 1 (values[2] is the last real observation of the cut episode),
    # terminated at step 3 (next_value must be ignored)
    rewards = [[0.5], [2.0], [0.0], [1.0]]
    values = [[1.0], [3.0], [7.0], [2.0]]
    terminations = [[0], [0], [0], [1]]
    truncations = [[0], [1], [0], [0]]
    out = all_advantages(rewards, values, [1000.0], terminations, truncations, 0.9, 0.8)
    for name in SCRIPTS:
        assert out[name][1, 0] == pytest.approx(2.0 + 0.9 * 7.0 - 3.0, abs=1e-5)
        assert out[name][3, 0] == pytest.approx(1.0 - 2.0, abs=1e-6)
        assert out[name][2, 0] == pytest.approx(0.0 + 0.9 * 2.0 - 7.0 + 0.9 * 0.8 * -1.0, abs=1e-5)


# ---------------------------------------------------------------------------------------------
# loss and update
# ---------------------------------------------------------------------------------------------

BATCH = 16
STAT_NAMES = ("value_loss", "policy_loss", "entropy", "old_approx_kl", "approx_kl", "clipfrac")


def loss_args(**overrides):
    args = dict(clip_coef=0.1, norm_adv=True, clip_vloss=True, ent_coef=0.01, vf_coef=0.5)
    return types.SimpleNamespace(**{**args, **overrides})


@pytest.fixture(scope="module")
def agent_and_params():
    agent = loop_script.Agent(NUM_ACTIONS)
    obs = np.zeros((1, *OBS_SHAPE), np.uint8)
    return agent, jax.jit(agent.init)(jax.random.PRNGKey(0), obs)  # jitted: compiles faster


def make_batch(agent, params, seed=1, batch=BATCH, num_invalid=6):
    """A minibatch whose old policy and old values differ from the agent's, so that ratios and
    value predictions get clipped; the first `num_invalid` entries are invalid."""
    rng = np.random.default_rng(seed)
    obs = rng.integers(0, 256, (batch, *OBS_SHAPE), dtype=np.uint8)
    actions = rng.integers(0, NUM_ACTIONS, batch).astype(np.int32)
    logprobs, _, values = jitted(agent.get_logprob_entropy_value)(params, obs, actions)
    logprobs = np.asarray(logprobs) + 0.2 * rng.normal(size=batch).astype(np.float32)
    values = np.asarray(values) + 0.3 * rng.normal(size=batch).astype(np.float32)
    advantages = (1.5 * rng.normal(size=batch) + 0.5).astype(np.float32)
    valids = np.arange(batch) >= num_invalid
    return dict(
        obs=obs,
        actions=actions,
        logprobs=logprobs,
        advantages=advantages,
        returns=values + advantages,
        values=values,
        valids=valids,
    )


def perturb(batch, entries, seed=2):
    """A copy of `batch` with everything but the validity of `entries` replaced by other random
    (large but finite) data."""
    rng = np.random.default_rng(seed)
    out = {k: np.array(v, copy=True) for k, v in batch.items()}
    n = len(entries)
    out["obs"][entries] = rng.integers(0, 256, (n, *OBS_SHAPE), dtype=np.uint8)
    out["actions"][entries] = (out["actions"][entries] + 1) % NUM_ACTIONS
    out["logprobs"][entries] += 3.0 * rng.normal(size=n)
    for name in ("advantages", "returns", "values"):
        out[name][entries] = 100.0 * rng.normal(size=n)
    return out


@cache
def jitted(fn):
    return jax.jit(fn)


@cache
def jitted_loss_and_grad(script, agent, norm_adv, clip_vloss):
    loss_fn = partial(script.ppo_loss, agent, loss_args(norm_adv=norm_adv, clip_vloss=clip_vloss))
    return jax.jit(jax.value_and_grad(loss_fn, has_aux=True))


def loss_stats_grads(script, agent, params, args, batch):
    loss_and_grad = jitted_loss_and_grad(script, agent, args.norm_adv, args.clip_vloss)
    (loss, stats), grads = loss_and_grad(params, as_minibatch(batch, script.Rollout))
    return float(loss), {k: float(v) for k, v in stats.items()}, grads


@pytest.mark.parametrize(("norm_adv", "clip_vloss"), [(True, True), (False, False)])
def test_masked_loss_ignores_invalid_transitions(agent_and_params, norm_adv, clip_vloss):
    # (the scan script's loss is the same code: test_scan_update_equals_loop_update runs it)
    agent, params = agent_and_params
    script, args = loop_script, loss_args(norm_adv=norm_adv, clip_vloss=clip_vloss)
    batch = make_batch(agent, params)
    invalid = np.flatnonzero(~batch["valids"])
    loss, stats, grads = loss_stats_grads(script, agent, params, args, batch)
    assert 0 < stats["clipfrac"] < 1  # the batch exercises both sides of the clip

    loss_p, stats_p, grads_p = loss_stats_grads(
        script, agent, params, args, perturb(batch, invalid)
    )
    assert loss_p == pytest.approx(loss, rel=1e-6, abs=1e-7)
    for stat in STAT_NAMES:
        assert stats_p[stat] == pytest.approx(stats[stat], rel=1e-6, abs=1e-7), stat
    for g, g_p in zip(jax.tree_util.tree_leaves(grads), jax.tree_util.tree_leaves(grads_p)):
        np.testing.assert_allclose(g_p, g, rtol=1e-5, atol=1e-7)

    # control: the same perturbation of one valid entry changes the loss and the gradients
    valid = np.flatnonzero(batch["valids"])[:1]
    loss_p, _, grads_p = loss_stats_grads(script, agent, params, args, perturb(batch, valid))
    assert abs(loss_p - loss) > 1e-3
    critic_bias_grad = [g.critic["params"]["Dense_0"]["bias"] for g in (grads, grads_p)]
    assert np.abs(critic_bias_grad[1] - critic_bias_grad[0]).max() > 1e-4


def torch_agent_from(params):
    """The torch script's Agent with the weights of a JAX AgentParams (NHWC -> NCHW)."""
    envs = types.SimpleNamespace(single_action_space=gymnasium.spaces.Discrete(NUM_ACTIONS))
    agent = torch_script.Agent(envs)
    net = params.network["params"]
    state = {}
    for i, torch_index in enumerate((0, 2, 4)):
        conv = net[f"Conv_{i}"]
        state[f"network.{torch_index}.weight"] = np.transpose(conv["kernel"], (3, 2, 0, 1))
        state[f"network.{torch_index}.bias"] = conv["bias"]
    # flax flattens (h, w, c), torch flattens (c, h, w)
    kernel = np.asarray(net["Dense_0"]["kernel"]).reshape(7, 7, 64, 512)
    state["network.7.weight"] = np.transpose(kernel, (2, 0, 1, 3)).reshape(3136, 512).T
    state["network.7.bias"] = net["Dense_0"]["bias"]
    for head, p in (("actor", params.actor), ("critic", params.critic)):
        state[f"{head}.weight"] = np.asarray(p["params"]["Dense_0"]["kernel"]).T
        state[f"{head}.bias"] = p["params"]["Dense_0"]["bias"]
    agent.load_state_dict({k: torch.as_tensor(np.array(v)) for k, v in state.items()})
    return agent


@pytest.mark.parametrize(("norm_adv", "clip_vloss"), [(True, True), (False, False)])
def test_loss_equals_torch_script_loss_on_same_weights(agent_and_params, norm_adv, clip_vloss):
    agent, params = agent_and_params
    args = loss_args(norm_adv=norm_adv, clip_vloss=clip_vloss)
    batch = make_batch(agent, params)
    loss, stats, grads = loss_stats_grads(loop_script, agent, params, args, batch)

    torch_agent = torch_agent_from(params)
    torch_batch = {k: torch.as_tensor(np.asarray(v)) for k, v in batch.items()}
    torch_batch["actions"] = torch_batch["actions"].long()
    torch_batch["valids"] = torch_batch["valids"].float()
    torch_loss, torch_stats = torch_script.ppo_loss(
        torch_agent, args, as_minibatch(torch_batch, torch_script.Rollout)
    )
    torch_loss.backward()

    assert loss == pytest.approx(torch_loss.item(), rel=1e-4, abs=1e-6)
    for stat in STAT_NAMES:
        assert stats[stat] == pytest.approx(torch_stats[stat].item(), rel=1e-4, abs=1e-6), stat
    np.testing.assert_allclose(
        grads.critic["params"]["Dense_0"]["bias"],
        torch_agent.critic.bias.grad,
        rtol=1e-3,
        atol=1e-6,
    )
    np.testing.assert_allclose(
        grads.actor["params"]["Dense_0"]["kernel"].T,
        torch_agent.actor.weight.grad,
        rtol=1e-3,
        atol=1e-6,
    )


@pytest.mark.parametrize("name", SCRIPTS)
def test_the_value_loss_is_not_clipped_by_default_as_in_the_published_jax_scripts(name):
    """The published JAX scripts never clipped the value loss and the defaults follow them (the
    300k-step A/B behind this is on the script's docs page); `--clip-vloss` clips it, as the
    torch scripts do by default, as theirs did."""
    assert SCRIPTS[name].Args().clip_vloss is False
    assert torch_script.Args().clip_vloss is True


def update_args(update_epochs, num_minibatches, target_kl):
    args = loss_args(
        num_envs=4,
        num_steps=8,
        update_epochs=update_epochs,
        num_minibatches=num_minibatches,
        max_grad_norm=0.5,
        target_kl=target_kl,
    )
    args.batch_size = args.num_envs * args.num_steps
    args.minibatch_size = args.batch_size // args.num_minibatches
    return args


@pytest.mark.parametrize(
    ("unroll", "update_epochs", "num_minibatches", "target_kl"),
    [(1, 1, 2, None), (0, 2, 1, 0.0)],  # rolled scans run slowly on the CPU: keep them short
    ids=["rolled-as-on-gpu", "unrolled-as-on-cpu-with-kl-stop"],
)
def test_scan_update_equals_loop_update(
    monkeypatch, agent_and_params, unroll, update_epochs, num_minibatches, target_kl
):
    """All epochs and minibatches inside lax.scan (shuffle included) do what the Python loops
    over the jitted minibatch step do, with the scans rolled (as on a GPU; slow to run on the CPU
    but quick to compile at this size) or unrolled (as on the CPU); with a target KL of 0 both
    stop after one epoch."""
    monkeypatch.setattr(scan_script, "scan_unroll", lambda: unroll)
    agent, params = agent_and_params
    args = update_args(update_epochs, num_minibatches, target_kl)
    data = make_batch(agent, params, seed=3, batch=args.batch_size, num_invalid=5)
    shape = (args.num_steps, args.num_envs)
    rollout = loop_script.Rollout(
        obs=data["obs"].reshape(shape + OBS_SHAPE),
        actions=data["actions"].reshape(shape),
        logprobs=data["logprobs"].reshape(shape),
        rewards=np.zeros(shape, np.float32),
        terminations=np.zeros(shape, bool),
        truncations=np.zeros(shape, bool),
        values=data["values"].reshape(shape),
        valids=data["valids"].reshape(shape),
    )
    advantages, returns = data["advantages"].reshape(shape), data["returns"].reshape(shape)
    tx = optax.chain(
        optax.clip_by_global_norm(args.max_grad_norm),
        optax.inject_hyperparams(optax.adam)(learning_rate=1e-3, eps=1e-5),
    )
    state = TrainState.create(apply_fn=None, params=params, tx=tx)
    key = jax.random.PRNGKey(5)

    minibatch_step = jax.jit(partial(loop_script.update_minibatch, agent, args))
    loop_state, loop_stats, loop_key = loop_script.update(
        minibatch_step, args, state, rollout, advantages, returns, key
    )
    scan_update = jax.jit(partial(scan_script.update, agent, args))
    scan_state, scan_stats, scan_key = scan_update(state, rollout, advantages, returns, key)

    expected_steps = args.num_minibatches * (1 if target_kl == 0.0 else args.update_epochs)
    assert int(loop_state.step) == int(scan_state.step) == expected_steps
    for a, b in zip(jax.tree_util.tree_leaves(loop_state), jax.tree_util.tree_leaves(scan_state)):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-4, atol=1e-6)
    assert sorted(loop_stats) == sorted(scan_stats) == sorted((*STAT_NAMES, "loss"))
    for name in loop_stats:
        assert float(scan_stats[name]) == pytest.approx(float(loop_stats[name]), rel=1e-4, abs=1e-6)
    if target_kl is None:
        np.testing.assert_array_equal(np.asarray(scan_key), np.asarray(loop_key))
    # the parameters did move
    moved = jax.tree_util.tree_map(
        lambda a, b: np.abs(np.asarray(a) - b).max(), loop_state.params, params
    )
    assert max(jax.tree_util.tree_leaves(moved)) > 1e-4


# ---------------------------------------------------------------------------------------------
# rollout on real EnvPool steps through the XLA interface
# ---------------------------------------------------------------------------------------------

ENV_ID = "Breakout-v5"
NUM_ENVS = 4
NUM_STEPS = 49  # with this seed and key a life is lost on the last step of the first rollout
NUM_ROLLOUTS = 3
MAX_EPISODE_STEPS = 130  # a random agent's game lasts ~120 steps: both kinds of game end
SEED = 0
GAMMA, LAMBDA = 0.99, 0.95


def xla_env(script):
    envs = script.make_env(ENV_ID, NUM_ENVS, SEED, max_episode_steps=MAX_EPISODE_STEPS)
    obs, _ = envs.reset()
    handle, _, _, step_env = envs.xla()
    env_state = script.EnvState(
        handle,
        jnp.asarray(obs),
        jnp.ones(NUM_ENVS, bool),
        script.EpisodeStatistics.zeros(NUM_ENVS),
        jax.random.PRNGKey(1),
    )
    return envs, env_state, step_env


def play(collect, env_state, params):
    rollouts, games, env_states = [], [], []
    for _ in range(NUM_ROLLOUTS):
        env_state, rollout, game = collect(params, env_state)
        rollouts.append(jax.device_get(rollout))
        games.append(jax.device_get(game))
        env_states.append(jax.device_get(env_state))
    return types.SimpleNamespace(rollouts=rollouts, games=games, env_states=env_states)


@pytest.fixture(scope="module")
def played(agent_and_params):
    agent, params = agent_and_params
    envs, env_state, step_env = xla_env(loop_script)
    step = jax.jit(partial(loop_script.rollout_step, agent, step_env))
    loop = play(partial(loop_script.collect_rollout, step, num_steps=NUM_STEPS), env_state, params)
    envs.close()

    envs, env_state, step_env = xla_env(scan_script)
    collect = jax.jit(
        partial(
            scan_script.collect_rollout,
            partial(scan_script.rollout_step, agent, step_env),
            num_steps=NUM_STEPS,
        )
    )
    scan = play(collect, env_state, params)
    envs.close()

    # replay the loop rollout's actions through EnvPool's ordinary API, recording everything
    envs = torch_script.make_env(ENV_ID, NUM_ENVS, SEED, max_episode_steps=MAX_EPISODE_STEPS)
    envs.reset()
    raw = {k: [] for k in ("obs", "reward", "terminated", "truncated", "info_reward")}
    raw.update(info_terminated=[], info_elapsed_step=[])
    for action in np.concatenate([r.actions for r in loop.rollouts]):
        obs, reward, terminated, truncated, info = envs.step(np.asarray(action))
        for k, v in zip(
            ("obs", "reward", "terminated", "truncated"), (obs, reward, terminated, truncated)
        ):
            raw[k].append(v)
        for k in ("reward", "terminated", "elapsed_step"):
            raw[f"info_{k}"].append(info[k].copy())
    envs.close()
    loop.raw = {k: np.stack(v) for k, v in raw.items()}
    loop.agent, loop.params = agent, params
    return types.SimpleNamespace(loop=loop, scan=scan)


def cat(played, field):
    return np.concatenate([np.asarray(getattr(r, field)) for r in played.rollouts])


def test_xla_rollout_records_what_envpool_returned(played):
    loop = played.loop
    assert cat(loop, "rewards").shape == (NUM_ROLLOUTS * NUM_STEPS, NUM_ENVS)
    np.testing.assert_array_equal(cat(loop, "rewards"), loop.raw["reward"])
    np.testing.assert_array_equal(cat(loop, "terminations"), loop.raw["terminated"])
    np.testing.assert_array_equal(cat(loop, "truncations"), loop.raw["truncated"])
    obs = cat(loop, "obs")  # obs[t + 1] is the observation EnvPool returned after step t
    np.testing.assert_array_equal(obs[1:], loop.raw["obs"][:-1])
    np.testing.assert_array_equal(loop.env_states[-1].obs, loop.raw["obs"][-1])


def test_xla_rollout_marks_step_after_done_invalid_across_rollouts(played):
    loop = played.loop
    valids = cat(loop, "valids")
    done = cat(loop, "terminations") | cat(loop, "truncations")
    assert valids[0].all()
    np.testing.assert_array_equal(~valids[1:], done[:-1])
    last_done = done[NUM_STEPS - 1]
    assert last_done.any(), "precondition: a done at the last step of a rollout"
    np.testing.assert_array_equal(loop.env_states[0].valid, ~last_done)
    np.testing.assert_array_equal(loop.rollouts[1].valids[0], ~last_done)
    # independent of the flags: EnvPool counts a step in elapsed_step iff it used the action
    elapsed = loop.raw["info_elapsed_step"]
    previous = np.concatenate([np.zeros((1, NUM_ENVS), elapsed.dtype), elapsed[:-1]])
    np.testing.assert_array_equal(valids, elapsed == previous + 1)
    assert (cat(loop, "rewards")[~valids] == 0).all() and (~valids).sum() >= 10


def test_jax_episode_statistics_match_torch_script_on_real_envpool_steps(played):
    """The pytree statistics updated inside the jitted env step report the same games as the
    torch script's NumPy EpisodeStatistics fed with EnvPool's raw results."""
    loop = played.loop
    valids, raw = cat(loop, "valids"), loop.raw
    reference = torch_script.EpisodeStatistics(NUM_ENVS)
    expected = []
    for i in range(len(valids)):
        info = {"reward": raw["info_reward"][i], "terminated": raw["info_terminated"][i]}
        for ret, length in reference.update(info, raw["truncated"][i], valids[i]):
            expected.append((i, ret, length))
    ended = [
        (i, env)
        for i in range(len(valids))
        for env in range(NUM_ENVS)
        if raw["info_terminated"][i, env] == 1 or raw["truncated"][i, env]
    ]
    kinds = {"truncation" if raw["truncated"][i, env] else "game over" for i, env in ended}
    assert kinds == {"truncation", "game over"}, "precondition: both kinds of game end"

    game_over = np.concatenate([g[0] for g in loop.games])
    returns = np.concatenate([g[1] for g in loop.games])
    lengths = np.concatenate([g[2] for g in loop.games])
    got = [
        (int(i), float(returns[i, env]), int(lengths[i, env]))
        for i, env in zip(*np.nonzero(game_over))
    ]
    assert got == expected
    for i, env in zip(*np.nonzero(game_over)):  # a game's length is EnvPool's elapsed_step
        assert lengths[i, env] == raw["info_elapsed_step"][i, env]
    # what the counters hold now is the unfinished game
    stats = loop.env_states[-1].episode_stats
    np.testing.assert_allclose(stats.returns, reference.returns)
    np.testing.assert_array_equal(stats.lengths, reference.lengths)


def test_truncated_transition_bootstraps_from_stored_last_observation(played):
    loop = played.loop
    get_value = jax.jit(loop.agent.get_value)
    checked = 0
    for k, rollout in enumerate(loop.rollouts):
        next_value = get_value(loop.params, loop.env_states[k].obs)
        advantages, _ = loop_script.compute_advantages(rollout, next_value, GAMMA, LAMBDA)
        for t, env in zip(*np.nonzero(rollout.truncations[:-2])):
            obs, last, fresh = rollout.obs[t, env], rollout.obs[t + 1, env], rollout.obs[t + 2, env]
            np.testing.assert_array_equal(last[:3], obs[1:])  # the cut episode's frame stack
            assert all(np.array_equal(frame, fresh[0]) for frame in fresh)  # a new game
            assert not rollout.valids[t + 1, env]
            value_last = float(get_value(loop.params, last[None])[0])
            assert rollout.values[t + 1, env] == pytest.approx(value_last, abs=1e-5)
            expected = (
                rollout.rewards[t, env]
                + GAMMA * rollout.values[t + 1, env]
                - rollout.values[t, env]
            )
            assert float(advantages[t, env]) == pytest.approx(expected, abs=1e-5)
            assert GAMMA * abs(rollout.values[t + 2, env] - rollout.values[t + 1, env]) > 1e-5
            checked += 1
    assert checked >= 1, "precondition: a truncation before a rollout's last steps"


def test_scan_rollout_equals_loop_rollout(played):
    loop, scan = played.loop, played.scan
    for field in ("obs", "actions", "rewards", "terminations", "truncations", "valids"):
        np.testing.assert_array_equal(cat(scan, field), cat(loop, field), err_msg=field)
    for field in ("logprobs", "values"):
        np.testing.assert_allclose(cat(scan, field), cat(loop, field), rtol=1e-5, atol=1e-6)
    for a, b in zip(loop.games, scan.games):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(y, x)


@pytest.mark.parametrize("name", SCRIPTS)
def test_configure_jax_sets_a_determinism_flag_that_xla_reads(monkeypatch, name):
    # (the smoke runs prove XLA knows the flag: XLA aborts on an unknown one)
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/x")
    monkeypatch.setenv("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.5")
    SCRIPTS[name].configure_jax(types.SimpleNamespace(torch_deterministic=True, cuda=True))
    assert os.environ["XLA_FLAGS"] == "--xla_dump_to=/tmp/x --xla_gpu_deterministic_ops=true"
    assert os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "0.5"  # the user's choice stays
    assert not [name for name in os.environ if " " in name]


# ---------------------------------------------------------------------------------------------
# end to end
# ---------------------------------------------------------------------------------------------

XLA_SMOKE = "--num-envs 8 --num-steps 6 --update-epochs 1 --num-minibatches 1 --total-timesteps 256"
SCAN_SMOKE = f"--save-model {XLA_SMOKE}"
# 256 steps per env, long enough for random Breakout games to end (after ~120-180 steps)
LONG = "--num-envs 4 --num-steps 64 --total-timesteps 1024 --update-epochs 1 --num-minibatches 1"
MODEL_FILE = "ppo_atari_envpool_xla_jax_scan.cleanrl_model"
LOGGED_EVERY_ITERATION = [*LOGGED_EVERY_ITERATION, "charts/SPS_update", "losses/loss"]
PER_GAME = [
    "charts/episodic_return",
    "charts/episodic_length",
    "charts/avg_episodic_return",
    "charts/avg_episodic_length",
]
TRAINING_RUNS = {
    "xla_smoke": (XLA_JAX, XLA_SMOKE.split()),
    # the long runs under Machado et al.'s protocol (sticky actions, 18 actions, no episodic
    # life, no no-ops), both alike: the two scripts play and train the same under it
    "xla_long": (XLA_JAX, f"{LONG} --checkpoint-every 2 --protocol machado".split()),
    "scan_smoke": (XLA_JAX_SCAN, SCAN_SMOKE.split()),
    "scan_long_video": (
        XLA_JAX_SCAN,
        f"{LONG} --capture-video --eval-episodes 2 --protocol machado".split(),
    ),
}


@pytest.fixture(scope="module", autouse=True)
def training_runs(request, tmp_path_factory):
    """Starts, all at once and before the first test of this module, the runs that its selected
    tests use, so that they overlap with each other and with the in-process tests."""
    yield from module_runs(request, tmp_path_factory, TRAINING_RUNS, check=True)


@pytest.fixture(scope="module")
def xla_smoke(training_runs) -> ScriptProcess:
    return training_runs["xla_smoke"]


@pytest.fixture(scope="module")
def xla_smoke_tracked(xla_smoke, tmp_path_factory):
    """`xla_smoke` again with `--track`, started once it has ended: its programs are all in the
    session's compilation cache by then (tests/conftest.py)."""
    xla_smoke.proc  # noqa: B018  (over)
    args = f"{XLA_SMOKE} --track".split()
    run = ScriptProcess(tmp_path_factory.mktemp("xla_smoke_tracked"), XLA_JAX, args, True)
    yield run
    run.stop()


@pytest.fixture(scope="module")
def xla_long(training_runs) -> ScriptProcess:
    return training_runs["xla_long"]


@pytest.fixture(scope="module")
def scan_smoke(training_runs) -> ScriptProcess:
    return training_runs["scan_smoke"]


@pytest.fixture(scope="module")
def scan_long_video(training_runs) -> ScriptProcess:
    return training_runs["scan_long_video"]


def leftover_temp_files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.name.startswith(".") or ".tmp" in p.name]


def assert_logged_every_iteration(scalars, steps):
    for tag in LOGGED_EVERY_ITERATION:
        assert [step for step, _ in scalars.get(tag, [])] == steps, (tag, sorted(scalars))
    for tag, points in scalars.items():
        if tag.startswith("losses/") and tag != "losses/explained_variance":
            assert all(math.isfinite(v) for _, v in points), (tag, points)


def assert_smoke_run(run: ScriptProcess, script: str):
    assert re.fullmatch(rf"Breakout-v5__{script}__1__\d+", run.run_dir.name)
    scalars = run.scalars
    assert_logged_every_iteration(scalars, [48, 96, 144, 192, 240])
    learning_rates = [value for _, value in scalars["charts/learning_rate"]]
    np.testing.assert_allclose(learning_rates, 2.5e-4 * (1 - np.arange(5) / 5), rtol=1e-5)
    assert re.search(r"^step 240/240 \(100\.0%\) SPS=\d+", run.proc.stderr, re.M)
    assert not leftover_temp_files(run.run_dir)
    assert not (run.cwd / "videos").exists()


@pytest.mark.slow
def test_user_known_smoke_command_runs_xla_jax(xla_smoke):
    assert_smoke_run(xla_smoke, "ppo_atari_envpool_xla_jax")
    assert not list(xla_smoke.run_dir.glob("*.cleanrl_model"))


@pytest.mark.slow
def test_user_known_smoke_command_runs_xla_jax_scan(scan_smoke):
    assert_smoke_run(scan_smoke, "ppo_atari_envpool_xla_jax_scan")


def assert_games_logged(run: ScriptProcess):
    scalars = run.scalars
    assert_logged_every_iteration(scalars, [256, 512, 768, 1024])
    for tag in PER_GAME:
        assert scalars.get(tag), f"no {tag} logged; tags: {sorted(scalars)}"
    returns = [value for _, value in scalars["charts/episodic_return"]]
    lengths = [value for _, value in scalars["charts/episodic_length"]]
    assert all(r >= 0 and float(r).is_integer() for r in returns), returns
    assert all(0 < n <= 1024 and float(n).is_integer() for n in lengths), lengths
    assert scalars["charts/avg_episodic_return"][-1][1] == pytest.approx(np.mean(returns[-20:]))
    assert scalars["charts/avg_episodic_length"][-1][1] == pytest.approx(np.mean(lengths[-20:]))


@pytest.mark.slow
def test_games_log_real_scores_and_lengths(xla_long, scan_long_video):
    assert_games_logged(xla_long)
    assert_games_logged(scan_long_video)


@pytest.mark.slow
def test_both_scripts_train_the_same_first_iteration(xla_long, scan_long_video):
    """Same seed and settings: the same rollout and update, up to float rounding."""
    a, b = xla_long.scalars, scan_long_video.scalars
    assert a["charts/episodic_return"][:3] == b["charts/episodic_return"][:3]
    for tag in LOGGED_EVERY_ITERATION:
        if tag.startswith("losses/"):
            assert b[tag][0][1] == pytest.approx(a[tag][0][1], rel=1e-3, abs=1e-6), tag


@pytest.mark.slow
def test_same_seed_gives_identical_losses(xla_smoke, xla_smoke_tracked):
    first, tracked = xla_smoke, xla_smoke_tracked
    a, b = first.scalars, tracked.scalars
    loss_tags = sorted(tag for tag in a if tag.startswith("losses/"))
    assert len(loss_tags) == 8
    for tag in loss_tags:
        assert a[tag] == b[tag] or all(
            x == y or (math.isnan(x) and math.isnan(y)) for (_, x), (_, y) in zip(a[tag], b[tag])
        ), (tag, a[tag], b[tag])
    offline_runs = list((tracked.cwd / "wandb").glob("offline-run-*"))
    assert len(offline_runs) == 1 and list(offline_runs[0].glob("*.wandb")), offline_runs


@pytest.mark.slow
def test_save_model_then_evaluate(scan_smoke):
    run = scan_smoke
    model = run.run_dir / MODEL_FILE
    assert model.is_file()
    assert f"model saved to runs/{run.run_dir.name}/{MODEL_FILE}" in run.proc.stdout
    evals = run.scalars.get("eval/episodic_return")
    # at the run's last step: 5 iterations of 8 x 6 steps
    assert evals is not None and [step for step, _ in evals] == [240] * 10, evals
    assert all(float(v).is_integer() and v >= 0 for _, v in evals)
    printed = re.findall(r"^eval_episode=(\d+), episodic_return=([\d.]+)", run.proc.stdout, re.M)
    assert [float(r) for _, r in printed] == [v for _, v in evals]

    # the evaluator alone, by default with the seed the training run evaluated with (seed + 1),
    # plays the same games: the saved parameters are the trained ones
    args = ["--model-path", model.relative_to(run.cwd), "--eval-episodes", "2"]
    proc = run_script(args, run.cwd, module="cleanrl_utils.evals.jax_eval", timeout=300)
    assert proc.returncode == 0, describe(proc)
    alone = re.findall(r"^eval_episode=(\d+), episodic_return=([\d.]+)", proc.stdout, re.M)
    assert alone == printed[:2], proc.stdout
    assert "games with seed 2 (the run's own evaluation's), under the published protocol" in (
        proc.stdout
    )
    assert re.search(r"mean episodic_return=[\d.]+ \+- [\d.]+ over 2 games", proc.stdout)


@pytest.mark.slow
def test_capture_video_writes_decodable_mp4(scan_long_video):
    import imageio

    run = scan_long_video
    video_dir = run.cwd / "videos" / run.run_dir.name
    assert sorted(p.name for p in video_dir.iterdir()) == [
        "eval-episode-0.mp4",
        "eval-episode-1.mp4",
    ]
    assert not leftover_temp_files(run.cwd / "videos")
    reader = imageio.get_reader(video_dir / "eval-episode-0.mp4", format="ffmpeg")
    try:
        shapes = [frame.shape for frame in reader]
    finally:
        reader.close()
    assert set(shapes) == {(210, 160, 3)} and len(shapes) > 10
    assert not (run.run_dir / MODEL_FILE).exists()  # videos without --save-model
    assert [step for step, _ in run.scalars["eval/episodic_return"]] == [1024, 1024]
    config = json.loads((run.run_dir / "config.json").read_text())
    assert config["protocol"] == {"name": "machado", **MACHADO}
    assert "os.fork()" not in run.proc.stderr  # ffmpeg starts without forking (test_video.py)


# one bad input per script, each script as a process: exit code 2 and one error line before any
# folder is made; the whole table of bad input (env ids, batch arithmetic) is in test_checks.py,
# in-process
BAD_TRAINING_ARGS = {
    "xla-minibatches": (
        XLA_JAX,
        [*XLA_SMOKE.split(), "--num-minibatches", "5"],
        ["--num-minibatches", "48"],
    ),
    "scan-below-one-batch": (
        XLA_JAX_SCAN,
        ["--total-timesteps", "100"],
        ["--total-timesteps", "100"],
    ),
}


@pytest.mark.parametrize(
    ("script", "args", "expected"), BAD_TRAINING_ARGS.values(), ids=list(BAD_TRAINING_ARGS)
)
def test_bad_training_input_fails_fast(tmp_path, script, args, expected):
    proc = run_script(args, tmp_path, script=script, timeout=120)
    assert_usage_error(proc, tmp_path, expected)


@pytest.mark.parametrize("problem", ["missing", "truncated"])
def test_evaluator_rejects_bad_model_file(tmp_path, problem):
    import flax.serialization

    model = tmp_path / f"{problem}.cleanrl_model"
    if problem == "truncated":
        data = flax.serialization.msgpack_serialize(
            {"script": "cleanrl.ppo_atari_envpool_xla_jax_scan", "params": np.zeros(4096)}
        )
        model.write_bytes(data[: len(data) // 2])
    args = ["--model-path", model.name, "--eval-episodes", "2"]
    proc = run_script(args, tmp_path, module="cleanrl_utils.evals.jax_eval", timeout=120)
    assert_usage_error(proc, tmp_path, [model.name])
    assert "episodic_return" not in proc.stdout


def test_help_shows_arg_docstrings(tmp_path, monkeypatch, capsys):
    """The script's `__main__` in this process, which has imported what it imports already: a
    process of its own would spend seconds importing them again for the help alone."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setattr("sys.argv", [str(XLA_JAX_SCAN), "--help"])
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_path(str(XLA_JAX_SCAN), run_name="__main__")
    assert exit_info.value.code in (0, None)
    text = " ".join(capsys.readouterr().out.split())
    assert "the surrogate clipping coefficient" in text
    assert "--xla_gpu_deterministic_ops=true" in text
    assert not list(tmp_path.iterdir())  # no runs/, videos/, wandb/


def load_lockstep():
    """benchmark/jax_lockstep.py as a module."""
    import importlib.util

    path = REPO_ROOT / "benchmark" / "jax_lockstep.py"
    spec = importlib.util.spec_from_file_location("jax_lockstep", path)
    lockstep = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = lockstep  # (its dataclass resolves its annotations through it)
    spec.loader.exec_module(lockstep)
    return lockstep


@pytest.mark.slow
def test_the_two_scripts_compute_the_same_at_every_iteration_of_a_whole_schedule():
    """benchmark/jax_lockstep.py at a tiny size: a whole run of 2 iterations (the learning rate
    falls from 2.5e-4 to 1.25e-4), each iteration's rollout, GAE and update of both scripts from
    equal state, with 2 epochs of 2 minibatches (the key is split once an epoch). The games stay
    the same (every action equal), the keys and learning rates equal, and the computations differ
    by float rounding only. A difference in the schedule, the keys or the state a script carries
    from one iteration to the next would show at the second iteration, whose rollout starts from
    the first's env state and has lost lives in it (terminations mid-rollout: this seed's games);
    further iterations would add no case and cost seconds each."""
    lockstep = load_lockstep()
    args = lockstep.Options(
        iterations=2,
        total_timesteps=2 * 64,
        num_envs=4,
        num_steps=16,
        num_minibatches=2,
        update_epochs=2,
    )
    records = lockstep.lockstep(args, report=lambda line: None)
    assert len(records) == 2
    assert [r["learning_rates"][0] for r in records] == pytest.approx([2.5e-4, 1.25e-4])
    for r in records:
        assert r["same_actions"] and r["same_keys"], r
        assert r["learning_rates"][0] == r["learning_rates"][1]
        assert r["rollout"] == r["gae"] == 0.0, r  # the same XLA program for the env and GAE
        assert r["update"] < 1e-4 and r["stats"] < 1e-2, r


def test_lockstep_reads_the_protocol_as_a_run_does():
    """`--protocol machado` gives the lockstep's envs its five settings (it once played the
    published ones without a word); a setting given against it is one error line."""
    lockstep = load_lockstep()
    args = lockstep.options(["--protocol", "machado", "--iterations", "1"])
    assert {name: getattr(args, name) for name in MACHADO} == MACHADO
    with pytest.raises(RunError, match="--noop-max 0, and this command also gives --noop-max 5"):
        lockstep.options(["--protocol", "machado", "--noop-max", "5"])


@pytest.mark.slow
def test_lockstep_from_a_checkpoint_carries_on_where_the_run_was(xla_long):
    """`--from-checkpoint`: the comparison starts where a run's checkpoint left off (iteration 3
    of 4, the run's own sizes, its learning rate schedule), not at the start of a run."""
    lockstep = load_lockstep()
    checkpoint = xla_long.ok().run_dir / "checkpoint_0000002.ckpt"
    args = lockstep.Options(iterations=5, from_checkpoint=str(checkpoint))
    records = lockstep.lockstep(args, report=lambda line: None)
    assert [r["learning_rates"][0] for r in records] == pytest.approx([1.25e-4, 6.25e-5])
    for r in records:
        assert r["same_actions"] and r["same_keys"], r
        assert r["rollout"] == r["gae"] == 0.0, r
        assert r["update"] < 1e-4 and r["stats"] < 1e-2, r
