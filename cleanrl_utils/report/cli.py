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
import json
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import tyro

from cleanrl_utils.checks import args as command_line
from cleanrl_utils.checks.paths import check_output_folder
from cleanrl_utils.console.errors import DISK_EXIT, FAILED, entry_point, fail
from cleanrl_utils.console.output import cause
from cleanrl_utils.files.run_names import file_name
from cleanrl_utils.report.aggregate import aggregate_markdown, compute, explanation
from cleanrl_utils.report.cells import Benchmark, Report
from cleanrl_utils.report.figures import PLOT_DPI, write_figures
from cleanrl_utils.report.loading import find_run_dirs, load_runs
from cleanrl_utils.report.options import DEFAULT_RUNS, Args
from cleanrl_utils.report.paper import (
    aggregate_tex,
    differing_arguments,
    evaluation_md,
    software,
)
from cleanrl_utils.report.plots import plot_set, without_games
from cleanrl_utils.report.references import references_bib
from cleanrl_utils.report.sections import (
    comparisons,
    describe_set,
    returns_table,
    runs_table,
    runtimes_table,
    speed_table,
    sps_table,
    summary,
    windows_section,
)
from cleanrl_utils.report.selection import Selection, parse_day, unmatched
from cleanrl_utils.report.style import FIGURE_FORMATS, save_figure, score_text
from cleanrl_utils.report.suite import suite_estimates, suite_figure, suite_markdown
from cleanrl_utils.report.variants import apply_labels, experiment_key, name_variants, parse_labels


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


@entry_point()
def main(argv: list[str] | None = None) -> int:
    """The command line; returns the exit code: 0; 1 when no run could be reported (the notes
    say why). Ctrl-C exits with code 130. Bad input (no run at all among them) exits with code 2."""
    with entry_point("interrupted (Ctrl-C): nothing written"):
        report = read_report(parse_args(argv))
    out = report.args.output_dir
    with entry_point(f"interrupted (Ctrl-C): the files in {out}/ may be incomplete"):
        try:
            fragments = write_report(report)
        except OSError as exc:  # (a full disk, a folder made read-only since the check)
            fail(f"--output-dir {out}: cannot write the report: {cause(exc)}", DISK_EXIT)
        print(fragments["returns.md"])
        for protocol, (estimates, _) in report.suites.items():
            for e in estimates:
                print(
                    f"protocol `{protocol}`: {e.method}: the 57-game median estimated by {e.name}: "
                    f"{e.text()} (an extrapolation at small budgets: see aggregate.md)"
                )
        for protocol, (agg, _) in report.aggregates.items():
            if agg is None:
                print(skipped_aggregate(protocol, report.args))
        print("notes:")
        print(fragments["notes.md"])
        print(report.protocols_note())
        print(f"report written to {Path(out) / 'report.md'}")
    return 0 if report.cells else FAILED


