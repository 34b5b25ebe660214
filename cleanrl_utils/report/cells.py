"""The runs a report is made of: grouped into cells (one script on one env id) and script sets
(scripts that share an env id share a table), with a note for everything odd about them."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

from cleanrl_utils.report.options import Args
from cleanrl_utils.report.runlogs import RunLog
from cleanrl_utils.report.tables import fmt_steps


@dataclass
class Cell:
    """The runs of one script on one env id."""

    runs: list[RunLog]
    finals: list[float]  # final return of each run that has one


def script_sets(cells: dict[tuple[str, str], Cell]) -> list[tuple[list[str], list[str]]]:
    """Scripts and env ids split into connected groups (scripts that share an env id go in one
    table): EnvPool scripts on `*-v5` and gymnasium scripts on `*NoFrameskip-v4` get a table
    each, as in REFERENCE.md. Returns [(scripts, env_ids)], both sorted."""
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
    out = [(sorted(s), sorted(e)) for s, e in groups.values()]
    return sorted(out, key=lambda group: group[0])


class Report:
    """The runs found (`runs`), those reported (`reported`: readable and finished, or all
    readable ones with `--include-unfinished`), their cells and script sets, and the notes.
    The sections (`sections.py`) and plots (`plots.py`) are made from it."""

    def __init__(self, args: Args, runs: list[RunLog], notes: list[str]):
        self.args = args
        self.runs = runs
        self.notes = notes
        self.cells: dict[tuple[str, str], Cell] = {}
        self.reported = [
            r
            for r in runs
            if r.usable and (r.status in ("finished", "unknown") or args.include_unfinished)
        ]
        for run in self.reported:
            cell = self.cells.setdefault((run.script, run.env_id), Cell([], []))
            cell.runs.append(run)
            final = run.final_return(args.last_n)
            if final is not None:
                cell.finals.append(final)
        self.sets = script_sets(self.cells)
        self.scripts = sorted({s for s, _ in self.cells})
        self._check_cells()

    def cells_of(self, scripts: list[str], env_ids: list[str]) -> list[Cell]:
        """The cells of these scripts on these env ids that have runs."""
        return [self.cells[s, e] for s in scripts for e in env_ids if (s, e) in self.cells]

    def _check_cells(self) -> None:
        for run in self.runs:
            problems = list(run.problems)
            if run.usable and run not in self.reported:
                problems.append(
                    "left out of the tables and plots (`--include-unfinished` reports it)"
                )
            if problems:
                self.notes.append(f"`{run.name}`: {'; '.join(problems)}")
        for (script, env_id), cell in sorted(self.cells.items()):
            seeds = Counter(run.seed for run in cell.runs)
            for seed, count in sorted(seeds.items(), key=lambda kv: str(kv[0])):
                if count > 1:
                    self.notes.append(
                        f"{script} on {env_id}: {count} runs with seed {seed}, all counted"
                    )
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
