"""The reporting half of `benchmark/throughput.py`: the medians and spreads over the repeats, the
bounds done in turn, and the tables (plain text on the terminal, markdown with `--markdown`)
with their legend; the measuring is `throughput_measure.py`."""

from __future__ import annotations

import statistics
import textwrap
from dataclasses import dataclass

from machine import Sizes
from throughput_args import KINDS, MULTI_PROCESS, Args
from throughput_measure import ENV_KINDS, LABELS, PHASES, Measurement

from cleanrl_utils.report.tables import markdown_table


def median_spread(values: list[float]) -> tuple[float, float, float]:
    """(median, min, max) of the repeats' values."""
    return statistics.median(values), min(values), max(values)


def in_turn(*sps: float) -> float:
    """The steps per second of doing several things one after the other for every step, each of
    which alone runs at the given steps per second: 1 / (1/a + 1/b + ...)."""
    return 1.0 / sum(1.0 / s for s in sps)


def fraction_of_bound(sps: float, bound: float) -> float:
    return sps / bound


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
