"""Steps per second of the five PPO Atari scripts on this machine, side by side, in one run, next
to what the machine allows at all: the env stepping random actions alone, and the network's
compute alone.

Method. Each script runs in a fresh process and a temporary folder for `--burn-in` +
`--iterations` training iterations (by default 8 envs x 128 steps = 1,024 steps and 4 epochs x 4
minibatches = 16 gradient steps of 256 per iteration), with `--checkpoint-every 0` (one
checkpoint, at the end). Its TensorBoard log gives the seconds since the start of training at
the end of every iteration (`global_step / charts/SPS`), so:

- steady SPS: steps per second over the measured iterations, those after the burn-in; with
  `--repeats`, the median over the repeats, and their spread (min-max);
- s/iter: seconds per measured iteration, and its split into the rollout (env steps and
  inference), the advantages (GAE) and the update (gradient steps), from the `time/rollout`,
  `time/advantages` and `time/update` scalars every script logs (the JAX scripts wait for each
  phase's result before timing it);
- 1st iter +: the first iteration's time minus one steady iteration: XLA's compilation in the JAX
  scripts, warm-up in the torch ones;
- startup: the process's wall-clock time minus its training time: imports, env creation and
  logging set-up (and also the final checkpoint and the exit);
- peak MiB: the largest resident set size of the process (`ru_maxrss` from `os.wait4`);
- own SPS: the script's last `charts/SPS`, what the script itself shows: all its steps over its
  own training time, the first iteration included;
- outside SPS: steps per second on this benchmark's clock. A script whose output is not a
  terminal prints a progress line at the end of its first and of its last iteration; this
  benchmark timestamps the lines as they arrive, and divides the steps between them by the
  seconds between them. The start of training cannot be seen from outside, so this leaves out the
  first iteration, as the steady SPS does with `--burn-in 1`: the two then cover the same
  iterations on two clocks, while own/outside shows how far the script's own figure (first
  iteration included) is from the steady speed.

Bounds (`--bounds`, on by default), each measured in a fresh process in the same run (and in
every repeat):

- EnvPool alone: `envpool.make(...)` as in the EnvPool scripts, random actions, env steps/s;
- gymnasium alone: `make_env` of `cleanrl/ppo_atari.py` (the classic wrappers, a synchronous
  vector env), random actions, env steps/s;
- compute alone: the torch `Agent` of `cleanrl/ppo_atari_envpool.py` on random uint8 frames, on
  the GPU if there is one: one iteration's rollout forward passes (`num_steps` batches of
  `num_envs`, no gradient) and its gradient steps (forward, backward, gradient clipping, Adam),
  the fastest of `--bound-iterations` after a warm-up. It is the same network as every script's
  but the LSTM script's (which has more to compute) and the JAX scripts' (same network, XLA's
  kernels rather than torch's);
- since the scripts step the envs and compute in turn, a script's bound is
  1 / (1 / env steps/s + 1 / compute steps/s), with the env it uses; `of bound` is its steady
  SPS over that.

    python benchmark/throughput.py                          # all five, 1 + 5 iterations each
    python benchmark/throughput.py --scripts ppo_atari_envpool ppo_atari --repeats 3
    python benchmark/throughput.py --game Pong --extra-args="--num-envs 16" --markdown t.md
    git worktree add /tmp/base HEAD~1       # a change's effect: the old code, pair by pair
    python benchmark/throughput.py --scripts ppo_atari_envpool --repeats 3 --baseline /tmp/base

Caveats. Run it on an otherwise idle machine: the scripts use every core (torch's and XLA's
thread pools, EnvPool's threads), and anything else running changes the numbers. Numbers are
only comparable within one run (same machine, same load, same settings); `--repeats` shows how
much they move.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import importlib.util
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import tyro

REPO_ROOT = Path(__file__).resolve().parent.parent
# short name -> the env it steps: "envpool" (`Game-v5`) or "gymnasium" (`GameNoFrameskip-v4`)
SCRIPTS = {
    "ppo_atari_envpool": "envpool",
    "ppo_atari": "gymnasium",
    "ppo_atari_lstm": "gymnasium",
    "ppo_atari_envpool_xla_jax": "envpool",
    "ppo_atari_envpool_xla_jax_scan": "envpool",
}
LABELS = {"envpool": "EnvPool", "gymnasium": "gymnasium + wrappers"}
BOUND_FLAG = "--_bound"  # internal: `throughput.py --_bound KIND JSON` measures one bound
PHASES = ("rollout", "advantages", "update")  # each script logs `time/{phase}` every iteration
PROGRESS_LINE = re.compile(r"^step (\d+)/\d+ ")  # cleanrl_utils/progress.py, not on a terminal


@dataclass
class Args:
    """Steps per second of the PPO Atari scripts on this machine, side by side, with the env's and
    the network's own speed as bounds. See the top of benchmark/throughput.py for the method."""

    scripts: list[str] = field(default_factory=lambda: list(SCRIPTS))
    """the scripts to run, by short name (`ppo_atari_envpool`), in this order"""
    game: str = "Breakout"
    """the game: `Breakout` is `Breakout-v5` (EnvPool), `BreakoutNoFrameskip-v4` (gymnasium)"""
    iterations: int = 5
    """measured training iterations per script, after the burn-in"""
    burn_in: int = 1
    """first iterations left out of the steady SPS (the first holds XLA's compilation)"""
    repeats: int = 1
    """runs of everything, interleaved (all scripts once, then again); shows medians and spread"""
    extra_args: str = ""
    """more flags for every script, with `=`: `--extra-args="--num-envs 16"`; also sizes bounds"""
    bounds: bool = True
    """also measure, each alone in a fresh process: EnvPool, the gymnasium env, torch's compute"""
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


