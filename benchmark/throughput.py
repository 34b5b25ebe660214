"""Steps per second of the PPO Atari scripts on this machine, side by side, in one run, next
to what the machine allows at all: the env stepping random actions alone, and the network's
compute alone (the bounds, `benchmark/machine.py`). docs/throughput.md describes the method and
every column.

    python benchmark/throughput.py                          # those of one process, 1 + 5 iterations
    python benchmark/throughput.py --scripts ppo_atari_envpool ppo_atari --repeats 3
    python benchmark/throughput.py --scripts ppo_atari_envpool ppo_atari_envpool_multigpu --nproc 2
    python benchmark/throughput.py --game Pong --extra-args="--num-envs 16" --markdown t.md
    git worktree add /tmp/base HEAD~1       # a change's effect: the old code, pair by pair
    python benchmark/throughput.py --scripts ppo_atari_envpool --repeats 3 --baseline /tmp/base

Run it on an otherwise idle machine, and compare numbers only within one run.
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

from machine import Sizes, machine_line, measure_bound_here
from throughput_args import KINDS, Args
from throughput_measure import (
    BOUND_FLAG,
    Measurement,
    RunFailed,
    bound_params,
    run_bound,
    run_script,
    script_flags,
)
from throughput_report import (
    Summary,
    baseline_ratios,
    markdown_report,
    report,
    settings_line,
    summarize,
)

from cleanrl_utils.checks.args import parse_args as parse_flags
from cleanrl_utils.console.errors import RunError, entry_point, fail


def script_name(text: str) -> str:
    """`ppo_atari`, `ppo_atari.py` and `cleanrl/ppo_atari.py` all name `ppo_atari`."""
    name = Path(text).name.removesuffix(".py")
    if name not in KINDS:
        raise RunError(f"unknown script {text!r}; the scripts are: {', '.join(KINDS)}")
    return name


def parse_args(argv: list[str]) -> tuple[Args, Sizes]:
    """The command line, checked; bad input raises `RunError` (one `error:` line, exit code 2,
    before any work)."""
    args = parse_flags(Args, argv)  # (a malformed command line: one `error:` line, exit 2)
    if not args.scripts:
        raise RunError("--scripts needs at least one script")
    args.scripts = [script_name(s) for s in args.scripts]
    if len(set(args.scripts)) < len(args.scripts):
        raise RunError(f"--scripts names a script twice: {' '.join(args.scripts)}")
    if not re.fullmatch(r"[A-Z][A-Za-z0-9]*", args.game) or "NoFrameskip" in args.game:
        raise RunError(f"--game takes a game's name like Breakout or Pong, got {args.game!r}")
    for name in ("iterations", "burn_in", "repeats", "bound_steps", "bound_iterations"):
        if getattr(args, name) < 1:
            flag = "--" + name.replace("_", "-")
            raise RunError(f"{flag} must be at least 1, got {getattr(args, name)}")
    try:
        extra = shlex.split(args.extra_args)
    except ValueError as e:
        raise RunError(f"--extra-args cannot be split into flags: {e}") from None
    try:
        sizes, _ = script_flags(extra, Sizes)
    except ValueError as e:
        raise RunError(f"--extra-args: {e}") from None
    for name, value in vars(sizes).items():
        if value < 1:
            raise RunError(f"--{name.replace('_', '-')} in --extra-args must be at least 1")
    if args.nproc < 1 or sizes.num_envs % args.nproc:
        raise RunError(f"--nproc {args.nproc} does not divide the {sizes.num_envs} envs")
    if sizes.minibatch_size < 1:
        raise RunError("--num-minibatches in --extra-args is larger than the batch")
    if args.baseline is not None:
        missing = [
            s for s in args.scripts if not (Path(args.baseline) / "cleanrl" / f"{s}.py").is_file()
        ]
        if missing:
            raise RunError(f"--baseline {args.baseline} has no cleanrl/{missing[0]}.py")
    return args, sizes


@entry_point()
def main(argv: list[str] | None = None) -> Summary | None:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == [BOUND_FLAG]:
        measure_bound_here(*argv[1:])
        return None
    args, sizes = parse_args(argv)  # bad input: one `error:` line, exit code 2
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
        fail(str(e), 1)
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
