"""Data-parallel PPO (cleanrl_utils/distributed.py and the *_multigpu scripts).

The key proof: 2 gloo ranks, real processes, each holding half the envs of a rollout, end a whole
update (every epoch and minibatch) with the parameters that the single-process sibling script
reaches on the whole rollout, to float tolerance: once with no gradient clipped and once with every
minibatch's gradient clipped (the ranks clip the sum of their gradients, not each its own).
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch
from conftest import REPO_ROOT, script_env
from ports import free_port
from update_rank import (
    CASES,
    NUM_ENVS,
    NUM_MINIBATCHES,
    NUM_STEPS,
    SHUFFLE_SEED,
    make_args,
    make_case,
)

from cleanrl_utils.distributed import Distributed
from cleanrl_utils.scripts import load_script

SIBLINGS = {"ppo_atari_envpool_multigpu": "ppo_atari_envpool", "ppo_atari_multigpu": "ppo_atari"}


def rank_env(cwd, rank: int, world_size: int, port: int, **extra) -> dict:
    return script_env(
        cwd,
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world_size),
        LOCAL_WORLD_SIZE=str(world_size),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        PYTHONPATH=f"{REPO_ROOT}:{REPO_ROOT / 'tests'}",
        **extra,
    )


def single_process_update(name: str, case: str, monkeypatch):
    """The sibling's update on the whole rollout; also the gradient norms it clipped."""
    max_grad_norm, lr = CASES[case]
    script = load_script(SIBLINGS[name])
    agent, optimizer, rollout, advantages, returns = make_case(SIBLINGS[name], lr=lr)
    norms, clip = [], torch.nn.utils.clip_grad_norm_

    def recording_clip(*args, **kwargs):
        norm = clip(*args, **kwargs)
        norms.append(norm.item())
        return norm

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", recording_clip)
    np.random.seed(SHUFFLE_SEED)
    args = make_args(max_grad_norm=max_grad_norm)
    stats = script.update(script.ppo_loss, agent, optimizer, args, rollout, advantages, returns)
    monkeypatch.undo()
    return agent.state_dict(), {k: float(v.detach()) for k, v in stats.items()}, norms


@pytest.mark.parametrize("name", list(SIBLINGS))
def test_two_ranks_update_as_one_process_on_the_whole_rollout(name, tmp_path, monkeypatch):
    port, world_size = free_port(), 2
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(REPO_ROOT / "tests" / "update_rank.py"),
                name,
                str(tmp_path / f"{r}.pt"),
            ],
            cwd=tmp_path,
            env=rank_env(tmp_path, r, world_size, port),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for r in range(world_size)
    ]
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], "\n".join(outputs)
    ranks = [torch.load(tmp_path / f"{r}.pt") for r in range(world_size)]
    for case, (max_grad_norm, lr) in CASES.items():
        expected_params, expected_stats, norms = single_process_update(name, case, monkeypatch)
        # the clipped case clips every minibatch's gradient, the unclipped one none
        assert len(norms) == NUM_MINIBATCHES * make_args().update_epochs, case
        assert all((norm > max_grad_norm) == (case == "clipped") for norm in norms), (case, norms)
        initial = make_case(SIBLINGS[name], lr=lr)[0].state_dict()
        for got in (r[case] for r in ranks):
            assert got["params"].keys() == expected_params.keys()
            for key, value in expected_params.items():
                # float rounding differs (each rank sums its share first): relative to the step,
                step = (value - initial[key]).norm()
                assert step > 0, (case, key)
                # (float32 rounds w + step to the weights' precision: ~1e-3 of this small step; a
                # gradient off by a factor, weighted or clipped per rank is off by 10% or more)
                assert (got["params"][key] - value).norm() <= 1e-2 * step, (case, key)
            assert got["stats"] == pytest.approx(expected_stats, rel=1e-3, abs=1e-6), case
        # the ranks end with the same network, bit for bit (each applies the same summed gradient)
        for key in expected_params:
            assert torch.equal(ranks[0][case]["params"][key], ranks[1][case]["params"][key]), key


def test_the_ranks_minibatches_together_are_the_single_process_minibatch():
    args = make_args(local_num_envs=NUM_ENVS // 2)
    batch = NUM_STEPS * NUM_ENVS
    b_inds = np.random.default_rng(0).permutation(batch)
    global_ids = np.arange(batch).reshape(NUM_STEPS, NUM_ENVS)
    for start in range(0, batch, batch // NUM_MINIBATCHES):
        mb = b_inds[start : start + batch // NUM_MINIBATCHES]
        union = []
        for rank in range(2):
            dist = object.__new__(Distributed)
            dist.rank, dist.world_size = rank, 2
            local = dist.local_indices(mb, args.num_envs)
            mine = global_ids[:, rank * 2 : (rank + 1) * 2].reshape(-1)  # its flattened rollout
            union += mine[local].tolist()
        assert sorted(union) == sorted(mb.tolist())