class UsageError(Exception):
    """Bad command-line input: reported as one `error:` line, exit code 2, before any work."""


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

    @classmethod
    def from_argv(cls, argv: list[str]) -> Sizes:
        defaults = cls()
        return cls(
            **{
                name: flag_value(argv, name.replace("_", "-"), getattr(defaults, name))
                for name in ("num_envs", "num_steps", "num_minibatches", "update_epochs")
            }
        )


def flag_value(argv: list[str], name: str, default: int) -> int:
    """The value of `--name` in argv (`--num-envs 16`, `--num_envs 16` or `--num-envs=16`); the
    last one counts, as in tyro."""
    spellings = (f"--{name}", f"--{name.replace('-', '_')}")
    value = default
    for i, token in enumerate(argv):
        key, eq, text = token.partition("=")
        if key in spellings:
            if not eq and i + 1 >= len(argv):
                raise UsageError(f"{key} in --extra-args has no value")
            text = text if eq else argv[i + 1]
            try:
                value = int(text)
            except ValueError:
                raise UsageError(f"{key} in --extra-args takes an integer, got {text!r}") from None
    return value


def script_name(text: str) -> str:
    """`ppo_atari`, `ppo_atari.py` and `cleanrl/ppo_atari.py` all name `ppo_atari`."""
    name = Path(text).name.removesuffix(".py")
    if name not in SCRIPTS:
        raise UsageError(f"unknown script {text!r}; the scripts are: {', '.join(SCRIPTS)}")
    return name


def env_id_for(script: str, game: str) -> str:
    """The env id of `game` in `script`: `Breakout-v5` (EnvPool) or `BreakoutNoFrameskip-v4`."""
    return f"{game}-v5" if SCRIPTS[script] == "envpool" else f"{game}NoFrameskip-v4"


def parse_args(argv: list[str]) -> tuple[Args, Sizes]:
    """The command line, checked; raises UsageError on bad input."""
    args = tyro.cli(Args, args=argv)
    if not args.scripts:
        raise UsageError("--scripts needs at least one script")
    args.scripts = [script_name(s) for s in args.scripts]
    if len(set(args.scripts)) < len(args.scripts):
        raise UsageError(f"--scripts names a script twice: {' '.join(args.scripts)}")
    if not re.fullmatch(r"[A-Z][A-Za-z0-9]*", args.game) or "NoFrameskip" in args.game:
        raise UsageError(f"--game takes a game's name like Breakout or Pong, got {args.game!r}")
    for name in ("iterations", "burn_in", "repeats", "bound_steps", "bound_iterations"):
        if getattr(args, name) < 1:
            flag = "--" + name.replace("_", "-")
            raise UsageError(f"{flag} must be at least 1, got {getattr(args, name)}")
    try:
        extra = shlex.split(args.extra_args)
    except ValueError as e:
        raise UsageError(f"--extra-args cannot be split into flags: {e}") from None
    sizes = Sizes.from_argv(extra)
    for name, value in vars(sizes).items():
        if value < 1:
            raise UsageError(f"--{name.replace('_', '-')} in --extra-args must be at least 1")
    if sizes.minibatch_size < 1:
        raise UsageError("--num-minibatches in --extra-args is larger than the batch")
    if args.baseline is not None:
        missing = [
            s for s in args.scripts if not (Path(args.baseline) / "cleanrl" / f"{s}.py").is_file()
        ]
        if missing:
            raise UsageError(f"--baseline {args.baseline} has no cleanrl/{missing[0]}.py")
    return args, sizes


