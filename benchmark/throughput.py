"""Steps per second of the six PPO Atari scripts on this machine, side by side, in one run, next
to what the machine allows at all: the env stepping random actions alone, and the network's
compute alone (the bounds, `benchmark/machine.py`). docs/throughput.md describes the method and
every column.

    python benchmark/throughput.py                          # all six, 1 + 5 iterations each
    python benchmark/throughput.py --scripts ppo_atari_envpool ppo_atari --repeats 3
    python benchmark/throughput.py --scripts ppo_atari_envpool ppo_atari_envpool_multigpu --nproc 2
    python benchmark/throughput.py --game Pong --extra-args="--num-envs 16" --markdown t.md
    git worktree add /tmp/base HEAD~1       # a change's effect: the old code, pair by pair
    python benchmark/throughput.py --scripts ppo_atari_envpool --repeats 3 --baseline /tmp/base

Run it on an otherwise idle machine, and compare numbers only within one run.
"""

from __future__ import annotations

import json
import os
import re
import shlex
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
# this checkout's cleanrl_utils and cleanrl (installed or not), and machine.py beside this file
for folder in (REPO_ROOT, REPO_ROOT / "benchmark"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
from machine import Sizes, machine_line, measure_bound_here  # noqa: E402

from cleanrl_utils.report.events import event_files, read_event_file  # noqa: E402
from cleanrl_utils.report.tables import markdown_table  # noqa: E402

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
KINDS = SCRIPTS | MULTI_PROCESS
LABELS = {"envpool": "EnvPool", "gymnasium": "gymnasium + wrappers", "ale_vector": "ALE vector env"}
ENV_KINDS = tuple(LABELS)  # each has its own bound: the env stepping random actions alone
BOUND_FLAG = "--_bound"  # internal: `throughput.py --_bound KIND JSON` measures one bound
PHASES = ("rollout", "advantages", "update")  # each script logs `time/{phase}` every iteration
PROGRESS_LINE = re.compile(r"^step (\d+)/\d+ ")  # cleanrl_utils/progress.py, not on a terminal


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


class UsageError(Exception):
    """Bad command-line input: reported as one `error:` line, exit code 2, before any work."""


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


def without_flag(argv: list[str], name: str) -> list[str]:
    """`argv` without `--name` and its value, however spelled."""
    spellings, out, skip = (f"--{name}", f"--{name.replace('-', '_')}"), [], False
    for token in argv:
        key, eq, _ = token.partition("=")
        if skip:
            skip = False
        elif key in spellings:
            skip = not eq
        else:
            out.append(token)
    return out


def sizes_from_argv(argv: list[str]) -> Sizes:
    """The sizes that `argv` (`--extra-args`) gives the scripts; the defaults for the rest."""
    defaults = Sizes()
    names = ("num_envs", "num_steps", "num_minibatches", "update_epochs")
    return Sizes(
        **{
            name: flag_value(argv, name.replace("_", "-"), getattr(defaults, name))
            for name in names
        }
    )


def script_name(text: str) -> str:
    """`ppo_atari`, `ppo_atari.py` and `cleanrl/ppo_atari.py` all name `ppo_atari`."""
    name = Path(text).name.removesuffix(".py")
    if name not in KINDS:
        raise UsageError(f"unknown script {text!r}; the scripts are: {', '.join(KINDS)}")
    return name


def env_id_for(script: str, game: str) -> str:
    """The env id of `game` in `script`: `Breakout-v5` (EnvPool, ALE's vector env) or
    `BreakoutNoFrameskip-v4` (gymnasium)."""
    return f"{game}NoFrameskip-v4" if KINDS[script] == "gymnasium" else f"{game}-v5"


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
    sizes = sizes_from_argv(extra)
    for name, value in vars(sizes).items():
        if value < 1:
            raise UsageError(f"--{name.replace('_', '-')} in --extra-args must be at least 1")
    if args.nproc < 1 or sizes.num_envs % args.nproc:
        raise UsageError(f"--nproc {args.nproc} does not divide the {sizes.num_envs} envs")
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
        extra = without_flag(extra, "num-envs")
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


# --- the report -----------------------------------------------------------------------------------


def settings_line(args: Args, sizes: Sizes) -> str:
    extra = f"; extra args: `{args.extra_args}`" if args.extra_args else ""
    if any(s in MULTI_PROCESS for s in args.scripts):
        extra += f"; the *_multigpu scripts on {args.nproc} processes (torchrun), the same batch"
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
    ("script", "l"),
    ("steady SPS", "r"),
    ("spread", "r"),
    ("s/iter", "r"),
    ("rollout + adv. + update", "r"),
    ("1st iter +", "r"),
    ("startup", "r"),
    ("peak MiB", "r"),
    ("own SPS", "r"),
    ("outside SPS", "r"),
    ("own/outside", "r"),
    ("of bound", "r"),
]


@dataclass
class Summary:
    """The medians over the repeats."""

    script_rows: list[list[str]]
    bound_rows: list[list[str]]
    steady_sps: dict[str, float]
    bounds: dict[str, float]  # "envpool", "gymnasium", "compute", and the scripts' bounds


def summarize(runs: dict[str, list[Measurement]], bound_runs: dict[str, list[dict]]) -> Summary:
    def med(values):
        return statistics.median(values)

    bounds = {kind: med([r["sps"] for r in results]) for kind, results in bound_runs.items()}
    for kind in ENV_KINDS:
        if kind in bounds and "compute" in bounds:
            bounds[f"{kind} + compute"] = in_turn(bounds[kind], bounds["compute"])
    script_rows, steady = [], {}
    for script, results in runs.items():
        sps, lo, hi = median_spread([r.steady_sps for r in results])
        steady[script] = sps
        own, outside = med([r.last_sps for r in results]), med([r.outside_sps for r in results])
        bound = bounds.get(f"{KINDS[results[0].script]} + compute")
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
    for kind in ENV_KINDS:
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
    for kind in ENV_KINDS:
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
    """A plain-text table with aligned columns; `align` holds `l` or `r` per column."""
    widths = [max(len(str(x)) for x in column) for column in zip(header, *rows)]
    specs = ["<" if a == "l" else ">" for a in align]

    def line(cells):
        return "  ".join(f"{c:{a}{w}}" for c, a, w in zip(cells, specs, widths)).rstrip()

    return "\n".join([line(header), "  ".join("-" * w for w in widths), *map(line, rows)])


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
BOUND_HEADER = (["bound", "steps/s", "how"], ["l", "r", "l"])


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
        markdown_table(header, rows, align).rstrip("\n"),
    ]
    if summary.bound_rows:
        rows = [row + [""] * (3 - len(row)) for row in summary.bound_rows]
        parts.append(markdown_table(BOUND_HEADER[0], rows, BOUND_HEADER[1]).rstrip("\n"))
    parts.append(LEGEND)
    return "<!-- written by benchmark/throughput.py -->\n" + "\n\n".join(parts) + "\n"


def baseline_ratios(runs: dict[str, list[Measurement]], scripts: list[str]) -> str:
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
    runs: dict[str, list[Measurement]] = {}
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
