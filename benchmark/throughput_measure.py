"""The measuring half of `benchmark/throughput.py`: the scripts it runs and the env each steps,
one script's run as a process (its command, its log, its TensorBoard scalars, its peak memory)
and each bound's process (`machine.py` measures it); the report is `throughput_report.py`."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import tyro
from machine import Sizes
from throughput_args import KINDS, MULTI_PROCESS, Args

from cleanrl_utils.checks.args import tyro_error_line
from cleanrl_utils.report.events import event_files, read_event_file

REPO_ROOT = Path(__file__).resolve().parent.parent
# the command line, which measures one bound in a process of its own with BOUND_FLAG
THROUGHPUT = Path(__file__).resolve().parent / "throughput.py"

LABELS = {"envpool": "EnvPool", "gymnasium": "gymnasium + wrappers", "ale_vector": "ALE vector env"}
ENV_KINDS = tuple(LABELS)  # each has its own bound: the env stepping random actions alone
BOUND_FLAG = "--_bound"  # internal: `throughput.py --_bound KIND JSON` measures one bound
PHASES = ("rollout", "advantages", "update")  # each script logs `time/{phase}` every iteration
PROGRESS_LINE = re.compile(
    r"^step (\d+)/\d+ "
)  # cleanrl_utils/console/progress.py, not on a terminal


def env_id_for(script: str, game: str) -> str:
    """The env id of `game` in `script`: `Breakout-v5` (EnvPool, ALE's vector env) or
    `BreakoutNoFrameskip-v4` (gymnasium)."""
    return f"{game}NoFrameskip-v4" if KINDS[script] == "gymnasium" else f"{game}-v5"


def script_flags(argv: list[str], cls):
    """`argv` (`--extra-args`) read as the scripts read it (tyro): `cls` (a dataclass of some of
    the scripts' flags) with the values given, the defaults for the rest, and the other flags,
    left as they are for the scripts. Raises ValueError, with tyro's message as one line."""
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            return tyro.cli(cls, args=argv, return_unknown_args=True, add_help=False)
    except SystemExit:
        raise ValueError(tyro_error_line(captured.getvalue(), argv, cls)) from None


@dataclass
class NumEnvs:
    """The flag that a `*_multigpu` script's run takes as `--local-num-envs` per process."""

    num_envs: int = Sizes.num_envs


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
class Measurement:
    """One run of one script, as measured."""

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
    (events,) = event_files(run_dir)
    tags = {phase: f"time/{phase}" for phase in PHASES}
    scalars = read_event_file(events, ("charts/SPS", *tags.values())).scalars
    points = [(step, value) for step, _, value in scalars["charts/SPS"]]
    phases = {phase: [value for *_, value in scalars[tag]] for phase, tag in tags.items()}
    return points[0][0], [step / value for step, value in points], points[-1][1], phases


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


def script_command(script: str, args: Args, sizes: Sizes, root: Path = REPO_ROOT) -> list[str]:
    """The command of one measured run of `script`: a `*_multigpu` one under torchrun."""
    iterations = args.burn_in + args.iterations
    path, extra = str(root / "cleanrl" / f"{script}.py"), shlex.split(args.extra_args)
    launcher = [sys.executable, path]
    if script in MULTI_PROCESS:  # the same batch, from nproc processes
        launcher = [sys.executable, "-m", "cleanrl_utils.torchrun", "--standalone"]
        launcher += [f"--nproc_per_node={args.nproc}", path]
        extra = script_flags(extra, NumEnvs)[1]
        extra += ["--local-num-envs", str(sizes.num_envs // args.nproc)]
    command = [
        *launcher,
        "--env-id",
        env_id_for(script, args.game),
        "--checkpoint-every",
        "0",
        *extra,
        "--total-timesteps",
        str(iterations * sizes.batch_size),
    ]
    return command


def run_script(script: str, args: Args, sizes: Sizes, root: Path = REPO_ROOT) -> Measurement:
    command = script_command(script, args, sizes, root)
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
    run = Measurement(
        script, batch_size, times, last_sps, progress, wall, peak, args.burn_in, phases
    )
    print(
        f"  {run.steady_sps:,.1f} steady SPS, {run.wall:.1f} s wall, {run.peak_rss_mib:.0f} MiB",
        flush=True,
    )
    return run


# --- bounds ---------------------------------------------------------------------------------------


def run_bound(kind: str, params: dict) -> dict:
    command = [sys.executable, str(THROUGHPUT), BOUND_FLAG, kind, json.dumps(params)]
    print(f"+ bound {kind}: {json.dumps(params)}", flush=True)
    with tempfile.TemporaryDirectory(prefix="throughput_bound_") as cwd:
        log, *_ = run_logged(command, Path(cwd))
    (line,) = [line for line in log.splitlines() if line.startswith("result: ")]
    result = json.loads(line.removeprefix("result: "))
    print(f"  {result['sps']:,.1f} steps/s", flush=True)
    return result


def bound_params(args: Args, sizes: Sizes) -> dict[str, dict]:
    """The bounds that the chosen scripts need, with their parameters."""
    kinds = {KINDS[s] for s in args.scripts}
    params = {
        kind: {
            "env_id": env_id_for(next(s for s in args.scripts if KINDS[s] == kind), args.game),
            "num_envs": sizes.num_envs,
            "steps": args.bound_steps,
        }
        for kind in ENV_KINDS
        if kind in kinds
    }
    params["compute"] = {"sizes": vars(sizes), "iterations": args.bound_iterations}
    return params