# --- statistics ---------------------------------------------------------------------------------


def median_spread(values: list[float]) -> tuple[float, float, float]:
    """(median, min, max) of the repeats' values."""
    return statistics.median(values), min(values), max(values)


def in_turn(*sps: float) -> float:
    """The steps per second of doing several things one after the other for every step, each of
    which alone runs at the given steps per second: 1 / (1/a + 1/b + ...)."""
    return 1.0 / sum(1.0 / s for s in sps)


def fraction_of_bound(sps: float, bound: float) -> float:
    return sps / bound


def steady_sps(times: list[float], batch_size: int, burn_in: int) -> float:
    """Steps per second after the first `burn_in` iterations; `times[i]`: seconds since the start
    of training at the end of iteration i + 1."""
    measured = len(times) - burn_in
    if measured < 1:
        raise ValueError(f"{len(times)} iterations logged: none left after a burn-in of {burn_in}")
    return batch_size * measured / (times[-1] - times[burn_in - 1])


def outside_sps(progress: list[tuple[float, int]]) -> float:
    """Steps per second between the first and the last progress line: (arrival time, step);
    nan without two lines to compare."""
    if len(progress) < 2:
        return float("nan")
    (t0, step0), (t1, step1) = progress[0], progress[-1]
    if step1 <= step0 or t1 <= t0:
        return float("nan")
    return (step1 - step0) / (t1 - t0)


# --- running the scripts -------------------------------------------------------------------------


class RunFailed(Exception):
    """A script or a bound measurement exited with an error; the message holds its log's end."""


@dataclass
class Run:
    """One run of one script."""

    script: str
    batch_size: int
    times: list[float]  # seconds since the start of training, at the end of each iteration
    last_sps: float  # the script's last `charts/SPS`
    progress: list[tuple[float, int]]  # (seconds since launch on our clock, step) per line
    wall: float
    peak_rss_mib: float
    burn_in: int
    phases: dict[str, list[float]]  # `time/{phase}` of each iteration: seconds in that phase

    def phase_s(self, phase: str) -> float:
        """Median seconds per measured iteration spent in `phase` (rollout, advantages, update)."""
        return statistics.median(self.phases[phase][self.burn_in :])

    @property
    def steady_sps(self) -> float:
        return steady_sps(self.times, self.batch_size, self.burn_in)

    @property
    def iteration_s(self) -> float:
        return self.batch_size / self.steady_sps

    @property
    def first_extra_s(self) -> float:
        return self.times[0] - self.iteration_s

    @property
    def startup_s(self) -> float:
        return self.wall - self.times[-1]

    @property
    def outside_sps(self) -> float:
        return outside_sps(self.progress)


