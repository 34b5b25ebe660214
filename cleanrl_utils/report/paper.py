"""The paper kit, written into every report's folder: `evaluation.md`, the evaluation paragraph
filled in from the runs (the protocol in its settings, the games, seeds and steps, the statistics
and their intervals, each method's aggregates and each probability of improvement, with
citations; also as LaTeX); `aggregate.tex`, booktabs tables of the aggregates and the per-game
returns with the numbers of the markdown; `references.bib`; and the tables of what differs between
the compared variants and of the software and devices the runs recorded (for report.md)."""

from __future__ import annotations

import itertools
import json
import re
from collections import defaultdict

from cleanrl_utils.envs import protocols
from cleanrl_utils.files.config import experiment_args
from cleanrl_utils.report.aggregate import Aggregate, interval_text
from cleanrl_utils.report.cells import Benchmark, Report
from cleanrl_utils.report.estimates import METRICS
from cleanrl_utils.report.references import cite, cite_t
from cleanrl_utils.report.stats import mean_std
from cleanrl_utils.report.style import games_counted
from cleanrl_utils.report.suite import suite_latex, suite_sentence
from cleanrl_utils.report.tables import fmt_steps, markdown_table, natural, plural
from cleanrl_utils.report.variants import value_text

FRAME_SKIP = 4  # every script repeats an action for 4 frames: frames = 4 x env steps


def protocol_settings(report: Report) -> dict:
    """The five settings of a protocol's runs, as their config.json records them (a run made
    before runs recorded them: the published ones)."""
    recorded = next(
        (r.protocol for r in report.reported if set(protocols.SETTINGS) <= set(r.protocol)), None
    )
    if recorded is not None:
        return {name: recorded[name] for name in protocols.SETTINGS}
    if report.protocol == "machado":
        return dict(protocols.MACHADO)
    return dict(protocols.PUBLISHED)


def protocol_sentence(report: Report, latex: bool) -> str:
    """The protocol in its settings: what a reviewer needs to compare with other papers."""
    values = protocol_settings(report)
    sticky = values["repeat_action_probability"]
    parts = [
        f"sticky actions with probability {sticky:g}" if sticky else "no sticky actions",
        "the full action set of 18 actions"
        if values["full_action_space"]
        else "the minimal action set of each game",
        "a lost life ending the agent's episode (the score still counts every life)"
        if values["episodic_life"]
        else "no loss-of-life signal",
        f"up to {values['noop_max']} no-op actions at the start of a game"
        if values["noop_max"]
        else "no no-op starts",
        f"games cut at {values['max_episode_steps']:,} agent steps "
        f"({values['max_episode_steps'] * FRAME_SKIP:,} frames)",
    ]
    settings = ", ".join(parts[:-1]) + f" and {parts[-1]}"
    if report.protocol == "machado":
        return f"under the protocol of {cite_t('machado', latex)}: {settings}"
    if report.protocol == "published":
        return (
            f"under CleanRL's published setting ({settings}), which differs from the protocol "
            f"of {cite_t('machado', latex)}: its numbers are not comparable with "
            "results under that protocol"
        )
    return f"under these settings: {settings}"


def score_sentence(report: Report) -> str:
    """What a run's score is, for the paragraph, with the games the runs really had."""
    last_n = report.args.last_n
    counted = games_counted(report.reported, last_n)
    if counted is None or counted == (last_n, last_n):
        return f"the mean return of its last {last_n} training games"
    low, high = counted
    games = f"{low} games a run" if low == high else f"{low} to {high} games a run"
    if high < last_n:
        return f"the mean return of all its training games ({games}: fewer than {last_n})"
    return (
        f"the mean return of its last {last_n} training games, or of all of them for a run with "
        f"fewer ({games})"
    )


def budget_text(report: Report) -> str:
    steps = sorted({run.last_step for run in report.reported})
    frames = " / ".join(fmt_steps(s * FRAME_SKIP) for s in steps)
    return f"{' / '.join(map(fmt_steps, steps))} environment steps ({frames} frames)"


