"""One rank of the update-equality test (tests/test_distributed.py), as a real process:
`python tests/update_rank.py SCRIPT OUT_FILE` with torchrun's variables (RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT) set. For each of CASES it plays its slice of the test's rollout through
`SCRIPT`'s update over gloo and saves the network's parameters and the stats to OUT_FILE; then
the stop agreement's check of the permutation generators with the ranks in step (saved too), and
with rank 1 one draw ahead: the process ends there, with the agreement's line and exit code."""

from __future__ import annotations

import dataclasses
import os
import sys
import types

import gymnasium
import numpy as np
import torch

from cleanrl_utils.distributed.agreement import Shuffle
from cleanrl_utils.distributed.torch_ranks import Distributed
from cleanrl_utils.files.scripts import load_script

NUM_ACTIONS = 4
NUM_STEPS, NUM_ENVS = 8, 4
NUM_MINIBATCHES, UPDATE_EPOCHS = 4, 3
SHUFFLE_SEED = 0
# (max_grad_norm, SGD learning rate). Unclipped: a gradient off by a constant factor shows (clipping
# would hide it). Clipped: the case's gradient norms are 3-18, so every minibatch is clipped, and
# clipping each rank's share before the ranks sum them would change the step's size and direction.
# Padded: clipped, each rank's share padded to a fixed size as under --compile (here eager).
CASES = {"unclipped": (1e6, 1e-3), "clipped": (1.0, 1e-2), "padded": (1.0, 1e-2)}


def make_args(local_num_envs: int = NUM_ENVS, max_grad_norm: float = 1e6) -> types.SimpleNamespace:
    batch_size = NUM_STEPS * NUM_ENVS
    return types.SimpleNamespace(
        num_steps=NUM_STEPS,
        num_envs=NUM_ENVS,
        local_num_envs=local_num_envs,
        batch_size=batch_size,
        minibatch_size=batch_size // NUM_MINIBATCHES,
        update_epochs=UPDATE_EPOCHS,
        clip_coef=0.1,
        norm_adv=True,
        clip_vloss=True,
        ent_coef=0.01,
        vf_coef=0.5,
        max_grad_norm=max_grad_norm,
        target_kl=None,
        backend="gloo",
        device_ids=[],
        cuda=False,
        compile=False,
        cudagraphs=False,
    )


def make_case(script_name: str, seed: int = 3, lr: float = 1e-3):
    """The network, the optimizer and a global rollout (NUM_STEPS x NUM_ENVS) of `script_name`,
    with old log-probabilities and values that differ from the network's (so that ratios and
    values get clipped) and, where the script has them, some invalid transitions."""
    script = load_script(script_name)
    torch.manual_seed(0)
    envs = types.SimpleNamespace(single_action_space=gymnasium.spaces.Discrete(NUM_ACTIONS))
    agent = script.Agent(envs)
    # plain SGD: Adam would hide a gradient off by a constant factor
    optimizer = torch.optim.SGD(agent.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed)
    rollout = script.Rollout.zeros(make_args(), (4, 84, 84), "cpu")
    rollout.obs[:] = torch.randint(0, 256, rollout.obs.shape, dtype=torch.uint8, generator=gen)
    rollout.actions[:] = torch.randint(0, NUM_ACTIONS, rollout.actions.shape, generator=gen)
    with torch.no_grad():
        _, logprobs, _, values = agent.get_action_and_value(
            rollout.obs.flatten(0, 1), rollout.actions.flatten()
        )
    shape = (NUM_STEPS, NUM_ENVS)
    rollout.logprobs[:] = logprobs.view(shape) + 0.2 * torch.randn(shape, generator=gen)
    rollout.values[:] = values.view(shape) + 0.3 * torch.randn(shape, generator=gen)
    if hasattr(rollout, "valids"):
        rollout.valids[:] = (torch.rand(shape, generator=gen) > 0.2).float()
    advantages = 1.5 * torch.randn(shape, generator=gen) + 0.5
    return agent, optimizer, rollout, advantages, advantages + rollout.values


def env_slice(x: torch.Tensor, rank: int, world_size: int) -> torch.Tensor:
    n = x.shape[1] // world_size
    return x[:, rank * n : (rank + 1) * n].clone()


def main(script_name: str, out_file: str) -> None:
    torch.set_num_threads(1)
    world_size, rank = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
    script, sibling = load_script(script_name), script_name.split("_multigpu")[0]
    dist = Distributed(make_args(local_num_envs=NUM_ENVS // world_size))
    dist.connect()
    results = {}
    for case, (max_grad_norm, lr) in CASES.items():
        args = make_args(local_num_envs=NUM_ENVS // world_size, max_grad_norm=max_grad_norm)
        args.compile = case == "padded"
        agent, optimizer, rollout, advantages, returns = make_case(sibling, lr=lr)
        fields = {
            f.name: env_slice(getattr(rollout, f.name), rank, world_size)
            for f in dataclasses.fields(rollout)
        }
        mine = script.Rollout(**fields)
        advantages, returns = (env_slice(x, rank, world_size) for x in (advantages, returns))
        dist.shuffler = Shuffle(SHUFFLE_SEED)  # every rank alike
        stats = script.update(
            script.ppo_loss, agent, optimizer, args, mine, advantages, returns, dist
        )
        results[case] = {
            "params": agent.state_dict(),
            "stats": {k: float(v.detach()) for k, v in stats.items()},
        }
    results["in step"] = dist.agreed_stop(None)
    torch.save(results, out_file)
    if rank == 1:
        dist.shuffle(np.arange(10))  # one draw the other rank does not make
    dist.agreed_stop(None)  # every rank: one line, exit code 1
    dist.close()


if __name__ == "__main__":
    main(*sys.argv[1:])