def read_sps(run_dir: Path) -> tuple[int, list[float], float, dict[str, list[float]]]:
    """(batch size, seconds since the start of training at the end of each iteration, the last
    `charts/SPS`, each phase's seconds per iteration) from a run's TensorBoard log."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (events,) = run_dir.glob("events.out.tfevents.*")
    accumulator = EventAccumulator(str(events), size_guidance={"scalars": 0})
    accumulator.Reload()
    points = accumulator.Scalars("charts/SPS")
    phases = {phase: [p.value for p in accumulator.Scalars(f"time/{phase}")] for phase in PHASES}
    return points[0].step, [p.step / p.value for p in points], points[-1].value, phases


def run_logged(command: list[str], cwd: Path) -> tuple[str, list[tuple[float, int]], float, float]:
    """Run `command` in `cwd`, its output (stdout and stderr) into `cwd/log.txt`; returns (the
    log, the progress lines' (arrival time, step), wall seconds, peak RSS in MiB). Raises
    RunFailed with the log's end if it fails."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    progress = []
    with open(cwd / "log.txt", "wb") as log:
        start = time.monotonic()
        proc = subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for line in iter(proc.stdout.readline, b""):
            now = time.monotonic() - start
            log.write(line)
            if match := PROGRESS_LINE.match(line.decode(errors="replace")):
                progress.append((now, int(match.group(1))))
        proc.stdout.close()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
    text = (cwd / "log.txt").read_text(errors="replace")
    if proc.returncode != 0:
        raise RunFailed(
            f"{shlex.join(command[1:])} failed with exit code {proc.returncode}; "
            f"the end of its output:\n{text[-3000:]}"
        )
    return text, progress, wall, usage.ru_maxrss / 1024


def run_script(script: str, args: Args, sizes: Sizes, root: Path = REPO_ROOT) -> Run:
    iterations = args.burn_in + args.iterations
    command = [
        sys.executable,
        str(root / "cleanrl" / f"{script}.py"),
        "--env-id",
        env_id_for(script, args.game),
        "--checkpoint-every",
        "0",
        *shlex.split(args.extra_args),
        "--total-timesteps",
        str(iterations * sizes.batch_size),
    ]
    print(f"+ {command[1]} {shlex.join(command[2:])}", flush=True)
    with tempfile.TemporaryDirectory(prefix="throughput_") as cwd:
        log, progress, wall, peak = run_logged(command, Path(cwd))
        run_dirs = list((Path(cwd) / "runs").iterdir())
        if len(run_dirs) != 1:
            raise RunFailed(f"{script}: expected one run folder, found {run_dirs}:\n{log[-3000:]}")
        batch_size, times, last_sps, phases = read_sps(run_dirs[0])
    if len(times) <= args.burn_in:
        raise RunFailed(
            f"{script} logged {len(times)} iterations, none after a burn-in of {args.burn_in}"
        )
    run = Run(script, batch_size, times, last_sps, progress, wall, peak, args.burn_in, phases)
    print(
        f"  {run.steady_sps:,.1f} steady SPS, {run.wall:.1f} s wall, {run.peak_rss_mib:.0f} MiB",
        flush=True,
    )
    return run


# --- bounds ---------------------------------------------------------------------------------------


def load_script(name: str):
    """A script of `cleanrl/` as a module: its definitions, not its training (the script's
    `if __name__ == "__main__"` part does not run)."""
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))  # the scripts import cleanrl_utils
    path = REPO_ROOT / "cleanrl" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_throughput_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve string annotations through it
    spec.loader.exec_module(module)
    return module


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


def bound_gymnasium(env_id: str, num_envs: int, steps: int) -> dict:
    envs = load_script("ppo_atari").make_env(env_id, num_envs, 1)
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


BOUNDS = {"envpool": bound_envpool, "gymnasium": bound_gymnasium, "compute": bound_compute}


def measure_bound_here(kind: str, params_json: str) -> None:
    """The internal mode (`--_bound KIND JSON`): measure one bound in this fresh process."""
    result = BOUNDS[kind](**json.loads(params_json))
    print(f"result: {json.dumps(result)}", flush=True)


def run_bound(kind: str, params: dict) -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), BOUND_FLAG, kind, json.dumps(params)]
    print(f"+ bound {kind}: {json.dumps(params)}", flush=True)
    with tempfile.TemporaryDirectory(prefix="throughput_bound_") as cwd:
        log, *_ = run_logged(command, Path(cwd))
    (line,) = [line for line in log.splitlines() if line.startswith("result: ")]
    result = json.loads(line.removeprefix("result: "))
    print(f"  {result['sps']:,.1f} steps/s", flush=True)
    return result


def bound_params(args: Args, sizes: Sizes) -> dict[str, dict]:
    """The bounds that the chosen scripts need, with their parameters."""
    kinds = {SCRIPTS[s] for s in args.scripts}
    params = {
        kind: {
            "env_id": env_id_for(next(s for s in args.scripts if SCRIPTS[s] == kind), args.game),
            "num_envs": sizes.num_envs,
            "steps": args.bound_steps,
        }
        for kind in ("envpool", "gymnasium")
        if kind in kinds
    }
    params["compute"] = {"sizes": vars(sizes), "iterations": args.bound_iterations}
    return params


# --- the report -----------------------------------------------------------------------------------


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


def settings_line(args: Args, sizes: Sizes) -> str:
    extra = f"; extra args: `{args.extra_args}`" if args.extra_args else ""
    return (
        f"{args.game}; {sizes.num_envs} envs x {sizes.num_steps} steps = {sizes.batch_size:,} "
        f"steps and {sizes.gradient_steps} gradient steps of {sizes.minibatch_size} per "
        f"iteration; {args.iterations} measured iterations after a burn-in of {args.burn_in}; "
        f"{args.repeats} repeat(s), medians{extra}"
    )


