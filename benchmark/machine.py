"""This machine for `benchmark/throughput.py`: what it is (`machine_line`) and what it allows at
all, whatever the script (the bounds): the env stepping random actions alone, and the torch
network's compute for one iteration alone. Each bound is measured in a fresh process,
`python benchmark/throughput.py --_bound KIND JSON`; docs/throughput.md has the method."""

from __future__ import annotations

import datetime
import functools
import importlib.metadata
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass

from cleanrl_utils.files.scripts import load_script


@dataclass
class Sizes:
    """One iteration's sizes, as the scripts see them (their defaults, or `--extra-args`)."""

    num_envs: int = 8
    num_steps: int = 128
    num_minibatches: int = 4
    update_epochs: int = 4

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def minibatch_size(self) -> int:
        return self.batch_size // self.num_minibatches

    @property
    def gradient_steps(self) -> int:
        return self.update_epochs * self.num_minibatches


def machine_line() -> str:
    """CPU model, cores, GPU, library versions, load and date."""
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    gpu = "no GPU"
    if shutil.which("nvidia-smi"):
        try:
            names = subprocess.run(
                ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=30,
            ).stdout.split("\n")
            gpu = ", ".join(n.strip() for n in names if n.strip()) or gpu
        except (OSError, subprocess.SubprocessError):
            pass

    def version(package):
        try:
            return importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    date = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    return (
        f"{cpu}, {os.cpu_count()} CPUs ({len(os.sched_getaffinity(0))} usable), {gpu}; "
        f"torch {version('torch')}, jax {version('jax')}; "
        f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}; "
        f"load average {load} at the start; {date}"
    )


def bound_envpool(env_id: str, num_envs: int, steps: int) -> dict:
    import envpool
    import numpy as np

    # as `make_env` in the EnvPool scripts
    envs = envpool.make(
        env_id, env_type="gym", num_envs=num_envs, episodic_life=True, reward_clip=True, seed=1
    )
    n_actions = envs.action_space.n
    envs.reset()
    start = time.perf_counter()
    for _ in range(steps):
        envs.step(np.random.randint(0, n_actions, num_envs))
    elapsed = time.perf_counter() - start
    envs.close()
    return {"sps": steps * num_envs / elapsed, "num_envs": num_envs}


def bound_script_env(script: str, env_id: str, num_envs: int, steps: int) -> dict:
    """The env as `script`'s `make_env` builds it, stepping random actions."""
    envs = load_script(script).make_env(env_id, num_envs, 1)
    envs.action_space.seed(1)
    envs.reset()
    start = time.perf_counter()
    for _ in range(steps):
        envs.step(envs.action_space.sample())
    elapsed = time.perf_counter() - start
    envs.close()
    return {"sps": steps * num_envs / elapsed, "num_envs": num_envs}


def bound_compute(sizes: dict, iterations: int) -> dict:
    import types

    import gymnasium
    import torch
    import torch.nn as nn

    sizes = Sizes(**sizes)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(1)
    envs = types.SimpleNamespace(single_action_space=gymnasium.spaces.Discrete(4))
    agent = load_script("ppo_atari_envpool").Agent(envs).to(device)
    optimizer = torch.optim.Adam(agent.parameters(), lr=2.5e-4, eps=1e-5)

    def frames(n):
        return torch.randint(0, 256, (n, 4, 84, 84), dtype=torch.uint8, device=device)

    next_obs, b_obs = frames(sizes.num_envs), frames(sizes.batch_size)
    b_actions = torch.randint(0, 4, (sizes.batch_size,), device=device)
    b_advantages, b_returns = (torch.randn(sizes.batch_size, device=device) for _ in range(2))

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    def rollout_forward(steps):
        with torch.no_grad():
            for _ in range(steps):
                agent.get_action_and_value(next_obs)
        sync()

    def update(gradient_steps):
        for _ in range(gradient_steps):
            mb = torch.randint(0, sizes.batch_size, (sizes.minibatch_size,), device=device)
            _, logprob, entropy, value = agent.get_action_and_value(b_obs[mb], b_actions[mb])
            loss = (
                -(logprob * b_advantages[mb]).mean()
                + 0.5 * ((value.flatten() - b_returns[mb]) ** 2).mean()
                - 0.01 * entropy.mean()
            )
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
            optimizer.step()
        sync()

    rollout_forward(1)  # warm-up
    update(1)
    timings = []
    for _ in range(iterations):
        start = time.perf_counter()
        rollout_forward(sizes.num_steps)
        middle = time.perf_counter()
        update(sizes.gradient_steps)
        timings.append((middle - start, time.perf_counter() - middle))
    forward_s, update_s = min(timings, key=sum)
    return {
        "forward_s": forward_s,
        "update_s": update_s,
        "sps": sizes.batch_size / (forward_s + update_s),
        "device": device.type,
        "threads": torch.get_num_threads(),
    }


BOUNDS = {
    "envpool": bound_envpool,
    "gymnasium": functools.partial(bound_script_env, "ppo_atari"),
    "ale_vector": functools.partial(bound_script_env, "ppo_atari_ale_vector"),
    "compute": bound_compute,
}


def measure_bound_here(kind: str, params_json: str) -> None:
    """The internal mode (`--_bound KIND JSON`): measure one bound in this fresh process."""
    result = BOUNDS[kind](**json.loads(params_json))
    print(f"result: {json.dumps(result)}", flush=True)
