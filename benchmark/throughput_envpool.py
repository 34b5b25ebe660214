"""Steps per second of the EnvPool PPO scripts on this machine, side by side, in one run.

Each script runs with its defaults (8 envs x 128 steps, 4 epochs x 4 minibatches, so 1,024
steps and 16 gradient steps per iteration) for `--iterations` iterations, in a fresh process
and a temporary folder. Its TensorBoard log gives the time since the start of training at the
end of every iteration (`global_step / charts/SPS`), so:

- steady SPS: steps per second from the end of the first iteration to the end of the last one;
  the first iteration holds JAX's compilation (and torch's warm-up), which is reported apart:
- compile: the first iteration's time minus one steady iteration's time;
- startup: imports, env creation and logging set-up before training starts (wall minus the
  training time);
- peak memory: the largest resident set size of the process (`ru_maxrss` from `wait4`).

    python benchmark/throughput_envpool.py                     # 5 iterations each
    python benchmark/throughput_envpool.py --iterations 10 --env-id Pong-v5
    python benchmark/throughput_envpool.py --extra-args="--num-envs 16"

Run it on an otherwise idle machine: the scripts use every core (XLA's and torch's thread pools).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import tyro

REPO_ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = [
    "cleanrl/ppo_atari_envpool.py",
    "cleanrl/ppo_atari_envpool_xla_jax.py",
    "cleanrl/ppo_atari_envpool_xla_jax_scan.py",
]


@dataclass
class Args:
    iterations: int = 5
    """training iterations per script (the first one compiles); at least 2"""
    env_id: str = "Breakout-v5"
    """the EnvPool game"""
    scripts: list[str] = field(default_factory=lambda: list(SCRIPTS))
    """the scripts to run, in this order (paths relative to the repository root)"""
    extra_args: str = ""
    """more arguments for every script, written with `=`: `--extra-args="--num-envs 16"`"""


@dataclass
class Result:
    script: str
    batch_size: int
    times: list[float]  # seconds since the start of training, at the end of each iteration
    wall: float
    peak_rss_mib: float

    @property
    def steady_sps(self) -> float:
        return self.batch_size * (len(self.times) - 1) / (self.times[-1] - self.times[0])

    @property
    def compile_s(self) -> float:
        return self.times[0] - self.batch_size / self.steady_sps

    @property
    def startup_s(self) -> float:
        return self.wall - self.times[-1]


def read_times(run_dir: Path) -> tuple[int, list[float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (events,) = run_dir.glob("events.out.tfevents.*")
    accumulator = EventAccumulator(str(events), size_guidance={"scalars": 0})
    accumulator.Reload()
    points = accumulator.Scalars("charts/SPS")
    batch_size = points[0].step
    return batch_size, [p.step / p.value for p in points]


def run(script: str, args: Args) -> Result:
    with tempfile.TemporaryDirectory(prefix="throughput_") as cwd:
        command = [
            sys.executable,
            str(REPO_ROOT / script),
            "--env-id",
            args.env_id,
            *shlex.split(args.extra_args),
        ]
        batch_size = flag_value(command, "num-envs", 8) * flag_value(command, "num-steps", 128)
        command += ["--total-timesteps", str(args.iterations * batch_size)]
        print(f"+ {shlex.join(command[1:])}", flush=True)
        with open(Path(cwd) / "log.txt", "w") as log:
            start = time.time()
            proc = subprocess.Popen(command, cwd=cwd, stdout=log, stderr=subprocess.STDOUT)
            _, status, usage = os.wait4(proc.pid, 0)
            wall = time.time() - start
            proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            tail = (Path(cwd) / "log.txt").read_text()[-3000:]
            raise SystemExit(f"{script} failed with exit code {proc.returncode}:\n{tail}")
        (run_dir,) = (Path(cwd) / "runs").iterdir()
        batch_size, times = read_times(run_dir)
    return Result(script, batch_size, times, wall, usage.ru_maxrss / 1024)


def flag_value(argv: list[str], name: str, default: int) -> int:
    """The value of `--name` in argv (`--num-envs 16`, `--num_envs 16` or `--num-envs=16`)."""
    spellings = (f"--{name}", f"--{name.replace('-', '_')}")
    for i, token in enumerate(argv):
        key, eq, value = token.partition("=")
        if key in spellings:
            return int(value if eq else argv[i + 1])
    return default


def main(argv=None) -> list[Result]:
    args = tyro.cli(Args, args=argv)
    if args.iterations < 2:
        raise SystemExit("error: --iterations must be at least 2 (the first one compiles)")
    print(
        f"{os.cpu_count()} CPUs, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, "
        f"{args.env_id}, {args.iterations} iterations per script",
        flush=True,
    )
    results = [run(script, args) for script in args.scripts]
    header = f"{'script':<40} {'steady SPS':>10} {'compile':>9} {'startup':>8} {'peak memory':>12}"
    print(f"\n{header}\n{'-' * len(header)}")
    for r in results:
        print(
            f"{Path(r.script).name:<40} {r.steady_sps:>10.0f} {r.compile_s:>8.1f}s "
            f"{r.startup_s:>7.1f}s {r.peak_rss_mib:>8.0f} MiB"
        )
    return results


if __name__ == "__main__":
    main()
