"""The markdown sections of a report: the returns, runtimes and speed tables of each script set,
the per-run table, the comparison with the published numbers, the scores per window of steps,
and the summary at the top of each page (the aggregates: `aggregate.py`)."""

from __future__ import annotations

import time

import numpy as np

from cleanrl_utils.report.cells import Benchmark, Report
from cleanrl_utils.report.stats import load_published, mean_std, window_means
from cleanrl_utils.report.tables import fmt, fmt_steps, markdown_table, plural


def _seed_counts(report: Report, scripts, env_ids, attr: str = "runs") -> int | None:
    """The most seeds of any cell (its `runs`, or its `finals`: runs with a game)."""
    cells = report.cells_of(scripts, env_ids)
    return max((len(getattr(cell, attr)) for cell in cells), default=None)


def returns_cell(report: Report, script: str, env_id: str, usual_n: int | None) -> str:
    cell = report.cells.get((script, env_id))
    if cell is None:
        return ""
    if not cell.finals:
        return "no finished game"
    mean, std = mean_std(cell.finals)
    text = f"{mean:.2f} ± {std:.2f}"
    return text if len(cell.finals) == usual_n else f"{text} (n={len(cell.finals)})"


def returns_table(report: Report, scripts: list[str], env_ids: list[str]) -> str:
    usual = _seed_counts(report, scripts, env_ids, "finals")
    rows = [[e] + [returns_cell(report, s, e, usual) for s in scripts] for e in env_ids]
    return markdown_table(["env"] + scripts, rows)


def _per_cell_mean(report: Report, scripts, env_ids, value) -> str:
    rows = []
    for env_id in env_ids:
        row = [env_id]
        for script in scripts:
            cell = report.cells.get((script, env_id))
            values = [value(r) for r in cell.runs] if cell else []
            values = [v for v in values if v is not None]
            row.append(fmt(float(np.mean(values))) if values else ("" if cell is None else "n/a"))
        rows.append(row)
    return markdown_table(["env"] + scripts, rows)


def runtimes_table(report: Report, scripts, env_ids) -> str:
    return _per_cell_mean(
        report, scripts, env_ids, lambda r: r.runtime_s / 60 if r.runtime_s is not None else None
    )


def sps_table(report: Report, scripts, env_ids) -> str:
    return _per_cell_mean(report, scripts, env_ids, lambda r: r.sps)


def speed_table(report: Report, script: str, env_ids: list[str]) -> str:
    rows = []
    for env_id in env_ids:
        runs = report.cells[script, env_id].runs
        minutes = [r.runtime_s / 60 for r in runs if r.runtime_s is not None]
        sps = [r.sps for r in runs if r.sps is not None]
        rows.append([env_id] + [fmt(float(np.mean(v))) if v else "n/a" for v in (minutes, sps)])
    return markdown_table(["env", "minutes", "SPS"], rows)


def seed_order(seed: int | None) -> tuple[bool, int]:
    """Seeds in numeric order (2 before 10), an unknown one last."""
    return seed is None, seed or 0


def describe_set(report: Report, scripts, env_ids) -> str:
    """The runs of a script set, and the seeds that make its cells: a run with no finished game
    adds nothing to its cell's return, so it is not counted there."""
    cells = report.cells_of(scripts, env_ids)
    runs = [r for cell in cells for r in cell.runs]
    steps = sorted({r.last_step for r in runs})
    counted = [[r for r in cell.runs if len(r.returns)] for cell in cells]
    seeds = sorted({r.seed for runs_of_cell in counted for r in runs_of_cell}, key=seed_order)
    counts = sorted({len(runs_of_cell) for runs_of_cell in counted})
    per_cell = (
        plural(counts[0], "seed") if len(counts) == 1 else f"{counts[0]} to {counts[-1]} seeds"
    )
    idle = len(runs) - sum(map(len, counted))
    text = f"{plural(len(runs), 'run')}; "
    if seeds:
        text += f"{per_cell} per cell (seeds {', '.join(map(str, seeds))}); "
    if idle:
        text += f"{plural(idle, 'run')} with no finished game, in no cell; "
    return text + f"{' / '.join(map(fmt_steps, steps))} env steps per run"