def parse_args(argv: list[str] | None) -> Command:
    """The flags, checked: a bad value is one `error:` line and exit code 2."""
    args = command_line.parse_args(
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
    if args.curve_min_games < 1:
        fail(f"--curve-min-games must be at least 1, got {args.curve_min_games}")
    if not any(figure_formats(args)):
        fail(f"--figure-format: give one or more of {', '.join(FIGURE_FORMATS)}, comma-separated")
    if unknown := sorted(set(figure_formats(args)) - set(FIGURE_FORMATS) - {""}):
        fail(
            f"--figure-format {args.figure_format}: unknown format {', '.join(unknown)} "
            f"(known: {', '.join(FIGURE_FORMATS)})"
        )
    for flag, values in (
        ("--sweep", args.sweep),
        ("--exp-name", args.exp_name),
        ("--env-id", args.env_id),
    ):
        if given_empty(flag, argv, values):
            fail(f"{flag} needs a value (given with none, it would select nothing)")
    if args.since is not None and parse_day(args.since) is None:
        fail(f"--since: `{args.since}` is not a day (YYYY-MM-DD)")
    check_output_folder(args.output_dir, "--output-dir")  # (exit code 74)
    return args


def figure_formats(args: Args) -> list[str]:
    """`--figure-format png,pdf` as ["png", "pdf"], each once, in the order given."""
    formats = (f.strip().lower() for f in args.figure_format.split(","))
    return list(dict.fromkeys(f for f in formats if f))


def given_empty(flag: str, argv: list[str] | None, values: tuple) -> bool:
    """Whether a flag that takes values was given with none (`--exp-name` at the end of a
    command): tyro reads it as not given, which would select every run."""
    argv = sys.argv[1:] if argv is None else argv
    return not values and any(a == flag or a == flag.replace("-", "_") for a in argv)


def read_report(args: Command) -> Benchmark:
    """Every run under the folders that the selection flags keep, read; no run folder at all,
    or none selected, is an `error:` line (exit code 2) before anything is written."""
    paths = args.run_folders()
    dirs, notes = find_run_dirs(paths)
    folders = ", ".join(f"`{path}`" for path in paths)
    if not dirs:
        fail(f"no runs under {folders} (no folder with an event file or a config.json)")
    selection = Selection.of(args)
    runs = load_runs(dirs, args.running_minutes, time.time(), selection)
    if selection is not None:
        if problem := unmatched(selection, runs):
            fail(problem)
        kept = [run for run in runs if run.status != "unselected"]
        if not kept:
            fail(f"no runs under {folders} match `{selection.flags()}` (of {len(runs)} found)")
        notes.append(f"`{selection.flags()}` selected {len(kept)} of the {len(runs)} runs found")
        runs = kept
    notes += name_variants(runs, args.include_unfinished)
    labels = parse_labels(args.label, runs)
    if isinstance(labels, str):
        fail(labels)
    apply_labels(runs, labels)
    columns: dict[str, set] = defaultdict(set)
    for run in runs:
        if run.script is not None:
            columns[run.script].add((run.exp_name, json.dumps(experiment_key(run), default=str)))
    if clash := next((name for name, of in columns.items() if len(of) > 1), None):
        fail(f"--label: two different experiments would both be named `{clash}`")
    bench = Benchmark(args, runs, notes)
    bench.aggregates = {part.protocol: compute(part) for part in bench.parts if part.cells}
    bench.suites = {part.protocol: suite_estimates(part) for part in bench.parts if part.cells}
    for protocol, (_, lines) in bench.suites.items():
        bench.notes += [f"protocol `{protocol}`: {line}" for line in lines]
    for protocol, (agg, _) in bench.aggregates.items():
        if agg is None:  # said, not left to be noticed missing
            bench.notes.append(skipped_aggregate(protocol, args))
    return bench


def skipped_aggregate(protocol: str, args: Args) -> str:
    """The line that says a protocol has no aggregate, and why."""
    return (
        f"protocol `{protocol}`: no human-normalised aggregate (IQM, median, mean, optimality "
        f"gap, profiles, probability of improvement): fewer than `--aggregate-min-games` "
        f"{args.aggregate_min_games} games with random and human scores that every script ran "
        "(aggregate.md says which)"
    )


def protocol_suffix(report: Report) -> str:
    """What the file names of a protocol's figures end in: nothing for the published protocol,
    `_{protocol}` for another."""
    return "" if report.protocol == "published" else f"_{file_name(report.protocol)}"


def write_report(bench: Benchmark) -> dict[str, str]:
    """Write every output file under `--output-dir`; returns {file name: markdown} of the
    markdown files."""
    args = bench.args
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    formats = figure_formats(args)
    for kind in ("curves_", "estimates", "profiles", "improvement", "atari5"):
        for fmt in FIGURE_FORMATS:
            for old in out.glob(f"{kind}*.{fmt}"):
                old.unlink()
    fragments: dict[str, str] = {}
    last_n = score_text(bench.reported, args.last_n)
    returns = (
        f"Episodic return (the real game score over all lives): mean ± std over seeds of each "
        f"run's final return, {last_n}. (n=k): a cell with fewer seeds than the others.\n\n"
    )
    runtimes = "Minutes per run (wall clock from the first to the last event), mean over seeds.\n\n"
    sps = "Steps per second (each run's last `charts/SPS`, its average over the run), mean over seeds.\n\n"
    band = (
        f"the {100 * args.confidence:g}% bootstrap interval of the mean"
        if args.curve_band == "ci"
        else "± one std"
    )
    curves = (
        f"Return against env steps: for each run the running mean of its last {args.last_n} "
        f"games, then the mean over seeds (line) with a band ({band}), over the steps every seed "
        "covers; the last point of a curve is the table's cell. A curve with a seed of fewer "
        f"than {args.curve_min_games} finished games is dashed.\n\n"
    )
    per_script: dict[str, list[str]] = defaultdict(list)
    have_matplotlib = importlib.util.find_spec("matplotlib") is not None
    if not have_matplotlib and bench.cells:
        bench.notes.append('no plots: matplotlib is not installed (`pip install -e ".[report]"`)')
    plotted: set[str] = set()
    set_names = curves_names(bench)
    for report, scripts, env_ids in bench.sets():
        slug = set_names[report.protocol, tuple(scripts)]
        protocol = f" (protocol `{report.protocol}`)"
        heading = (
            f"### {', '.join(scripts)}{protocol}\n\n{describe_set(report, scripts, env_ids)}\n\n"
        )
        returns += heading + returns_table(report, scripts, env_ids) + "\n"
        runtimes += heading + runtimes_table(report, scripts, env_ids) + "\n"
        sps += heading + sps_table(report, scripts, env_ids) + "\n"
        images = [(f"curves_{slug}.{formats[0]}", False)]
        if args.wall_clock:
            images.append((f"curves_{slug}_wallclock.{formats[0]}", True))
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
                plot_set(report, scripts, env_ids, out / name, wall, formats)
            except Exception as exc:  # a plot must never take the tables down with it
                bench.notes.append(f"plot `{name}` failed: {type(exc).__name__}: {exc}")
                continue
            curves += f"![{', '.join(scripts)}: learning curves]({name})\n\n"
            plotted.add(name)
        for script in scripts:
            envs = [e for e in env_ids if (script, e) in report.cells]
            per_script[script] += [
                f"Final return{protocol} ({describe_set(report, [script], envs)}):\n\n",
                returns_table(report, [script], envs),
                "\nMinutes per run and steps per second, mean over seeds:\n\n",
                speed_table(report, script, envs),
            ]
            if f"curves_{slug}.{formats[0]}" in plotted:
                per_script[script].append(f"\n![learning curves](curves_{slug}.{formats[0]})\n")
    if not bench.cells:
        empty = "No finished runs to report (see the notes).\n"
        returns += empty
        runtimes += empty
        sps += empty
        curves += empty
    fragments["returns.md"] = returns
    fragments["runtimes.md"] = runtimes + "\n" + sps
    fragments["curves.md"] = curves
    if not bench.aggregates:
        bench.aggregates = {part.protocol: compute(part) for part in bench.parts if part.cells}
    if not bench.suites:
        bench.suites = {part.protocol: suite_estimates(part) for part in bench.parts if part.cells}
    aggregate = explanation(args, last_n)
    for report in (part for part in bench.parts if part.cells):
        agg, lines = bench.aggregates[report.protocol]
        images = {}
        if agg is not None and have_matplotlib:
            images = write_figures(agg, out, protocol_suffix(report), bench.notes, formats)
        aggregate += f"### Protocol `{report.protocol}`\n\n"
        aggregate += aggregate_markdown(agg, lines, images) + "\n"
        estimates, missing = bench.suites[report.protocol]
        aggregate += suite_markdown(report, estimates, missing)
        if estimates and have_matplotlib:
            stem = f"atari5{protocol_suffix(report)}"
            try:
                fig = suite_figure(estimates, report.colors, report.protocol)
                try:
                    name = save_figure(fig, out, stem, formats, PLOT_DPI)
                finally:
                    import matplotlib.pyplot as plt

                    plt.close(fig)
                aggregate += f"![the 57-game median, estimated]({name})\n\n"
            except Exception as exc:  # a figure never takes the tables down with it
                bench.notes.append(f"plot `{stem}` failed: {type(exc).__name__}: {exc}")
    fragments["aggregate.md"] = aggregate if bench.cells else "No runs.\n"
    if args.compare_published:
        fragments["comparison.md"] = comparisons(bench) if bench.cells else "No runs.\n"
    if args.windows > 0:
        fragments["windows.md"] = windows_section(bench) if bench.cells else "No runs.\n"
    fragments["runs.md"] = runs_table(bench) if bench.runs else "No runs found.\n"
    if bench.cells:  # the paper kit
        fragments["evaluation.md"] = evaluation_md(bench)
        fragments["variants.md"] = differing_arguments(bench)
        fragments["software.md"] = software(bench)
    fragments["notes.md"] = (
        "".join(f"- {note}\n" for note in bench.notes)
        if bench.notes
        else "None: every run read cleanly.\n"
    )
    page = [f"# {args.title}\n\n", summary(bench), "\n"]
    sections = [
        ("Returns", "returns.md"),
        ("Learning curves", "curves.md"),
        ("Scores per window of steps", "windows.md"),
        ("Runtimes and speed", "runtimes.md"),
        ("Human-normalised aggregate", "aggregate.md"),
        ("What differs between the methods", "variants.md"),
        ("Software and devices", "software.md"),
        ("The evaluation paragraph", "evaluation.md"),
        ("Against the published numbers", "comparison.md"),
        ("Notes", "notes.md"),
        ("Runs", "runs.md"),
    ]
    for title, name in sections:
        if fragments.get(name):
            protocols = bench.protocols_note() + "\n" if name == "notes.md" else ""
            page += [f"## {title}\n\n", protocols, fragments[name].strip() + "\n\n"]
    fragments["report.md"] = "".join(page).rstrip() + "\n"
    for script, parts in per_script.items():
        stem = file_name(script)  # an exp name from a config.json, never a path
        name = f"{stem}.md" if f"{stem}.md" not in fragments else f"script_{stem}.md"
        fragments[name] = (
            f"# `{script}`: benchmark\n\n{summary(bench, script)}\n"
            + "".join(parts)
            + "\nAll scripts, the notes and every run: [the full report](report.md).\n"
        )

    if not fragments.get("variants.md"):
        fragments.pop("variants.md", None)
    if bench.cells:
        fragments["aggregate.tex"] = aggregate_tex(bench)
        fragments["references.bib"] = references_bib(
            any(estimates for estimates, _ in bench.suites.values())
        )
    for name, text in fragments.items():
        (out / name).write_text(text)
    write_csv(bench, out / "runs.csv")
    return fragments


def curves_names(bench: Benchmark) -> dict[tuple[str, tuple[str, ...]], str]:
    """Each script set's name in its curves' file, `curves_{name}.png`, after what it shows:
    its one exp; the training script all its exps ran (`ppo_atari_envpool`: a tuner's trials);
    else its exp names (`a+b`); a protocol other than the published one at its end
    (`_machado`). Each a file name of its own, never a path."""
    names: dict[tuple[str, tuple[str, ...]], str] = {}
    for report, scripts, env_ids in bench.sets():
        runs = [run for cell in report.cells_of(scripts, env_ids) for run in cell.runs]
        files = {run.script_file for run in runs}
        if len(scripts) > 1 and len(files) == 1 and None not in files:
            shows = sorted(files)
        else:
            shows = scripts if len(scripts) <= 3 else [*scripts[:2], f"{len(scripts) - 2}-more"]
        name = "+".join(map(file_name, shows)) + protocol_suffix(report)
        key = report.protocol, tuple(scripts)
        names[key] = name
        taken = list(names.values())
        if taken.count(name) > 1:  # (two sets of one script, on other games)
            names[key] = f"{name}_{taken.count(name)}"
    return names


def write_csv(report: Benchmark, path: Path) -> None:
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
                "protocol",
                "sweep",
                "path",
                "exp_name",  # (`script` is its column: the exp name, a variant or a label)
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
                    str(run.protocol.get("name")),
                    run.sweep or "",
                    run.where,
                    run.exp_name or "",
                ]
            )
