"""Run folders' names: `{env_id}__{exp_name}__{seed}__{unix_time}` (defined only here, `RunName`),
what an exp name and an env id may hold, finding a run's earlier folders (`find_runs`), and
`file_name` (an id or exp name spelled as one file name, never a path: the launcher's logs, the
report's pages)."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import time
from pathlib import Path

RUN_NAME = re.compile(r"^(?P<env_id>.+?)__(?P<exp_name>.+)__(?P<seed>-?\d+)__(?P<start_time>\d+)$")
# The names that become part of a folder's name: letters, digits, `.`, `_`, `-` (and an env
# id's `/` as `+`; no separator, no glob or shell character), not starting with `.` (no `..`, no hidden folder), short enough for
# any file system's 255-byte names. An env id has no `__` and no trailing `_`: the run name's
# parser finds the exp name after the env id's first `__`.
NAME_CHARS = "A-Za-z0-9._-"
EXP_NAME_LIMIT = 100  # characters
EXP_NAME = re.compile(rf"[A-Za-z0-9_-][{NAME_CHARS}]{{0,{EXP_NAME_LIMIT - 1}}}")
ENV_ID = re.compile(rf"(?!.*__)(?!.*_$)[A-Za-z0-9_-][+{NAME_CHARS}]{{0,63}}")  # `+`: a `/`
MAX_SEED = 2**31


def file_env_id(env_id: str) -> str:
    """An env id as run folder names hold it: a namespace's `/` written `+` (`ALE/Pong-v5` ->
    `ALE+Pong-v5`, as the launcher's and the tuner's logs spell it, see `file_name`), so that it
    names one folder, not two; config.json and checkpoints keep the id as given."""
    return env_id.replace("/", "+") if isinstance(env_id, str) else env_id


def name_problem(exp_name: str, env_id: str) -> str | None:
    """Why `exp_name` or `env_id` (as `file_env_id` writes it) cannot be part of a run folder's
    name, or None."""
    for flag, value, pattern, limit in [
        ("--exp-name", exp_name, EXP_NAME, EXP_NAME_LIMIT),
        ("--env-id", env_id, ENV_ID, 64),
    ]:
        named = file_env_id(value) if flag == "--env-id" else value
        if not isinstance(value, str) or not pattern.fullmatch(named):
            shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
            why = "only letters, digits, '.', '_' and '-', not starting with '.'"
            if flag == "--env-id":
                why += ", no '__' and no trailing '_' (a '/' is written '+')"
            return f"{flag} {shown} cannot name a run folder: 1 to {limit} characters, {why}"
    return None


FILE_NAME_KEPT = re.compile(r"[A-Za-z0-9._:-]")
FILE_NAME_LIMIT = 120  # characters; a file system's names end at 255 bytes


def file_name(text: str) -> str:
    """`text` (an env id, an exp name read from a config.json) spelled as one file name that
    reads as it and is its own only, never a path: `/` (ALE's `ALE/Breakout-v5`) becomes `+`;
    `+`, `%` and any other character a file name should not hold become `%XX` (UTF-8), as a
    leading `.` does (no `..`, no hidden file). A long text is cut, with a hash of the whole."""
    spelled = "".join(
        c if FILE_NAME_KEPT.fullmatch(c) else "+" if c == "/" else _percent(c) for c in text
    )
    if spelled.startswith(".") or not spelled:
        spelled = "%2E" + spelled[1:] if spelled else "%00"
    if len(spelled) > FILE_NAME_LIMIT:
        digest = hashlib.sha256(text.encode()).hexdigest()[:12]
        spelled = f"{spelled[: FILE_NAME_LIMIT - 13]}-{digest}"
    return spelled


def _percent(c: str) -> str:
    return "".join(f"%{b:02X}" for b in c.encode())


@dataclasses.dataclass(frozen=True)
class RunName:
    """`{env_id}__{exp_name}__{seed}__{unix_time}`: the name of a run's folder under `runs/`
    (`env_id` as `file_env_id` writes it)."""

    env_id: str
    exp_name: str
    seed: int
    start_time: int

    def __str__(self) -> str:
        return f"{self.env_id}__{self.exp_name}__{self.seed}__{self.start_time}"

    def problem(self) -> str | None:
        """Why this cannot be the name of a folder under `runs/` that `parse` reads back, or None."""
        problem = name_problem(self.exp_name, self.env_id)
        if problem is None and not (
            isinstance(self.seed, int) and 0 <= self.seed < MAX_SEED and self.start_time >= 0
        ):
            problem = f"seed {self.seed!r} or start time {self.start_time!r} out of range"
        return problem

    @classmethod
    def new(cls, env_id: str, exp_name: str, seed: int, runs_dir=None) -> RunName:
        """Named after now; a second later if `runs_dir` has a run of that name already.
        `ValueError` when the parts cannot name a folder (`problem`)."""
        name = cls(file_env_id(env_id), exp_name, seed, int(time.time()))
        if name.problem():
            raise ValueError(name.problem())
        while runs_dir is not None and (Path(runs_dir) / str(name)).exists():
            name = dataclasses.replace(name, start_time=name.start_time + 1)
        return name

    @classmethod
    def parse(cls, name: str) -> RunName | None:
        """The parts of a run folder's name; None when it is not one."""
        match = RUN_NAME.fullmatch(name) if isinstance(name, str) else None
        if match is None:
            return None
        return cls(match["env_id"], match["exp_name"], int(match["seed"]), int(match["start_time"]))

    @classmethod
    def checked(cls, name) -> RunName:
        """The parts of a run folder's name read from a file (a checkpoint's `run_name`);
        `ValueError` when it is not one that `new` could have made."""
        parsed = cls.parse(name)
        if parsed is None or parsed.problem() or str(parsed) != name:
            shown = repr(name)[:80]
            raise ValueError(
                f"{shown} is not a run name ({{env_id}}__{{exp_name}}__{{seed}}__{{time}})"
            )
        return parsed


def find_runs(runs_dir: str | os.PathLike, env_id: str, exp_name: str, seed: int) -> list[Path]:
    """The run folders of one exp, env id and seed under `runs_dir`, newest (start time) first."""
    env_id = file_env_id(env_id)
    found = []
    for path in Path(runs_dir).glob(f"{env_id}__{exp_name}__{seed}__*"):
        name = RunName.parse(path.name)
        if (
            path.is_dir()
            and name is not None
            and (name.env_id, name.exp_name, name.seed)
            == (
                env_id,
                exp_name,
                seed,
            )
        ):
            found.append((name.start_time, path.name, path))
    return [path for *_, path in sorted(found, reverse=True)]