def runs_table(report: Benchmark) -> str:
    rows = []
    for run in sorted(
        report.runs, key=lambda r: (str(r.script), str(r.env_id), seed_order(r.seed), r.name)
    ):
        rows.append(
            [
                f"`{run.name}`",
                str(run.script),
                str(run.env_id),
                str(run.seed),
                fmt_steps(run.last_step),
                str(len(run.returns)),
                fmt(run.final_return(report.args.last_n)),
                fmt(run.runtime_s / 60 if run.runtime_s is not None else None),
                fmt(run.sps, 0),
                run.status,
                str(run.protocol.get("name")),
            ]
        )
    return markdown_table(
        [
            "run",
            "script",
            "env",
            "seed",
            "steps",
            "games",
            "final return",
            "minutes",
            "SPS",
            "status",
            "protocol",
        ],
        rows,
        ["l", "l", "l", "r", "r", "r", "r", "r", "r", "l", "l"],
    )


def comparison_section(report: Report) -> str:
    published = load_published()
    rows, runtime_rows = [], []
    for (script, env_id), cell in sorted(report.cells.items()):
        # by the runs' exp name: a `--label` or a variant keeps its published counterpart
        ref = published.get((cell.runs[0].exp_name, env_id))
        if ref is None:
            continue
        steps = sorted({r.last_step for r in cell.runs})
        budget = " / ".join(map(fmt_steps, steps))
        if cell.finals:
            mean, std = mean_std(cell.finals)
            diff = mean - ref["return_mean"]
            inside = "yes" if abs(diff) <= std + ref["return_std"] else "no"
            ours = f"{mean:.2f} ± {std:.2f}"
            diff_text = f"{diff:+.2f}"
        else:
            ours, diff_text, inside = "no finished game", "n/a", "n/a"
        rows.append(
            [
                env_id,
                script,
                ours,
                str(len(cell.finals)),
                budget,
                f"{ref['return_mean']:.2f} ± {ref['return_std']:.2f}",
                f"{int(ref['seeds'])}",
                fmt_steps(int(ref["total_timesteps"])),
                diff_text,
                inside,
            ]
        )
        sps = [r.sps for r in cell.runs if r.sps]
        if sps:
            ours_min = ref["total_timesteps"] / float(np.mean(sps)) / 60
            runtime_rows.append(
                [
                    env_id,
                    script,
                    fmt(float(np.mean(sps)), 0),
                    fmt(ours_min, 1),
                    fmt(ref["runtime_minutes"], 2),
                    f"{ours_min / ref['runtime_minutes']:.1f}x",
                ]
            )
    named = {script: cell.runs[0].exp_name for (script, _), cell in report.cells.items()}
    unmatched = sorted(s for s, exp in named.items() if exp not in {p for p, _ in published})
    for script in unmatched:
        report.notes.append(f"comparison: no published numbers for {script}")
    if not rows:
        return "None of these runs has a published counterpart (script and env id).\n"
    text = (
        "Ours against the published CleanRL numbers (`cleanrl_utils/data/published_ppo_atari.csv`"
        ", the protocol in `docs/published.md`; 3 seeds, 10M steps, one GPU machine). "
        "*inside spread*: yes when the difference is at most the sum of "
        "the two standard deviations (the two mean ± std intervals overlap). "
    )
    if any(r[4] != r[7] for r in rows):
        text += (
            "**Step budgets differ**: where ours are shorter than 10M steps the difference "
            "measures how far the short runs are from the end of training, not a "
            "reproduction gap."
        )
    text += "\n\n" + markdown_table(
        [
            "env",
            "script",
            "ours",
            "seeds",
            "our steps",
            "published",
            "seeds",
            "published steps",
            "difference",
            "inside spread",
        ],
        rows,
        ["l", "l", "r", "r", "r", "r", "r", "r", "r", "l"],
    )
    if runtime_rows:
        text += (
            "\nSpeed: minutes that one run of the published budget would take at our mean "
            "steps per second, against the published minutes (different hardware).\n\n"
            + markdown_table(
                [
                    "env",
                    "script",
                    "our SPS",
                    "our minutes (projected)",
                    "published minutes",
                    "ratio",
                ],
                runtime_rows,
                ["l", "l", "r", "r", "r", "r"],
            )
        )
    return text


def comparisons(bench: Benchmark) -> str:
    """The comparison with the published numbers, of the runs of the published protocol only:
    the published runs were measured under it."""
    published = [part for part in bench.parts if part.protocol == "published" and part.cells]
    others = [f"`{part.protocol}`" for part in bench.parts if part not in published and part.cells]
    text = ""
    if others:
        text += (
            "Only the runs of the published protocol are compared with the published numbers "
            f"(which were measured under it); not compared: the runs of {', '.join(others)}.\n\n"
        )
    if not published:
        return text + "No runs of the published protocol: nothing to compare.\n"
    return text + comparison_section(published[0])


