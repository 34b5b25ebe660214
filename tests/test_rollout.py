"""`collect_rollout` and `EpisodeStatistics` on real EnvPool Breakout (see
test_envpool_boundaries.py for what EnvPool returns around boundaries).

A small time limit forces truncations; an untrained agent plays at random and loses a life
every ~25 steps, so the rollouts also hold life losses and game overs. Every raw result of
`envs.step` is recorded by a thin pass-through wrapper, so the rollout can be checked against
what EnvPool really returned (`elapsed_step` tells which steps' actions reached the game).
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import types
from dataclasses import dataclass

import numpy as np
import pytest
import torch

from cleanrl.ppo_atari_envpool import (
    Agent,
    EpisodeStatistics,
    Rollout,
    collect_rollout,
    compute_advantages,
    make_env,
)

ENV_ID = "Breakout-v5"
NUM_ENVS = 4
NUM_STEPS = 48
NUM_ROLLOUTS = 3
MAX_EPISODE_STEPS = 130
SEED = 0  # with these settings: 2 game overs, then 2 truncations, a done at a rollout's end
GAMMA, LAMBDA = 0.99, 0.95


class RecordingEnvs:
    """Passes everything through to the EnvPool envs; keeps a copy of every step's result."""

    def __init__(self, envs):
        self.envs = envs
        self.steps = []

    def __getattr__(self, name):
        return getattr(self.envs, name)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.envs.step(action)
        self.steps.append(
            dict(
                action=np.array(action, copy=True),
                obs=obs.copy(),
                reward=reward.copy(),
                terminated=terminated.copy(),
                truncated=truncated.copy(),
                info={k: np.array(v, copy=True) for k, v in info.items()},
            )
        )
        return obs, reward, terminated, truncated, info


@dataclass
class Played:
    agent: Agent
    rollouts: list  # one Rollout snapshot per collect_rollout call
    next_obs: list  # what each call returned
    next_valids: list
    finished: list
    episode_stats: EpisodeStatistics  # as left after the last rollout
    raw: dict  # the recorded EnvPool results, stacked over all steps: (K * T, N, ...)

    def cat(self, field):
        return torch.cat([getattr(r, field) for r in self.rollouts]).numpy()


@pytest.fixture(scope="module")
def played():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the machine is small and shared; one thread is much faster
    try:
        torch.manual_seed(SEED)
        envs = RecordingEnvs(make_env(ENV_ID, NUM_ENVS, SEED, max_episode_steps=MAX_EPISODE_STEPS))
        agent = Agent(envs)
        obs_shape = envs.single_observation_space.shape
        sizes = types.SimpleNamespace(num_steps=NUM_STEPS, num_envs=NUM_ENVS)
        rollout = Rollout.zeros(sizes, obs_shape, "cpu")
        next_obs, _ = envs.reset()
        next_obs = torch.from_numpy(next_obs)
        next_valid = np.ones(NUM_ENVS, dtype=bool)
        stats = EpisodeStatistics(NUM_ENVS)
        result = Played(agent, [], [], [], [], stats, {})
        for _ in range(NUM_ROLLOUTS):
            next_obs, next_valid, finished = collect_rollout(
                agent.get_action_and_value, envs, rollout, next_obs, next_valid, stats
            )
            result.rollouts.append(copy.deepcopy(rollout))
            result.next_obs.append(next_obs.clone())
            result.next_valids.append(np.array(next_valid, copy=True))
            result.finished.append(list(finished))
        envs.close()
        steps = envs.steps
        for key in ("action", "obs", "reward", "terminated", "truncated"):
            result.raw[key] = np.stack([s[key] for s in steps])
        for key in ("reward", "terminated", "elapsed_step", "lives"):
            result.raw["info_" + key] = np.stack([s["info"][key] for s in steps])
        yield result
    finally:
        torch.set_num_threads(threads)


def test_rollout_records_what_envpool_returned(played):
    assert played.raw["reward"].shape == (NUM_ROLLOUTS * NUM_STEPS, NUM_ENVS)
    np.testing.assert_array_equal(played.cat("actions"), played.raw["action"])
    np.testing.assert_array_equal(played.cat("rewards"), played.raw["reward"])
    np.testing.assert_array_equal(played.cat("terminations"), played.raw["terminated"])
    np.testing.assert_array_equal(played.cat("truncations"), played.raw["truncated"])
    # obs[t + 1] is the observation EnvPool returned after step t
    obs = played.cat("obs")
    np.testing.assert_array_equal(obs[1:], played.raw["obs"][:-1])
    np.testing.assert_array_equal(played.next_obs[-1].numpy(), played.raw["obs"][-1])