def seeds_text(report: Report) -> str:
    counts = sorted({len(cell.finals) for cell in report.cells.values() if cell.finals})
    if not counts:
        return "no seed with a finished game"
    if len(counts) == 1:
        return f"{plural(counts[0], 'seed')} per game"
    return f"{counts[0]} to {counts[-1]} seeds per game"


def games_of(report: Report) -> list[str]:
    return sorted({env_id for _, env_id in report.cells})


def evaluation_paragraph(
    report: Report, agg: Aggregate | None, lines: list[str], latex: bool, suite: list = ()
) -> str:
    """The evaluation paragraph of one protocol's runs, its numbers those of aggregate.md (or,
    without an aggregate, of returns.md)."""
    args = report.args
    games = games_of(report)
    methods = report.scripts
    text = (
        f"We evaluate {', '.join(methods)} on {plural(len(games), 'Atari 2600 game')} "
        f"({', '.join(games)}) of the Arcade Learning Environment {cite('bellemare', latex)}, "
        f"{protocol_sentence(report, latex)}; rewards are clipped to their sign for training "
        "only. The agents are PPO " + cite("schulman", latex) + " in CleanRL's implementation "
        f"{cite('huang', latex)}. Each method is trained for {budget_text(report)} with "
        f"{seeds_text(report)}; the score of a run is {score_sentence(report)} (the game score "
        "over all lives)."
    )
    level = f"{100 * args.confidence:g}%"
    if agg is None:
        text += (
            f" With {plural(len(games), 'game')} that every method ran with known random and "
            f"human scores, fewer than the {args.aggregate_min_games} an aggregate needs, we "
            "report each game's mean and standard deviation over seeds instead: "
        )
        per_game = []
        for env_id in games:
            cells = []
            for method in methods:
                cell = report.cells.get((method, env_id))
                if cell is not None and cell.finals:
                    mean, std = mean_std(cell.finals)
                    cells.append(f"{method} {mean:.2f} ± {std:.2f}")
            per_game.append(f"{env_id}: {', '.join(cells)}")
        return text + "; ".join(per_game) + "." + suite_sentence(list(suite), latex)
    text += (
        f" Over the {plural(len(agg.games), 'game')} that every method ran, we report "
        f"human-normalised scores (with the random and human scores of "
        f"{cite_t('badia', latex)}), aggregated with the interquartile mean (IQM), median, mean "
        f"and optimality gap, with {level} percentile stratified bootstrap confidence intervals "
        f"over {agg.samples:,} resamples {cite('agarwal', latex)}."
    )
    if agg.min_games:
        text += f" (Aggregates over {plural(len(agg.games), 'game')}: fewer than the usual 5.)"
    for method in agg.scripts:
        est = agg.estimates[method]
        text += (
            f" {method} reaches an IQM of {interval_text(est['iqm'])} (median "
            f"{interval_text(est['median'])}, mean {interval_text(est['mean'])}, optimality gap "
            f"{interval_text(est['optimality_gap'])}; {plural(agg.runs(method), 'run')})."
        )
    for x, y in itertools.combinations(agg.scripts, 2):
        if agg.improvement[x, y][0] < 0.5:  # said of the better one: P(Y > X) above 0.5
            x, y = y, x
        p, low, high = agg.improvement[x, y]
        verdict = (
            "a meaningful improvement in the sense of Agarwal et al.: the interval's lower end "
            "is above 0.5"
            if low > 0.5
            else "not a meaningful improvement in the sense of Agarwal et al.: the interval "
            "holds 0.5"
        )
        text += (
            f" The probability that a run of {x} scores above a run of {y} on a game is "
            f"{interval_text((p, low, high))} ({verdict})."
        )
    return text + suite_sentence(list(suite), latex)


def evaluation_md(bench: Benchmark) -> str:
    """evaluation.md: a paragraph per protocol, in markdown and in LaTeX (with the keys of
    references.bib), and where its numbers come from."""
    text = (
        "The evaluation paragraph of a paper, filled in from these runs: every number is the "
        "report's (aggregate.md, returns.md); the citations are in `references.bib`, the tables "
        "in `aggregate.tex`. Budgets and method names are the runs'; rename a method with "
        "`--label NAME=TEXT`.\n\n"
    )
    for report in bench.parts:
        if not report.cells:
            continue
        agg, lines = bench.aggregates[report.protocol]
        suite = bench.suites.get(report.protocol, ([], []))[0]
        text += f"### Protocol `{report.protocol}`\n\n"
        text += evaluation_paragraph(report, agg, lines, False, suite) + "\n\n"
        latex = latex_escape_text(evaluation_paragraph(report, agg, lines, True, suite))
        text += f"LaTeX (`\\usepackage{{natbib}}`):\n\n```latex\n{latex}\n```\n\n"
    return text


LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def latex_escape(text: str) -> str:
    """Text as LaTeX typesets it literally (a method's name: `ppo\\_atari`)."""
    text = text.replace("`", "")  # (markdown's code marks)
    text = "".join(LATEX_SPECIAL.get(char, char) for char in text).replace("±", r"$\pm$")
    return text.replace("--", "-{}-")  # a flag, not an en dash


def latex_escape_text(paragraph: str) -> str:
    """A paragraph with `\\citep{...}` commands: everything else escaped."""
    parts = re.split(r"(\\cite[pt]\{[^}]*\})", paragraph)
    escaped = [part if part.startswith("\\cite") else latex_escape(part) for part in parts]
    return "".join(escaped)


def latex_interval(value) -> str:
    point, low, high = value
    return f"{point:.3f} [{low:.3f}, {high:.3f}]"


def booktabs(columns: str, header: list[str], rows: list[list[str]], caption: str, label: str):
    body = "\n".join("    " + " & ".join(row) + r" \\" for row in rows)
    return (
        "\\begin{table}[t]\n  \\centering\n  \\small\n"
        f"  \\caption{{{caption}}}\n  \\label{{{label}}}\n"
        f"  \\begin{{tabular}}{{{columns}}}\n    \\toprule\n"
        f"    {' & '.join(header)} \\\\\n    \\midrule\n{body}\n"
        "    \\bottomrule\n  \\end{tabular}\n\\end{table}\n"
    )


def aggregate_tex(bench: Benchmark) -> str:
    """LaTeX tables (booktabs) of each protocol's aggregates with their intervals, its
    probabilities of improvement, and its per-game returns: the numbers of aggregate.md and
    returns.md, to the same digits."""
    text = (
        "% Tables of the report (\\usepackage{booktabs}); the numbers are aggregate.md's and "
        "returns.md's.\n\n"
    )
    for report in bench.parts:
        if not report.cells:
            continue
        agg, _ = bench.aggregates[report.protocol]
        slug = re.sub(r"[^a-z0-9]+", "-", report.protocol.lower())
        if agg is not None:
            level = f"{100 * agg.confidence:g}\\%"
            rows = [
                [latex_escape(m)] + [latex_interval(agg.estimates[m][k]) for k in METRICS]
                for m in agg.scripts
            ]
            caption = (
                f"Human-normalised aggregates over {plural(len(agg.games), 'game')} "
                f"({latex_escape(', '.join(agg.games))}), protocol {latex_escape(report.protocol)}"
                f": point estimate [{level} stratified bootstrap interval, {agg.samples:,} "
                "resamples]. A run's score: "
                f"{latex_escape(agg.score)}. Optimality gap: lower is better."
            )
            if agg.min_games:
                caption += f" {latex_escape(agg.min_games)}."
            text += booktabs(
                "l" + "c" * len(METRICS),
                ["Method"] + list(METRICS.values()),
                rows,
                caption,
                f"tab:aggregates-{slug}",
            )
            if len(agg.scripts) > 1:
                pairs = list(itertools.combinations(agg.scripts, 2))
                rows = [
                    [latex_escape(x), latex_escape(y), latex_interval(agg.improvement[x, y])]
                    for x, y in pairs
                ]
                text += "\n" + booktabs(
                    "llc",
                    ["X", "Y", "P(X > Y)"],
                    rows,
                    f"Probability of improvement, protocol {latex_escape(report.protocol)}: the "
                    "probability that a run of X scores above a run of Y on a game "
                    f"[{level} interval]; above 0.5 at the interval's lower end: a meaningful "
                    "improvement.",
                    f"tab:improvement-{slug}",
                )
        suite = bench.suites.get(report.protocol, ([], []))[0]
        text += suite_latex(suite, report.protocol, slug, booktabs, latex_escape)
        methods = report.scripts
        rows = []
        for env_id in games_of(report):
            row = [latex_escape(env_id)]
            for method in methods:
                cell = report.cells.get((method, env_id))
                if cell is None:
                    row.append("--")
                elif not cell.finals:
                    row.append("no game")
                else:
                    mean, std = mean_std(cell.finals)
                    row.append(f"${mean:.2f} \\pm {std:.2f}$")
            rows.append(row)
        text += "\n" + booktabs(
            "l" + "r" * len(methods),
            ["Game"] + [latex_escape(m) for m in methods],
            rows,
            f"Final return per game, protocol {latex_escape(report.protocol)}: mean $\\pm$ "
            f"standard deviation over seeds ({latex_escape(seeds_text(report))}) of a run's "
            f"score, {latex_escape(report.score)}.",
            f"tab:returns-{slug}",
        )
        text += "\n"
    return text


