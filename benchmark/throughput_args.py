"""The command line of `benchmark/throughput.py`: the scripts it knows (and the env each steps)
and its flags (`Args`). Its two halves, `throughput_measure.py` and `throughput_report.py`, take
an `Args` from here, and `throughput.py` imports all three: the imports point one way."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

import tyro

# short name -> the env it steps: "envpool" (`Game-v5`), "gymnasium" (`GameNoFrameskip-v4`) or
# "ale_vector" (ALE's own vector env, `Game-v5` as well)
SCRIPTS = {
    "ppo_atari_envpool": "envpool",
    "ppo_atari": "gymnasium",
    "ppo_atari_lstm": "gymnasium",
    "ppo_atari_envpool_xla_jax": "envpool",
    "ppo_atari_envpool_xla_jax_scan": "envpool",
    "ppo_atari_ale_vector": "ale_vector",
}
# one run on --nproc processes (torchrun), the batch of the others: --num-envs split over them
MULTI_PROCESS = {"ppo_atari_envpool_multigpu": "envpool", "ppo_atari_multigpu": "gymnasium"}
# one process on every JAX device (not in the default list: on one device it is the scan script)
MULTI_DEVICE = {"ppo_atari_envpool_xla_jax_scan_multigpu": "envpool"}
KINDS = SCRIPTS | MULTI_PROCESS | MULTI_DEVICE


@dataclass
class Args:
    """Steps per second of the PPO Atari scripts on this machine, side by side, with the env's and
    the network's own speed as bounds. See docs/throughput.md for the method."""

    scripts: list[str] = field(default_factory=lambda: list(SCRIPTS))
    """the scripts to run, by short name (`ppo_atari_envpool`), in this order; the `*_multigpu` ones also"""
    nproc: int = 2
    """the processes of a `*_multigpu` script's run (`torchrun --standalone --nproc_per_node`), each with num_envs / nproc envs: the batch of the others"""
    game: str = "Breakout"
    """the game: `Breakout` is `Breakout-v5` (EnvPool, ALE's vector env), `BreakoutNoFrameskip-v4` (gymnasium)"""
    iterations: int = 5
    """measured training iterations per script, after the burn-in"""
    burn_in: int = 1
    """first iterations left out of the steady SPS (the first holds XLA's compilation)"""
    repeats: int = 1
    """runs of everything, interleaved (all scripts once, then again); shows medians and spread"""
    extra_args: str = ""
    """more flags for every script, with `=`: `--extra-args="--num-envs 16"`; also sizes bounds"""
    bounds: bool = True
    """also measure, each alone in a fresh process: each script's env (EnvPool, the gymnasium env, ALE's vector env), torch's compute"""
    bound_steps: int = 1000
    """vector-env steps timed for each env bound (each one steps every env)"""
    bound_iterations: int = 2
    """iterations of the compute bound timed after a warm-up; the fastest counts"""
    baseline: Annotated[str | None, tyro.conf.arg(metavar="DIR")] = None
    """another checkout of this repository (`git worktree add /tmp/base HEAD~1`) to compare with:
    each script also runs from there, right before this checkout's run in every repeat, and the
    ratio of each pair's steady SPS is reported"""
    markdown: Annotated[str | None, tyro.conf.arg(metavar="PATH")] = None
    """also write the results here as markdown tables, headed by a line naming the machine"""