def test_step_after_done_is_marked_invalid(played):
    valids = played.cat("valids")
    done = played.cat("terminations").astype(bool) | played.cat("truncations").astype(bool)
    assert set(np.unique(valids)) <= {0.0, 1.0}
    assert (valids[0] == 1).all()
    np.testing.assert_array_equal(valids[1:] == 0, done[:-1])
    for k in range(NUM_ROLLOUTS):  # the returned next_valid carries across rollouts
        last_done = done[(k + 1) * NUM_STEPS - 1]
        np.testing.assert_array_equal(played.next_valids[k], ~last_done)
        if k + 1 < NUM_ROLLOUTS:
            np.testing.assert_array_equal(played.rollouts[k + 1].valids[0].numpy() == 0, last_done)
    crossing = [done[(k + 1) * NUM_STEPS - 1].any() for k in range(NUM_ROLLOUTS - 1)]
    assert any(crossing), "precondition: a done at the last step of a rollout"

    # independent of the flags: EnvPool counts a step in elapsed_step iff it used the action
    elapsed = played.raw["info_elapsed_step"]
    previous = np.concatenate([np.zeros((1, NUM_ENVS), elapsed.dtype), elapsed[:-1]])
    np.testing.assert_array_equal(valids == 1, elapsed == previous + 1)


def test_invalid_steps_have_zero_reward(played):
    invalid = played.cat("valids") == 0
    assert invalid.sum() >= 10
    assert (played.cat("rewards")[invalid] == 0).all()
    assert (played.raw["info_reward"][invalid] == 0).all()
    assert (played.cat("rewards") != 0).any()  # control: there are rewards at all


def test_truncated_transition_bootstraps_from_stored_last_observation(played):
    checked = 0
    for k, rollout in enumerate(played.rollouts):
        with torch.no_grad():
            next_value = played.agent.get_value(played.next_obs[k]).reshape(-1)
            advantages, _ = compute_advantages(rollout, next_value, GAMMA, LAMBDA)
        for t, env in torch.nonzero(rollout.truncations[:-1]).tolist():
            obs, last, fresh = rollout.obs[t, env], rollout.obs[t + 1, env], rollout.obs[t + 2, env]
            # obs[t + 1] continues the truncated episode's frame stack ...
            assert torch.equal(last[:3], obs[1:])
            assert not all(torch.equal(frame, last[0]) for frame in last)
            # ... and the reset happens on step t + 1: obs[t + 2] is a fresh stack
            assert all(torch.equal(frame, fresh[0]) for frame in fresh)
            assert rollout.valids[t + 1, env] == 0

            with torch.no_grad():
                value_last = played.agent.get_value(last[None]).item()
            assert rollout.values[t + 1, env].item() == pytest.approx(value_last, abs=1e-5)
            expected = (
                rollout.rewards[t, env]
                + GAMMA * rollout.values[t + 1, env]
                - rollout.values[t, env]
            )
            assert advantages[t, env].item() == pytest.approx(expected.item(), abs=1e-5)
            # precondition for the check to mean something: bootstrapping from the reset obs's
            # value instead would give a visibly different advantage
            value_gap = GAMMA * abs(rollout.values[t + 2, env] - rollout.values[t + 1, env])
            assert value_gap > 1e-4
            checked += 1
    assert checked >= 1, "precondition: a truncation before a rollout's last step"


