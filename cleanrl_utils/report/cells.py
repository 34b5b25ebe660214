"""The runs a report is made of: grouped into cells (one script on one env id) and script sets
(scripts that share an env id share a table), each seed counted once, with a note for everything
odd about them."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

from cleanrl_utils.report.options import Args
from cleanrl_utils.report.runlogs import RunLog
from cleanrl_utils.report.tables import fmt_steps
from cleanrl_utils.runs import RunName


@dataclass
class Cell:
    """The runs of one script on one env id."""

    runs: list[RunLog]
    finals: list[float]  # final return of each run that has one


def natural(name: str) -> list:
    """A sort key that puts numbers in a name in numeric order: a tuner's `s-trial2` before
    `s-trial10`."""
    return [
        (0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", name)
    ]


def script_sets(cells: dict[tuple[str, str], Cell]) -> list[tuple[list[str], list[str]]]:
    """Scripts and env ids split into connected groups (scripts that share an env id go in one
    table): EnvPool scripts on `*-v5` and gymnasium scripts on `*NoFrameskip-v4` get a table
    each, as in the published tables (docs/published.md). Returns [(scripts, env_ids)], both sorted."""
    parent: dict[str, str] = {}

    def find(x):
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for script, env_id in cells:
        parent[find("s:" + script)] = find("e:" + env_id)
    groups: dict[str, tuple[set, set]] = defaultdict(lambda: (set(), set()))
    for script, env_id in cells:
        scripts, envs = groups[find("s:" + script)]
        scripts.add(script)
        envs.add(env_id)
    out = [(sorted(s, key=natural), sorted(e)) for s, e in groups.values()]
    return sorted(out, key=lambda group: [natural(s) for s in group[0]])


def start_time(run: RunLog) -> tuple[float, str]:
    """When a run started, for telling the newest of repeated runs: the start time in its name
    (its first event's wall time for a name that is not a run name), then its path."""
    name = RunName.parse(run.name)
    started = name.start_time if name is not None else (run.start_wall or 0.0)
    return float(started), str(run.path)


def newest_of_each_seed(runs: list[RunLog]) -> tuple[list[RunLog], list[str]]:
    """`runs` with each script, env id and seed once, its newest run kept (a seed run again is
    still one seed), and a note for each seed that had several."""
    by_seed: dict[tuple, list[RunLog]] = defaultdict(list)
    for run in runs:
        by_seed[run.script, run.env_id, run.seed].append(run)
    kept, notes = [], []
    for (script, env_id, seed), repeated in by_seed.items():
        newest = max(repeated, key=start_time)
        kept.append(newest)
        if len(repeated) > 1:
            older = sorted((r for r in repeated if r is not newest), key=start_time)
            notes.append(
                f"{script} on {env_id}: {len(repeated)} runs with seed {seed}, counted once: "
                f"the newest, `{newest.name}` (`{newest.where}`); left out: "
                + ", ".join(f"`{r.where}`" for r in older)
            )
    kept_ids = {id(run) for run in kept}
    return [r for r in runs if id(r) in kept_ids], sorted(notes)


class Report:
    """The runs found (`runs`), those reported (`reported`: readable and finished, or all
    readable ones with `--include-unfinished`; of a seed run more than once, the newest run),
    their cells and script sets, and the notes. The sections (`sections.py`) and plots
    (`plots.py`) are made from it."""

    def __init__(self, args: Args, runs: list[RunLog], notes: list[str]):
        self.args = args
        self.runs = runs
        self.notes = notes
        self.cells: dict[tuple[str, str], Cell] = {}
        self.reported, repeated = newest_of_each_seed(
            [r for r in runs if r.usable and (r.finished or args.include_unfinished)]
        )
        for run in self.reported:
            cell = self.cells.setdefault((run.script, run.env_id), Cell([], []))
            cell.runs.append(run)
            final = run.final_return(args.last_n)
            if final is not None:
                cell.finals.append(final)
        self.sets = script_sets(self.cells)
        self.scripts = sorted({s for s, _ in self.cells}, key=natural)
        self._check_cells(repeated)

    def cells_of(self, scripts: list[str], env_ids: list[str]) -> list[Cell]:
        """The cells of these scripts on these env ids that have runs."""
        return [self.cells[s, e] for s in scripts for e in env_ids if (s, e) in self.cells]

    def _check_cells(self, repeated: list[str]) -> None:
        for run in self.runs:
            problems = list(run.problems)
            if run.usable and not (run.finished or self.args.include_unfinished):
                problems.append(
                    "left out of the tables and plots (`--include-unfinished` reports it)"
                )
            if problems:
                self.notes.append(f"`{run.name}`: {'; '.join(problems)}")
        self.notes += repeated
        for (script, env_id), cell in sorted(self.cells.items()):
            budgets = sorted({run.last_step for run in cell.runs})
            if len(budgets) > 1:
                self.notes.append(
                    f"{script} on {env_id}: mixed step counts ({', '.join(map(fmt_steps, budgets))}); "
                    "its cells and curve mix them (curves stop where the shortest run stops)"
                )
        all_steps = sorted({run.last_step for run in self.reported})
        if len(all_steps) > 1 and len(self.cells) > 1:
            self.notes.append(
                "the runs have different step counts: compare cells with care "
                f"({', '.join(map(fmt_steps, all_steps))})"
            )