def fmt_sps(x: float) -> str:
    if x != x:
        return "n/a"
    return f"{x:,.0f}" if x >= 100 else f"{x:.1f}" if x >= 10 else f"{x:.2f}"


COLUMNS = [
    ("script", "<"),
    ("steady SPS", ">"),
    ("spread", ">"),
    ("s/iter", ">"),
    ("rollout + adv. + update", ">"),
    ("1st iter +", ">"),
    ("startup", ">"),
    ("peak MiB", ">"),
    ("own SPS", ">"),
    ("outside SPS", ">"),
    ("own/outside", ">"),
    ("of bound", ">"),
]


@dataclass
class Summary:
    """The medians over the repeats."""

    script_rows: list[list[str]]
    bound_rows: list[list[str]]
    steady_sps: dict[str, float]
    bounds: dict[str, float]  # "envpool", "gymnasium", "compute", and the scripts' bounds


def summarize(runs: dict[str, list[Run]], bound_runs: dict[str, list[dict]]) -> Summary:
    def med(values):
        return statistics.median(values)

    bounds = {kind: med([r["sps"] for r in results]) for kind, results in bound_runs.items()}
    for kind in ("envpool", "gymnasium"):
        if kind in bounds and "compute" in bounds:
            bounds[f"{kind} + compute"] = in_turn(bounds[kind], bounds["compute"])
    script_rows, steady = [], {}
    for script, results in runs.items():
        sps, lo, hi = median_spread([r.steady_sps for r in results])
        steady[script] = sps
        own, outside = med([r.last_sps for r in results]), med([r.outside_sps for r in results])
        bound = bounds.get(f"{SCRIPTS[results[0].script]} + compute")
        script_rows.append(
            [
                script,
                fmt_sps(sps),
                f"{fmt_sps(lo)}-{fmt_sps(hi)}" if len(results) > 1 else "-",
                f"{med([r.iteration_s for r in results]):.2f} s",
                " + ".join(f"{med([r.phase_s(p) for r in results]):.2f}" for p in PHASES) + " s",
                f"{med([r.first_extra_s for r in results]):.1f} s",
                f"{med([r.startup_s for r in results]):.1f} s",
                f"{med([r.peak_rss_mib for r in results]):,.0f}",
                fmt_sps(own),
                fmt_sps(outside),
                f"{own / outside:.2f}" if outside == outside else "n/a",
                f"{100 * fraction_of_bound(sps, bound):.0f}%" if bound else "-",
            ]
        )
    bound_rows = []
    for kind in ("envpool", "gymnasium"):
        if kind in bounds:
            how = f"{bound_runs[kind][0]['num_envs']} envs stepping random actions: env steps/s"
            bound_rows.append([f"{LABELS[kind]} alone", fmt_sps(bounds[kind]), how])
    if "compute" in bounds:
        c = bound_runs["compute"]
        forward, update = med([r["forward_s"] for r in c]), med([r["update_s"] for r in c])
        bound_rows.append(
            [
                f"torch compute alone ({c[0]['device']}, {c[0]['threads']} thread(s))",
                fmt_sps(bounds["compute"]),
                f"{forward + update:.2f} s per iteration: {forward:.2f} s rollout forward "
                f"passes + {update:.2f} s gradient steps",
            ]
        )
    for kind in ("envpool", "gymnasium"):
        if f"{kind} + compute" in bounds:
            bound_rows.append(
                [
                    f"{LABELS[kind]} then compute, in turn",
                    fmt_sps(bounds[f"{kind} + compute"]),
                    "1 / (1/env + 1/compute): the bound of the scripts on this env",
                ]
            )
    return Summary(script_rows, bound_rows, steady, bounds)


def text_table(header: list[str], rows: list[list[str]], align: list[str]) -> str:
    widths = [max(len(str(x)) for x in column) for column in zip(header, *rows)]

    def line(cells):
        return "  ".join(f"{c:{a}{w}}" for c, a, w in zip(cells, align, widths)).rstrip()

    return "\n".join([line(header), "  ".join("-" * w for w in widths), *map(line, rows)])


def markdown_table(header: list[str], rows: list[list[str]], align: list[str]) -> str:
    def line(cells):
        return "| " + " | ".join(cells) + " |"

    rule = "|" + "|".join("---:" if a == ">" else "---" for a in align) + "|"
    return "\n".join([line(header), rule, *map(line, rows)])


