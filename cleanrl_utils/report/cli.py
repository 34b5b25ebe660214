"""Tables and plots from the TensorBoard logs of finished runs, offline, in the formats users know.

    python -m cleanrl_utils.report runs/ --output-dir report/ --compare-published

Reads only the scalars it needs (`charts/episodic_return`, `charts/SPS`, the steps and wall
times) straight from the event files, groups the runs by script, env id and seed (from
`config.json`, else from the run name `{env_id}__{exp_name}__{seed}__{unix_time}`), and writes
markdown tables, learning-curve PNGs and a per-run CSV under `--output-dir`. Anything odd about a
run (still running, stopped early, no finished game, a corrupt event file, mixed step budgets)
becomes a note in the report, never a traceback. No run at all to read is an `error:` line
(exit code 2) and writes nothing; Ctrl-C is one line and exit code 130.
"""

from __future__ import annotations

import csv
import importlib.util
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import tyro

from cleanrl_utils import checks
from cleanrl_utils.checks import check_output_folder, fail
from cleanrl_utils.exits import DISK_EXIT, FAILED, CtrlCExit, cause
from cleanrl_utils.report.cells import Report
from cleanrl_utils.report.options import DEFAULT_RUNS, Args
from cleanrl_utils.report.plots import plot_set, without_games
from cleanrl_utils.report.runlogs import find_run_dirs, load_runs
from cleanrl_utils.report.sections import (
    aggregate_section,
    comparison_section,
    describe_set,
    returns_table,
    runs_table,
    runtimes_table,
    speed_table,
    sps_table,
    summary,
    windows_section,
)
from cleanrl_utils.runs import file_name


@dataclass
class Command(Args):
    """The flags, and the run folders named without `--runs`."""

    folders: Annotated[
        tuple[str, ...],
        tyro.conf.Positional,
        tyro.conf.arg(metavar="[FOLDER ...]", help_behavior_hint="(default: runs)"),
    ] = ()
    """run folders, or folders searched for them, as `--runs` takes them (both add up)"""

    def run_folders(self) -> tuple[str, ...]:
        """The positional folders, then those of `--runs`; `runs` when none is named."""
        return (*self.folders, *self.runs) or DEFAULT_RUNS


def main(argv: list[str] | None = None) -> int:
    """The command line; returns the exit code: 0; 1 when no run could be reported (the notes
    say why). Ctrl-C exits with code 130. Bad input (no run at all among them) exits with code 2."""
    with CtrlCExit("interrupted (Ctrl-C): nothing written"):
        report = read_report(parse_args(argv))
    out = report.args.output_dir
    with CtrlCExit(f"interrupted (Ctrl-C): the files in {out}/ may be incomplete"):
        try:
            fragments = write_report(report)
        except OSError as exc:  # (a full disk, a folder made read-only since the check)
            fail(f"--output-dir {out}: cannot write the report: {cause(exc)}", DISK_EXIT)
        print(fragments["returns.md"])
        print("notes:")
        print(fragments["notes.md"])
        print(f"report written to {Path(out) / 'report.md'}")
    return 0 if report.cells else FAILED


def parse_args(argv: list[str] | None) -> Command:
    """The flags, checked: a bad value is one `error:` line and exit code 2."""
    args = checks.parse_args(
        Command, argv, prog="python -m cleanrl_utils.report", description=__doc__.split("\n\n")[0]
    )
    for path in args.run_folders():
        if not Path(path).is_dir():
            fail(f"{'run folder' if path in args.folders else '--runs'}: `{path}` is not a folder")
    if args.last_n < 1:
        fail(f"--last-n must be at least 1, got {args.last_n}")
    if args.curve_points < 2:
        fail(f"--curve-points must be at least 2, got {args.curve_points}")
    if args.bootstrap_samples < 1:
        fail(f"--bootstrap-samples must be at least 1, got {args.bootstrap_samples}")
    if not 0 < args.confidence < 1:
        fail(f"--confidence must be between 0 and 1, got {args.confidence}")
    check_output_folder(args.output_dir, "--output-dir")  # (exit code 74)
    return args


def read_report(args: Command) -> Report:
    """Every run under the folders, read; no run folder at all is an `error:` line (exit code
    2) before anything is written."""
    paths = args.run_folders()
    dirs, notes = find_run_dirs(paths)
    if not dirs:
        folders = ", ".join(f"`{path}`" for path in paths)
        fail(f"no runs under {folders} (no folder with an event file or a config.json)")
    runs = load_runs(dirs, args.running_minutes, time.time())
    return Report(args, runs, notes)