def expected_games(played):
    """(rollout, step, env, return, length, kind) of every game, from the raw EnvPool results:
    a game ends at a game over (info["terminated"] == 1) or a truncation; its length is the
    number of steps EnvPool counted (elapsed_step at its end)."""
    raw = played.raw
    games = []
    start = np.zeros(NUM_ENVS, dtype=int)
    for i in range(raw["reward"].shape[0]):
        for env in range(NUM_ENVS):
            game_over = raw["info_terminated"][i, env] == 1
            if not (game_over or raw["truncated"][i, env]):
                continue
            score = raw["info_reward"][start[env] : i + 1, env].sum()
            length = int(raw["info_elapsed_step"][i, env])
            kind = "game over" if game_over else "truncation"
            games.append((i // NUM_STEPS, i % NUM_STEPS, env, float(score), length, kind))
            start[env] = i + 1
    return games


def test_episode_statistics_report_each_game_once_with_real_score(played):
    games = expected_games(played)
    kinds = [g[-1] for g in games]
    assert "game over" in kinds and "truncation" in kinds, "precondition: both kinds of end"
    for game in games:
        if game[-1] == "truncation":
            assert game[4] == MAX_EPISODE_STEPS
        else:
            assert 0 < game[4] < MAX_EPISODE_STEPS
    # a game's length also equals its number of valid (acted) steps
    valids = played.cat("valids")
    start = np.zeros(NUM_ENVS, dtype=int)
    for k, t, env, _, length, _ in games:
        i = k * NUM_STEPS + t
        assert valids[start[env] : i + 1, env].sum() == length
        start[env] = i + 1

    for k in range(NUM_ROLLOUTS):
        expected = [(t, score, length) for kk, t, _, score, length, _ in games if kk == k]
        assert played.finished[k] == expected

    # the counters were reset at each game's end: what they hold now is the unfinished game
    raw, stats = played.raw, played.episode_stats
    for env in range(NUM_ENVS):
        ended_now = raw["info_terminated"][-1, env] == 1 or raw["truncated"][-1, env]
        elapsed = 0 if ended_now else int(raw["info_elapsed_step"][-1, env])
        assert stats.lengths[env] == elapsed
        assert stats.returns[env] == raw["info_reward"][start[env] :, env].sum()
    assert any(g[-1] == "truncation" and stats.lengths[g[2]] > 0 for g in games)


def info(reward, terminated):
    return dict(
        reward=np.asarray(reward, dtype=np.float32), terminated=np.asarray(terminated, np.int32)
    )


NO = np.array([False, False])
YES = np.array([True, True])


def test_episode_statistics_does_not_report_a_life_loss():
    stats = EpisodeStatistics(2)
    # env 0 loses a life (EnvPool: terminated=True, info["terminated"]=0); nothing is reported
    assert stats.update(info([4.0, 1.0], [0, 0]), NO, YES) == []
    assert stats.update(info([0.0, 0.0], [0, 0]), NO, np.array([False, True])) == []
    assert stats.update(info([7.0, 0.0], [0, 0]), NO, YES) == []
    np.testing.assert_array_equal(stats.returns, [11.0, 1.0])
    np.testing.assert_array_equal(stats.lengths, [2, 3])


def test_episode_statistics_reports_game_over_with_raw_score_and_acted_length():
    stats = EpisodeStatistics(2)
    assert stats.update(info([1.0, 0.0], [0, 0]), NO, YES) == []
    assert stats.update(info([4.0, 0.0], [0, 0]), NO, YES) == []  # env 0 loses a life here
    assert stats.update(info([0.0, 0.0], [0, 0]), NO, np.array([False, True])) == []  # reset step
    assert stats.update(info([7.0, 5.0], [1, 0]), NO, YES) == [(12.0, 3)]  # env 0: game over
    # env 0 starts again from zero after its reset step; env 1 was never interrupted
    assert stats.update(info([0.0, 0.0], [0, 0]), NO, np.array([False, True])) == []
    assert stats.update(info([2.0, 1.0], [1, 1]), NO, YES) == [(2.0, 1), (6.0, 6)]
    np.testing.assert_array_equal(stats.returns, [0.0, 0.0])
    np.testing.assert_array_equal(stats.lengths, [0, 0])


def test_episode_statistics_reports_truncation_and_resets():
    stats = EpisodeStatistics(2)
    assert stats.update(info([3.0, 1.0], [0, 0]), NO, YES) == []
    truncated = np.array([False, True])
    assert stats.update(info([0.0, 2.0], [0, 0]), truncated, YES) == [(3.0, 2)]
    assert stats.lengths[1] == 0 and stats.returns[1] == 0
    assert stats.update(info([0.0, 0.0], [0, 0]), NO, np.array([True, False])) == []  # reset step
    assert stats.update(info([1.0, 4.0], [0, 0]), YES, YES) == [(4.0, 4), (4.0, 1)]


def test_episode_statistics_does_not_count_ignored_steps():
    stats = EpisodeStatistics(1)
    acted = [True, True, False, True, False, False, True]
    for a in acted:  # EnvPool's reward on an ignored (reset) step is 0
        assert stats.update(info([float(a)], [0]), np.array([False]), np.array([a])) == []
    assert stats.update(info([0.0], [1]), np.array([False]), np.array([True])) == [(4.0, 5)]


@pytest.mark.parametrize(
    "name", ["ppo_atari_envpool", "ppo_atari", "ppo_atari_lstm", "ppo_atari_ale_vector"]
)
def test_rollout_fields_are_made_and_sliced_by_name(name):
    """`Rollout.zeros` and `Rollout.minibatch` go by the fields' names: a field a researcher adds
    (here `costs`) is allocated and sliced with the others, and reaches the loss's minibatch."""
    script = importlib.import_module(f"cleanrl.{name}")
    cls = dataclasses.make_dataclass("Rollout", [("costs", torch.Tensor)], bases=(script.Rollout,))
    sizes = types.SimpleNamespace(num_steps=3, num_envs=4)
    rollout = cls.zeros(sizes, (4, 84, 84), "cpu")
    names = [f.name for f in dataclasses.fields(cls)]
    assert names[-1] == "costs" and {"advantages", "returns", "values"} <= set(names)
    for field in names:
        x = getattr(rollout, field)
        dtype = {"obs": torch.uint8, "actions": torch.long}.get(field, torch.float32)
        shape = (3, 4, 4, 84, 84) if field == "obs" else (3, 4)
        assert (x.dtype, tuple(x.shape), x.abs().sum().item()) == (dtype, shape, 0), field
        x.copy_(torch.arange(x.numel()).reshape(x.shape))  # every entry tells where it was
    inds = [1, 3] if name == "ppo_atari_lstm" else [7, 0, 5]  # envs, or flat transitions
    mb = rollout.minibatch(inds)
    for field in names:
        x = getattr(rollout, field)
        expected = x[:, inds].flatten(0, 1) if name == "ppo_atari_lstm" else x.flatten(0, 1)[inds]
        assert torch.equal(getattr(mb, field), expected), field
