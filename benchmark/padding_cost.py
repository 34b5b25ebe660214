"""What the fixed-size shares of `--compile` on several ranks cost: one rank's update (every epoch
and minibatch: the loss, its backward pass and the optimizer's step) on its share as it comes
against its share padded to `share_size`, side by side in one process, pair by pair. The rows
are the rank's mean share and the padded size for the script's default sizes (4 envs a rank, 128
steps, 4 minibatches, 4 epochs); the collectives are left out (a one-process `Distributed`), so
that the ratio is the padding's cost alone. docs/throughput.md has the numbers of this machine.

    python benchmark/padding_cost.py                       # 2 and 8 ranks, eager
    python benchmark/padding_cost.py --world-sizes 2 --compile
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import time
import types

import gymnasium
import numpy as np
import torch

from cleanrl_utils.distributed.torch_ranks import Distributed
from cleanrl_utils.files.scripts import load_script
from cleanrl_utils.ppo.compile import share_size

SCRIPT = "ppo_atari_envpool_multigpu"
LOCAL_ENVS, STEPS, MINIBATCHES, EPOCHS = 4, 128, 4, 4


def one_update(script, loss_fn, agent, optimizer, args, rollout, rows: int, real_rows: int):
    """EPOCHS x MINIBATCHES steps of `rows` transitions each, `real_rows` of them real."""
    dist = object.__new__(Distributed)
    dist.rank, dist.world_size, dist.device = 0, 1, torch.device("cpu")
    real = (torch.arange(rows) < real_rows).float()
    gen = np.random.default_rng(0)
    for _ in range(EPOCHS * MINIBATCHES):
        inds = np.pad(
            gen.choice(LOCAL_ENVS * STEPS, real_rows, replace=False), (0, rows - real_rows)
        )
        loss, _ = loss_fn(agent, args, rollout.minibatch(inds), real, dist)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world-sizes", type=int, nargs="+", default=[2, 8])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--compile", action="store_true", help="compile the loss (each shape once)")
    flags = parser.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    script = load_script(SCRIPT)
    print(f"{SCRIPT}: one rank's update of {LOCAL_ENVS} envs x {STEPS} steps, {MINIBATCHES} "
          f"minibatches, {EPOCHS} epochs, {'compiled' if flags.compile else 'eager'}, "
          f"{torch.get_num_threads()} torch thread(s); median of {flags.repeats} pairs")  # fmt: skip
    print("| ranks | rows (mean share) | rows (padded) | unpadded s | padded s | ratio |")
    print("|---:|---:|---:|---:|---:|---:|")
    for world_size in flags.world_sizes:
        batch = LOCAL_ENVS * STEPS * world_size
        minibatch = batch // MINIBATCHES
        mean_rows, padded_rows = minibatch // world_size, share_size(batch, minibatch, world_size)
        torch.manual_seed(0)
        agent = script.Agent(
            types.SimpleNamespace(single_action_space=gymnasium.spaces.Discrete(4))
        )
        optimizer = torch.optim.Adam(agent.parameters(), lr=2.5e-4, eps=1e-5)
        shape = (STEPS, LOCAL_ENVS)
        zeros = {f.name: torch.zeros(shape) for f in dataclasses.fields(script.Rollout)}
        rollout = script.Rollout(**zeros | dict(
            obs=torch.randint(0, 256, (*shape, 4, 84, 84), dtype=torch.uint8),
            actions=torch.randint(0, 4, shape), valids=torch.ones(shape),
            advantages=torch.randn(shape), returns=torch.randn(shape),
        ))  # fmt: skip
        args = types.SimpleNamespace(
            minibatch_size=minibatch, clip_coef=0.1, norm_adv=True, clip_vloss=True,
            ent_coef=0.01, vf_coef=0.5,
        )  # fmt: skip
        loss_fn = (
            torch.compile(script.ppo_loss, dynamic=False) if flags.compile else script.ppo_loss
        )
        times = {mean_rows: [], padded_rows: []}
        for repeat in range(flags.repeats + 1):  # the first pair: a warm-up (and compilation)
            for rows in times:
                started = time.perf_counter()
                one_update(script, loss_fn, agent, optimizer, args, rollout, rows, mean_rows)
                if repeat:
                    times[rows].append(time.perf_counter() - started)
        plain, padded = (statistics.median(t) for t in times.values())
        print(f"| {world_size} | {mean_rows} | {padded_rows} | {plain:.2f} | {padded:.2f} | "
              f"{padded / plain:.2f} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
