"""Which runs a report is made of (`--sweep`, `--exp-name`, `--env-id`, `--since`): decided from a
run's `config.json` and name, before its event files are read."""

from __future__ import annotations

import datetime as dt
import difflib
from dataclasses import dataclass

from cleanrl_utils.checks.env_ids import env_id_problem
from cleanrl_utils.files.run_names import RunName
from cleanrl_utils.report.loading import RunLog
from cleanrl_utils.report.tables import plural


def parse_day(text: str) -> dt.date | None:
    """`YYYY-MM-DD` as a date; None when it is not one."""
    try:
        return dt.datetime.strptime(text, "%Y-%m-%d").date()
    except ValueError:
        return None


def start_day(run: RunLog) -> dt.date | None:
    """The day (UTC) a run started: the start time in its name, else `start_time` in its
    config.json; None when neither tells (a time past the year 9999, which a date cannot hold,
    tells nothing: the run is not taken for unreadable)."""
    name = RunName.parse(run.name)
    if name is not None:
        try:
            return dt.datetime.fromtimestamp(name.start_time, dt.UTC).date()
        except (ValueError, OverflowError, OSError):
            pass
    started = (run.config or {}).get("start_time")
    try:
        return dt.datetime.strptime(str(started), "%Y-%m-%dT%H:%M:%S%z").astimezone(dt.UTC).date()
    except (ValueError, OverflowError):
        return None


@dataclass(frozen=True)
class Selection:
    """The runs a report keeps: all of these that are given must hold."""

    sweeps: tuple[str, ...] = ()
    exp_names: tuple[str, ...] = ()
    env_ids: tuple[str, ...] = ()
    since: dt.date | None = None

    @classmethod
    def of(cls, args) -> Selection | None:
        """The selection of the report's flags (`args.since` already checked); None when the
        flags select nothing (every run is kept)."""
        since = parse_day(args.since) if args.since else None
        selection = cls(tuple(args.sweep), tuple(args.exp_name), tuple(args.env_id), since)
        return selection if selection != cls() else None

    def __call__(self, run: RunLog) -> bool:
        """Whether `run` is kept (a run whose identity is unknown is not, when a flag asks for
        one)."""
        if self.sweeps and run.sweep not in self.sweeps:
            return False
        if self.exp_names and run.exp_name not in self.exp_names:
            return False
        if self.env_ids and run.env_id not in self.env_ids:
            return False
        if self.since is not None:
            day = start_day(run)
            return day is not None and day >= self.since
        return True

    def flags(self) -> str:
        """The flags as they were given: `--sweep S --env-id Pong-v5`."""
        parts = []
        if self.sweeps:
            parts.append("--sweep " + " ".join(self.sweeps))
        if self.exp_names:
            parts.append("--exp-name " + " ".join(self.exp_names))
        if self.env_ids:
            parts.append("--env-id " + " ".join(self.env_ids))
        if self.since is not None:
            parts.append(f"--since {self.since.isoformat()}")
        return " ".join(parts)


def sweeps_found(runs: list[RunLog]) -> str:
    """The sweeps among `runs`, a line each: id, exp names, first day, runs."""
    found: dict[str, list[RunLog]] = {}
    for run in runs:
        if run.sweep is not None:
            found.setdefault(run.sweep, []).append(run)
    lines = []
    for sweep, members in sorted(found.items()):
        days = sorted(str(day) for day in map(start_day, members) if day is not None)
        exps = ", ".join(sorted({str(r.exp_name) for r in members}))
        day = days[0] if days else "day unknown"
        lines.append(f"{sweep} ({exps}; {day}; {plural(len(members), 'run')})")
    return "; ".join(lines) if lines else "none (no run records a sweep)"


def unmatched(selection: Selection, runs: list[RunLog]) -> str | None:
    """The one line for a value of a selection flag that no run has (each value must select a
    run: a misspelt one would quietly shrink a comparison), with what there is; None when each
    value selects runs."""
    for sweep in selection.sweeps:
        if not any(run.sweep == sweep for run in runs):
            return f"--sweep {sweep}: no run of that sweep; the sweeps found: {sweeps_found(runs)}"
    exps = sorted({run.exp_name for run in runs if run.exp_name is not None})
    for exp in selection.exp_names:
        if exp not in exps:
            close = difflib.get_close_matches(exp, exps, n=3, cutoff=0.6)
            hint = (
                f"; did you mean {', '.join(close)}?" if close else f" (found: {', '.join(exps)})"
            )
            return f"--exp-name {exp}: no run of that exp name{hint}"
    env_ids = sorted({run.env_id for run in runs if run.env_id is not None})
    for env_id in selection.env_ids:
        if env_id not in env_ids:
            hint = (env_id_problem(env_id, env_ids, "these runs") or "").partition(";")[2]
            found = f"; {hint.strip()}" if hint else f" (found: {', '.join(env_ids)})"
            return f"--env-id {env_id}: no run on that env id{found}"
    return None