def differing_arguments(bench: Benchmark) -> str:
    """The arguments that differ between the methods compared (every reported exp name and
    variant), a column each: the hyperparameter table of a paper. Empty with one method."""
    by_method: dict[str, list[dict]] = defaultdict(list)
    for run in bench.reported:
        args = (run.config or {}).get("args")
        if isinstance(args, dict):
            by_method[run.script].append(experiment_args(args))
    methods = sorted(by_method, key=natural)
    if len(methods) < 2:
        return ""
    keys = sorted(set().union(*(set(a) for runs in by_method.values() for a in runs)))

    def shown(method: str, key: str) -> str:
        values = {json.dumps(a.get(key), default=str) for a in by_method[method]}
        if len(values) > 1:
            return "differs between its runs"
        return value_text(json.loads(values.pop())) if key in by_method[method][0] else "–"

    rows = [[f"`{k}`"] + [shown(m, k) for m in methods] for k in keys]
    rows = [row for row in rows if len(set(row[1:])) > 1]
    if not rows:
        return (
            "The methods compared were run with the same arguments (all but the seed, env id, "
            "protocol and bookkeeping ones).\n"
        )
    return (
        "Arguments that differ between the methods compared (all others are equal; the seed, "
        "env id, protocol and bookkeeping arguments are left out):\n\n"
        + markdown_table(["argument"] + methods, rows, ["l"] * (len(methods) + 1))
    )


def software(bench: Benchmark) -> str:
    """The package versions, Python and devices the reported runs recorded in config.json: one
    value each when all runs agree, every value with its runs when they differ (flagged)."""
    found: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    runs = bench.reported
    for run in runs:
        config = run.config or {}
        packages = config.get("packages")
        for name, version in (packages if isinstance(packages, dict) else {}).items():
            found[name][str(version)] += 1
        if config.get("python"):
            found["python"][str(config["python"])] += 1
        device = config.get("device")
        if isinstance(device, dict):
            what = f"{device.get('type', '?')}: {device.get('name', '?')}"
            found["device"][what] += 1
        for resumed in config.get("resumes") or []:
            device = resumed.get("device") if isinstance(resumed, dict) else None
            if isinstance(device, dict):
                found["device"][
                    f"{device.get('type', '?')}: {device.get('name', '?')} (resumed)"
                ] += 1
    if not found:
        return "No run records its packages or device (runs made before runs recorded them).\n"
    rows = []
    for name in sorted(found, key=lambda n: (n in ("python", "device"), n)):
        values = found[name]
        counted = sum(values.values())
        if len(values) == 1 and counted == len(runs):
            rows.append([name, next(iter(values)), ""])
        else:
            listed = "; ".join(f"{v} ({plural(n, 'run')})" for v, n in sorted(values.items()))
            missing = len(runs) - counted if name != "device" else 0
            if missing > 0:
                listed += f"; not recorded ({plural(missing, 'run')})"
            rows.append([name, listed, "**differs**" if len(values) > 1 else ""])
    text = (
        f"Software and devices recorded by the {plural(len(runs), 'run')} reported "
        "(config.json); **differs**: not the same for every run.\n\n"
    )
    return text + markdown_table(["what", "recorded", "note"], rows, ["l", "l", "l"])