LEGEND = (
    "steady SPS: steps per second after the burn-in (median; spread: min-max over repeats). "
    "rollout + adv. + update: the script's own `time/*` scalars, seconds per iteration in each "
    "phase (median over the measured iterations): env steps and inference, GAE, gradient steps. "
    "1st iter +: the first iteration's time minus a steady one (XLA compilation in the JAX "
    "scripts). startup: wall-clock minus training time (imports, env creation; also the final "
    "checkpoint and exit). own SPS: the script's last charts/SPS (first iteration included). "
    "outside SPS: steps between the script's first and last progress lines over the seconds "
    "between them on this benchmark's clock (first iteration left out). of bound: steady SPS "
    "over the env's and the torch compute's speed done in turn, 1/(1/env + 1/compute); the JAX "
    "scripts' compute is XLA's, which can beat torch's."
)
BOUND_HEADER = (["bound", "steps/s", "how"], ["<", ">", "<"])


def report(args: Args, sizes: Sizes, machine: str, summary: Summary) -> str:
    header, align = [c[0] for c in COLUMNS], [c[1] for c in COLUMNS]
    parts = [
        f"{machine}\n{settings_line(args, sizes)}",
        text_table(header, summary.script_rows, align),
    ]
    if summary.bound_rows:
        rows = [row + [""] * (3 - len(row)) for row in summary.bound_rows]
        parts.append(text_table(BOUND_HEADER[0], rows, BOUND_HEADER[1]))
    parts.append(textwrap.fill(LEGEND, width=100))
    return "\n\n".join(parts)


def markdown_report(args: Args, sizes: Sizes, machine: str, summary: Summary) -> str:
    header, align = [c[0] for c in COLUMNS], [c[1] for c in COLUMNS]
    rows = [[f"`{row[0]}`", *row[1:]] for row in summary.script_rows]
    parts = [
        f"Machine: {machine}.",
        f"Settings: {settings_line(args, sizes)}.",
        markdown_table(header, rows, align),
    ]
    if summary.bound_rows:
        rows = [row + [""] * (3 - len(row)) for row in summary.bound_rows]
        parts.append(markdown_table(BOUND_HEADER[0], rows, BOUND_HEADER[1]))
    parts.append(LEGEND)
    return "<!-- written by benchmark/throughput.py -->\n" + "\n\n".join(parts) + "\n"


def baseline_ratios(runs: dict[str, list[Run]], scripts: list[str]) -> str:
    """Steady SPS of this checkout over the baseline's, pair by pair (each pair ran back to back)."""
    lines = ["steady SPS, this checkout / baseline, per pair (median):"]
    for script in scripts:
        pairs = zip(runs[script], runs[f"{script} (baseline)"], strict=True)
        ratios = [run.steady_sps / base.steady_sps for run, base in pairs]
        each = ", ".join(f"{r:.2f}" for r in ratios)
        lines.append(f"  {script}: {each} ({statistics.median(ratios):.2f})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> Summary | None:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == [BOUND_FLAG]:
        measure_bound_here(*argv[1:])
        return None
    try:
        args, sizes = parse_args(argv)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    machine = machine_line()
    print(f"{machine}\n{settings_line(args, sizes)}", flush=True)
    params = bound_params(args, sizes) if args.bounds else {}
    runs: dict[str, list[Run]] = {}
    for script in args.scripts:  # the baseline's row right above its script's
        if args.baseline:
            runs[f"{script} (baseline)"] = []
        runs[script] = []
    bound_runs: dict[str, list[dict]] = {kind: [] for kind in params}
    try:
        for repeat in range(1, args.repeats + 1):
            print(f"repeat {repeat}/{args.repeats}", flush=True)
            for script in args.scripts:
                if args.baseline:  # each pair back to back: the load they see is alike
                    baseline = run_script(script, args, sizes, Path(args.baseline))
                    runs[f"{script} (baseline)"].append(baseline)
                runs[script].append(run_script(script, args, sizes))
            for kind, kind_params in params.items():
                bound_runs[kind].append(run_bound(kind, kind_params))
    except RunFailed as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(1) from None
    summary = summarize(runs, bound_runs)
    print(f"\n{report(args, sizes, machine, summary)}")
    if args.baseline:
        print(f"\n{baseline_ratios(runs, args.scripts)}")
    if args.markdown:
        Path(args.markdown).write_text(markdown_report(args, sizes, machine, summary))
        print(f"\nwrote {args.markdown}")
    return summary


if __name__ == "__main__":
    main()
