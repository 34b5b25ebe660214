"""The runs a report is made of: split by the protocol they ran under (a `Report` each, in one
`Benchmark`), grouped into cells (one script on one env id) and script sets (scripts that share
an env id share a table), each seed counted once, with a note for everything odd about them."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from cleanrl_utils.files.run_names import RunName
from cleanrl_utils.report.loading import RunLog
from cleanrl_utils.report.options import Args
from cleanrl_utils.report.style import colors_of, score_text
from cleanrl_utils.report.tables import fmt_steps, natural, plural


@dataclass
class Cell:
    """The runs of one script on one env id."""

    runs: list[RunLog]
    finals: list[float]  # final return of each run that has one


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
    """`runs` with each script (a variant: its experiment arguments are equal), env id and seed
    once, a seed run again still one seed: its finished run kept, the newest of several (a
    stopped rerun never replaces a finished run); a note for each seed that had several."""
    by_seed: dict[tuple, list[RunLog]] = defaultdict(list)
    for run in runs:
        by_seed[run.script, run.env_id, run.seed].append(run)
    kept, notes = [], []
    for (script, env_id, seed), repeated in by_seed.items():
        newest = max(repeated, key=lambda run: (run.finished, start_time(run)))
        kept.append(newest)
        if len(repeated) > 1:
            older = sorted((r for r in repeated if r is not newest), key=start_time)
            notes.append(
                f"{script} on {env_id}: {len(repeated)} runs with seed {seed} and the same "
                f"arguments, counted once: the newest {'finished ' if newest.finished else ''}run, "
                f"`{newest.name}` (`{newest.where}`); left out: "
                + ", ".join(f"`{r.where}`" for r in older)
            )
    kept_ids = {id(run) for run in kept}
    return [r for r in runs if id(r) in kept_ids], sorted(notes)


class Report:
    """The runs of one protocol found (`runs`), those reported (`reported`: readable and
    finished, or all readable ones with `--include-unfinished`; of a seed run more than once,
    the newest run), their cells and script sets, and the notes. The sections (`sections.py`,
    `aggregate.py`) and plots (`plots.py`, `figures.py`) are made from it."""

    def __init__(
        self, args: Args, runs: list[RunLog], notes: list[str], protocol: str = "published"
    ):
        self.args = args
        self.runs = runs
        self.notes = notes
        self.protocol = protocol  # its label (`protocol_labels`)
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
        self.colors = colors_of(self.scripts)  # (a Benchmark gives every part the same ones)
        # what a run's score is, with the number of games these runs really had
        self.score = score_text(self.reported, args.last_n)
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


def protocol_key(protocol: dict) -> str:
    """What tells two protocols apart: the name of a named one (`published`, `machado`: its
    settings are the name's); a `custom` one's settings too."""
    if protocol.get("name") != "custom":
        return str(protocol.get("name"))
    settings = ", ".join(f"{k} {v}" for k, v in sorted(protocol.items()) if k != "name")
    return f"custom ({settings})" if settings else "custom"


def protocol_order(key: str) -> tuple[int, str]:
    """The published protocol first, then Machado et al.'s, then the others by name."""
    return {"published": 0, "machado": 1}.get(key, 2), key


def protocol_labels(keys) -> dict[str, str]:
    """Each protocol's label in headings, titles and file names: its name; `custom-1`,
    `custom-2`... when custom settings differ."""
    customs = sorted(k for k in keys if k.split(" (")[0] == "custom")
    labels = {k: k for k in keys if k not in customs}
    for i, key in enumerate(customs, 1):
        labels[key] = "custom" if len(customs) == 1 else f"custom-{i}"
    return labels


class Benchmark:
    """Every run read (`runs`), split by the protocol it ran under into one `Report` each
    (`parts`, the published protocol first): runs of two protocols never share a table, a
    curve, an aggregate or a comparison. `notes` are all the notes, in order."""

    def __init__(self, args: Args, runs: list[RunLog], notes: list[str]):
        self.args = args
        self.runs = runs
        self.notes = notes
        groups: dict[str, list[RunLog]] = defaultdict(list)
        for run in runs:
            groups[protocol_key(run.protocol)].append(run)
        labels = protocol_labels(groups)
        self.parts = [
            Report(args, groups[key], notes, labels[key])
            for key in sorted(groups, key=protocol_order)
        ]
        self.found = {  # label -> what the label stands for, where it is not the name
            labels[key]: key for key in sorted(groups, key=protocol_order)
        }
        # protocol -> (its aggregates or None, the lines on what was left out): `cli.read_report`
        self.aggregates: dict[str, tuple] = {}
        # protocol -> (its Atari-5 estimates, the lines on methods that lack games): the same
        self.suites: dict[str, tuple] = {}
        # one colour per method in every figure of every protocol
        self.colors = colors_of(run.script for run in self.reported)
        for part in self.parts:
            part.colors = self.colors

    def protocols_note(self) -> str:
        """Which protocols were found, and that they are never mixed."""
        found = [
            f"`{part.protocol}`"
            + (f" {key.removeprefix('custom ')}" if key != part.protocol else "")
            + f": {plural(len(part.reported), 'run')} reported"
            for part, key in zip(self.parts, self.found.values())
        ]
        return (
            f"Protocols found: {'; '.join(found) or 'none'}. Each protocol has tables, curves, "
            "aggregates and comparisons of its own: runs of two protocols are never put in "
            "one of them.\n"
        )

    @property
    def reported(self) -> list[RunLog]:
        return [run for part in self.parts for run in part.reported]

    @property
    def cells(self) -> bool:
        """Whether any protocol has a cell to report."""
        return any(part.cells for part in self.parts)

    def sets(self) -> list[tuple[Report, list[str], list[str]]]:
        """(protocol's report, scripts, env ids) of every script set of every protocol."""
        return [(part, scripts, env_ids) for part in self.parts for scripts, env_ids in part.sets]