def write_report(report: Report) -> dict[str, str]:
    """Write every output file under `--output-dir`; returns {file name: markdown} of the
    markdown files."""
    args = report.args
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("curves_*.png"):
        old.unlink()
    fragments: dict[str, str] = {}
    last_n = f"the mean of its last {args.last_n} games (fewer when it has fewer)"
    returns = (
        f"Episodic return (the real game score over all lives): mean ± std over seeds of each "
        f"run's final return, {last_n}. (n=k): a cell with fewer seeds than the others.\n\n"
    )
    runtimes = "Minutes per run (wall clock from the first to the last event), mean over seeds.\n\n"
    sps = "Steps per second (each run's last `charts/SPS`, its average over the run), mean over seeds.\n\n"
    curves = (
        f"Return against env steps: for each run the running mean of its last {args.last_n} "
        "games, then the mean over seeds (line) ± one std (band), over the steps every seed "
        "covers; the last point of a curve is the table's cell.\n\n"
    )
    per_script: dict[str, list[str]] = defaultdict(list)
    have_matplotlib = importlib.util.find_spec("matplotlib") is not None
    if not have_matplotlib and report.cells:
        report.notes.append('no plots: matplotlib is not installed (`pip install -e ".[report]"`)')
    plotted: set[str] = set()
    set_names = curves_names(report)
    for scripts, env_ids in report.sets:
        slug = set_names[tuple(scripts)]
        heading = f"### {', '.join(scripts)}\n\n{describe_set(report, scripts, env_ids)}\n\n"
        returns += heading + returns_table(report, scripts, env_ids) + "\n"
        runtimes += heading + runtimes_table(report, scripts, env_ids) + "\n"
        sps += heading + sps_table(report, scripts, env_ids) + "\n"
        images = [(f"curves_{slug}.png", False)]
        if args.wall_clock:
            images.append((f"curves_{slug}_wallclock.png", True))
        curves += heading
        no_game = [
            f"{env_id} ({', '.join(missing)})"
            for env_id in env_ids
            if (missing := without_games(report, scripts, env_id))
        ]
        if no_game:
            curves += f"No finished game, so no curve: {'; '.join(no_game)}.\n\n"
        for name, wall in images:
            if not have_matplotlib:
                continue
            try:
                plot_set(report, scripts, env_ids, out / name, wall)
            except Exception as exc:  # a plot must never take the tables down with it
                report.notes.append(f"plot `{name}` failed: {type(exc).__name__}: {exc}")
                continue
            curves += f"![{', '.join(scripts)}: learning curves]({name})\n\n"
            plotted.add(name)
        for script in scripts:
            envs = [e for e in env_ids if (script, e) in report.cells]
            per_script[script] += [
                f"Final return ({describe_set(report, [script], envs)}):\n\n",
                returns_table(report, [script], envs),
                "\nMinutes per run and steps per second, mean over seeds:\n\n",
                speed_table(report, script, envs),
            ]
            if f"curves_{slug}.png" in plotted:
                per_script[script].append(f"\n![learning curves](curves_{slug}.png)\n")
    if not report.cells:
        empty = "No finished runs to report (see the notes).\n"
        returns += empty
        runtimes += empty
        sps += empty
        curves += empty
    fragments["returns.md"] = returns
    fragments["runtimes.md"] = runtimes + "\n" + sps
    fragments["curves.md"] = curves
    fragments["aggregate.md"] = aggregate_section(report) if report.cells else "No runs.\n"
    if args.compare_published:
        fragments["comparison.md"] = comparison_section(report) if report.cells else "No runs.\n"
    if args.windows > 0:
        fragments["windows.md"] = windows_section(report) if report.cells else "No runs.\n"
    fragments["runs.md"] = runs_table(report) if report.runs else "No runs found.\n"
    fragments["notes.md"] = (
        "".join(f"- {note}\n" for note in report.notes)
        if report.notes
        else "None: every run read cleanly.\n"
    )
    page = [f"# {args.title}\n\n", summary(report), "\n"]
    sections = [
        ("Returns", "returns.md"),
        ("Learning curves", "curves.md"),
        ("Scores per window of steps", "windows.md"),
        ("Runtimes and speed", "runtimes.md"),
        ("Human-normalised aggregate", "aggregate.md"),
        ("Against the published numbers", "comparison.md"),
        ("Notes", "notes.md"),
        ("Runs", "runs.md"),
    ]
    for title, name in sections:
        if name in fragments:
            page += [f"## {title}\n\n", fragments[name].strip() + "\n\n"]
    fragments["report.md"] = "".join(page).rstrip() + "\n"
    for script, parts in per_script.items():
        stem = file_name(script)  # an exp name from a config.json, never a path
        name = f"{stem}.md" if f"{stem}.md" not in fragments else f"script_{stem}.md"
        fragments[name] = (
            f"# `{script}`: benchmark\n\n{summary(report, script)}\n"
            + "".join(parts)
            + "\nAll scripts, the notes and every run: [the full report](report.md).\n"
        )

    for name, text in fragments.items():
        (out / name).write_text(text)
    write_csv(report, out / "runs.csv")
    return fragments


def curves_names(report: Report) -> dict[tuple[str, ...], str]:
    """Each script set's name in its curves' file, `curves_{name}.png`, after what it shows:
    its one exp; the training script all its exps ran (`ppo_atari_envpool`: a tuner's trials);
    else its exp names (`a+b`). Each a file name of its own, never a path."""
    names: dict[tuple[str, ...], str] = {}
    for scripts, env_ids in report.sets:
        runs = [run for cell in report.cells_of(scripts, env_ids) for run in cell.runs]
        files = {run.script_file for run in runs}
        if len(scripts) > 1 and len(files) == 1 and None not in files:
            shows = sorted(files)
        else:
            shows = scripts if len(scripts) <= 3 else [*scripts[:2], f"{len(scripts) - 2}-more"]
        name = "+".join(map(file_name, shows))
        names[tuple(scripts)] = name
        taken = list(names.values())
        if taken.count(name) > 1:  # (two sets of one script, on other games)
            names[tuple(scripts)] = f"{name}_{taken.count(name)}"
    return names


def write_csv(report: Report, path: Path) -> None:
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(
            [
                "run",
                "script",
                "env_id",
                "seed",
                "steps",
                "budget",
                "games",
                "final_return",
                "runtime_minutes",
                "sps",
                "status",
                "path",
            ]
        )
        for run in report.runs:
            final = run.final_return(report.args.last_n)
            writer.writerow(
                [
                    run.name,
                    run.script,
                    run.env_id,
                    run.seed,
                    run.last_step,
                    run.budget,
                    len(run.returns),
                    "" if final is None else f"{final:.6g}",
                    "" if run.runtime_s is None else f"{run.runtime_s / 60:.4f}",
                    "" if run.sps is None else f"{run.sps:.2f}",
                    run.status,
                    run.where,
                ]
            )