def summary(report: Benchmark, script: str | None = None) -> str:
    """Hardware, runs, seeds, step budget, protocols, dates and commits, of one script or of
    all."""
    args = report.args
    reported = [r for r in report.reported if script is None or r.script == script]
    scripts = sorted({r.script for r in reported})
    lines = []
    if args.hardware:
        lines.append(f"**Hardware**: {args.hardware}")
    if reported:
        steps = sorted({r.last_step for r in reported})
        seeds = sorted({r.seed for r in reported}, key=seed_order)
        protocols = [
            f"`{part.protocol}`"
            for part in report.parts
            if any(script is None or r.script == script for r in part.reported)
        ]
        starts = [r.start_wall for r in reported if r.start_wall]
        when = sorted(time.strftime("%Y-%m-%d", time.gmtime(s)) for s in starts)
        gits = [(r.config or {}).get("git") for r in reported]
        gits = [g if isinstance(g, dict) else {} for g in gits]
        commits = sorted({str(g.get("commit", "unknown"))[:10] for g in gits})
        dirty = " (with uncommitted changes)" if any(g.get("dirty") for g in gits) else ""
        dates = (
            "unknown"
            if not when
            else when[0]
            if when[0] == when[-1]
            else f"{when[0]} to {when[-1]}"
        )
        found = f" of {len(report.runs)} found" if script is None else ""
        lines += [
            f"**Runs**: {len(reported)} reported{found}: "
            f"{plural(len(scripts), 'script')} ({', '.join(scripts)}), "
            f"{plural(len({r.env_id for r in reported}), 'env id')}, "
            f"seeds {', '.join(map(str, seeds))}.",
            f"**Step budget**: {' / '.join(map(fmt_steps, steps))} env steps per run.",
            f"**Protocol**: {', '.join(protocols)}"
            + ("." if len(protocols) == 1 else " (each reported on its own, never mixed)."),
            f"**Dates**: {dates} (UTC); code at {'commits' if len(commits) > 1 else 'commit'} "
            f"{', '.join(commits)}{dirty}.",
        ]
    else:
        lines.append(f"**Runs**: none reported ({len(report.runs)} found).")
    if report.notes and script is None:
        lines.append(f"**Notes**: {len(report.notes)} (see [Notes](#notes)).")
    text = "  \n".join(lines) + "\n"
    for note in args.notes:
        text += f"\n{note}\n"
    return text


def windows_section(bench: Benchmark) -> str:
    """Per env id, the mean score of the games that ended in each window of `--windows` steps:
    one row per run (its seed), and per script the mean ± std over its seeds (over the seeds
    with a game in that window: `(n=k)` when fewer than all)."""
    window = bench.args.windows
    text = (
        f"Mean score (the real game score over all lives) of the games that ended in each window "
        f"of {fmt_steps(window)} env steps; a column is headed by the step that ends its window. "
        "Per script: mean ± std over seeds.\n\n"
    )
    for report, scripts, env_ids in bench.sets():
        for env_id in env_ids:
            cells = [(s, report.cells[(s, env_id)]) for s in scripts if (s, env_id) in report.cells]
            budget = max(run.budget or run.last_step for _, cell in cells for run in cell.runs)
            count = max(1, budget // window)
            header = ["run"] + [fmt_steps(window * (k + 1)) for k in range(count)]
            rows = []
            for script, cell in cells:
                per_run = [window_means(run, window, count) for run in cell.runs]
                summary_row = [f"**{script}** ({plural(len(per_run), 'seed')})"]
                for k in range(count):
                    values = [m[k] for m in per_run if m[k] is not None]
                    mean, std = mean_std(values) if values else (None, None)
                    cell_text = f"{fmt(mean)} ± {fmt(std)}" if values else "–"
                    if values and len(values) < len(per_run):
                        cell_text += f" (n={len(values)})"
                    summary_row.append(cell_text)
                rows.append(summary_row)
                for run, means in sorted(
                    zip(cell.runs, per_run), key=lambda x: seed_order(x[0].seed)
                ):
                    rows.append(
                        [f"seed {run.seed}"] + [fmt(m) if m is not None else "–" for m in means]
                    )
            protocol = f" (protocol `{report.protocol}`)"
            text += f"### {env_id}{protocol}\n\n" + markdown_table(header, rows) + "\n\n"
    return text
