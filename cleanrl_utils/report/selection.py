"""Which runs a report is made of (`--sweep`, `--exp-name`, `--env-id`, `--since`): decided from a
run's `config.json` and name, before its event files are read."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from cleanrl_utils.folders import RunName
from cleanrl_utils.report.loading import RunLog


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

    sweep: str | None = None
    exp_names: tuple[str, ...] = ()
    env_ids: tuple[str, ...] = ()
    since: dt.date | None = None

    @classmethod
    def of(cls, args) -> Selection | None:
        """The selection of the report's flags (`args.since` already checked); None when the
        flags select nothing (every run is kept)."""
        since = parse_day(args.since) if args.since else None
        selection = cls(args.sweep, tuple(args.exp_name), tuple(args.env_id), since)
        return selection if selection != cls() else None

    def __call__(self, run: RunLog) -> bool:
        """Whether `run` is kept (a run whose identity is unknown is not, when a flag asks for
        one)."""
        if self.sweep is not None and run.sweep != self.sweep:
            return False
        if self.exp_names and run.script not in self.exp_names:
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
        if self.sweep is not None:
            parts.append(f"--sweep {self.sweep}")
        if self.exp_names:
            parts.append("--exp-name " + " ".join(self.exp_names))
        if self.env_ids:
            parts.append("--env-id " + " ".join(self.env_ids))
        if self.since is not None:
            parts.append(f"--since {self.since.isoformat()}")
        return " ".join(parts)
