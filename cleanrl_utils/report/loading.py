"""Run folders as read back from their logs: finding them, telling their script, env id and seed
(from `config.json`, else from the run name), their status (finished, still running, stopped
early with or without a checkpoint, unreadable) and the numbers the report needs from their
event files."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from cleanrl_utils.files.run_names import RunName
from cleanrl_utils.files.state_file import list_checkpoints
from cleanrl_utils.report.events import event_files, read_event_file
from cleanrl_utils.report.tables import plural

RETURN_TAG = "charts/episodic_return"
SPS_TAG = "charts/SPS"
CHECKPOINT_ITERATION = re.compile(r"checkpoint_(\d+)\.ckpt$")
PUBLISHED = {"name": "published"}  # the protocol of the published CleanRL runs (docs/published.md)
PUBLISHED_EPISODE_STEPS = 108_000  # their time limit, in agent steps (EnvPool's, ALE's scripts)


def shown(name: str | os.PathLike) -> str:
    """A file name or path as text that can be written (UTF-8): the bytes of a name that are
    not UTF-8, which Python reads as lone surrogates (`\\udcff`), spelled `\\xff`."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


@dataclass
class RunLog:
    """A run as read from its folder: `config.json` and the TensorBoard event files."""

    path: Path
    name: str
    script: str | None = None  # its column: the exp name, or the variant (`variants.py`)
    exp_name: str | None = None  # the exp name it was given
    env_id: str | None = None
    seed: int | None = None
    config: dict | None = None
    steps: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    walls: np.ndarray = field(default_factory=lambda: np.zeros(0))
    returns: np.ndarray = field(default_factory=lambda: np.zeros(0))
    sps: float | None = None
    last_step: int = 0
    budget: int | None = None  # the steps the run was asked for (from config.json)
    start_wall: float | None = None
    runtime_s: float | None = None
    last_write: float | None = None  # mtime of the newest event file
    status: str = (
        "finished"  # finished, running, resumable, stopped, unreadable, unknown; unselected
    )
    problems: list[str] = field(default_factory=list)
    not_numbers: int = 0  # games whose return is NaN or infinite
    protocol: dict = field(default_factory=lambda: dict(PUBLISHED))  # `read_protocol`
    sweep: str | None = None  # the launcher's or tuner's sweep that started it (config.json)

    @property
    def usable(self) -> bool:
        """Its numbers can be counted: readable, and every return a number (one NaN would make
        its cell's mean ± std, its curve and the aggregate NaN)."""
        return self.status != "unreadable" and self.script is not None and not self.not_numbers

    @property
    def script_file(self) -> str | None:
        """The training script it ran (`ppo_atari_envpool` for `python
        cleanrl/ppo_atari_envpool.py ...`), from its config.json's command; None if unknown."""
        command = (self.config or {}).get("command")
        if isinstance(command, list) and command and isinstance(command[0], str):
            if command[0].endswith(".py"):
                return Path(command[0]).stem
        return None

    @property
    def tuner_trial(self) -> tuple[str, int] | None:
        """(study, trial) of a run the tuner started, from its config.json; None otherwise."""
        tag = (self.config or {}).get("tuner")
        if isinstance(tag, dict) and isinstance(tag.get("trial"), int):
            return str(tag.get("study")), tag["trial"]
        return None

    @property
    def finished(self) -> bool:
        """Reached its step budget (or has none to tell): reported without
        `--include-unfinished`."""
        return self.status in ("finished", "unknown")

    @property
    def where(self) -> str:
        """Its path as the report writes it (see `shown`)."""
        return shown(self.path)

    def final_return(self, last_n: int) -> float | None:
        return float(np.mean(self.returns[-last_n:])) if len(self.returns) else None


def find_run_dirs(paths: tuple[str, ...]) -> tuple[list[Path], list[str]]:
    """Every run folder under `paths` (a folder with an event file or a `config.json`), and a
    note for each path that holds none."""
    found: list[Path] = []
    notes = []
    for raw in paths:
        root = Path(raw)
        before = len(found)
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "wandb")))
            if "config.json" in filenames or any(
                name.startswith("events.out.tfevents.") for name in filenames
            ):
                found.append(Path(dirpath))
                dirnames[:] = []  # a run's subfolders (add_scalars, videos) are part of it
        if len(found) == before:
            notes.append(
                f"no runs under `{shown(raw)}` (no folder with an event file or a config.json)"
            )
    unique = {p.resolve(): p for p in reversed(found)}  # each folder once, as first found
    return sorted(unique.values()), notes


def read_protocol(config: dict | None) -> dict:
    """The evaluation protocol a run ran under: config.json's `protocol` (`{"name": "published" |
    "machado" | "custom", ...its settings}`); for a run made before runs recorded it, `published`
    when its arguments agree with the published runs' (a time limit of 108,000 steps, or none
    among its flags), else `custom`. The one place the report reads a protocol."""
    recorded = (config or {}).get("protocol")
    if isinstance(recorded, dict) and isinstance(recorded.get("name"), str):
        return dict(recorded)
    args = (config or {}).get("args")
    steps = args.get("max_episode_steps") if isinstance(args, dict) else None
    if steps is None or steps == PUBLISHED_EPISODE_STEPS:
        return dict(PUBLISHED)
    return {"name": "custom", "max_episode_steps": steps}


def load_run(
    path: Path, running_minutes: float, now: float, select: Callable[[RunLog], bool] | None = None
) -> RunLog:
    """A run folder read back. With `select`, a run it rejects (from its config.json and name)
    is returned with status `unselected`, its event files not read."""
    run = RunLog(path=path, name=shown(path.name))
    if run.name != path.name:
        run.problems.append(
            f"its folder's name is not UTF-8: written `{run.name}` here, each byte that is not as "
            "`\\xNN`"
        )
    config_path = path / "config.json"
    if config_path.exists():
        try:
            run.config = json.loads(config_path.read_text())
            if not isinstance(run.config, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError) as exc:
            run.config = None
            run.problems.append(f"unreadable config.json ({exc}); identity taken from the name")
    args = (run.config or {}).get("args")
    args = args if isinstance(args, dict) else {}
    if run.config and run.config.get("run_name"):
        run.name = str(run.config["run_name"])
    named = RunName.parse(run.name) or RunName.parse(shown(path.name))
    script = args.get("exp_name") or (named.exp_name if named else None)
    run.script = run.exp_name = None if script is None else str(script)
    env_id = args.get("env_id") or (named.env_id if named else None)
    run.env_id = None if env_id is None else str(env_id)
    seed = args.get("seed", named.seed if named else None)
    run.seed = int(seed) if seed is not None else None
    run.protocol = read_protocol(run.config)
    sweep = (run.config or {}).get("sweep")
    run.sweep = None if sweep is None else str(sweep)
    if select is not None and not select(run):  # (before its event files are read)
        run.status = "unselected"
        return run
    if run.script is None or run.env_id is None:
        run.status = "unreadable"
        run.problems.append(
            "cannot tell its script and env id: no usable config.json and the folder name is "
            "not `{env_id}__{exp_name}__{seed}__{unix_time}`"
        )
        return run
    batch, iterations = args.get("batch_size") or 0, args.get("num_iterations") or 0
    if batch and iterations:
        run.budget = int(batch) * int(iterations)
    elif args.get("total_timesteps"):
        run.budget = int(args["total_timesteps"])

    files = event_files(path)
    if not files:
        run.status = "unreadable"
        run.problems.append("no TensorBoard event file")
        return run
    episodes: list[tuple[int, float, float]] = []
    sps: list[tuple[int, float, float]] = []
    spans = []
    resumed = 0
    for file in files:
        try:
            data = read_event_file(file, (RETURN_TAG, SPS_TAG))
        except OSError as exc:
            run.problems.append(f"cannot read `{file.name}` ({exc.strerror or exc})")
            continue
        if data.problem:
            kept = f"read the {data.records} records before it" if data.records else "nothing read"
            run.problems.append(f"`{file.name}` {data.problem}; {kept}")
        if data.bad_records:
            run.problems.append(
                f"`{file.name}`: {plural(data.bad_records, 'record')} failed the checksum, dropped"
            )
        if data.records == 0:
            continue
        if data.purge_step is not None:  # resumed from a checkpoint: what came after it is void
            resumed += 1
            episodes = [e for e in episodes if e[0] < data.purge_step]
            sps = [e for e in sps if e[0] < data.purge_step]
            run.last_step = min(run.last_step, data.purge_step - 1)
        episodes += data.scalars[RETURN_TAG]
        sps += data.scalars[SPS_TAG]
        spans.append((data.first_wall, data.last_wall))
        run.last_step = max(run.last_step, data.last_step)
        mtime = file.stat().st_mtime
        run.last_write = mtime if run.last_write is None else max(run.last_write, mtime)
    if not spans:
        run.status = "unreadable"
        run.problems.append("no readable event in its event files")
        return run
    if resumed:
        run.problems.append(f"resumed from a checkpoint ({plural(resumed, 'time')})")
    elif len(files) > 1:
        run.problems.append(f"{len(files)} event files, read together")
    episodes.sort(key=lambda e: (e[0], e[1]))  # by step (several files: by step, then time)
    run.steps = np.array([e[0] for e in episodes], dtype=np.int64)
    run.walls = np.array([e[1] for e in episodes], dtype=np.float64)
    run.returns = np.array([e[2] for e in episodes], dtype=np.float64)
    run.start_wall = min(s for s, _ in spans)
    run.runtime_s = _union_length(spans)
    if sps:
        run.sps = max(sps, key=lambda e: (e[0], e[1]))[2]  # the last one: the run's average
    elif run.runtime_s:
        run.sps = run.last_step / run.runtime_s

    if run.budget is None:
        run.status = "unknown"
        run.problems.append("no step budget in config.json: cannot tell whether it finished")
    elif run.last_step < run.budget:
        age_min = (now - run.last_write) / 60
        progress = f"{run.last_step:,} of {run.budget:,} steps"
        mark = (run.config or {}).get("stopped")  # a stop signal's checkpoint, not resumed since
        if isinstance(mark, dict) and mark.get("global_step", -1) >= run.last_step:
            at = f"{progress}, stopped by {mark.get('signal', 'a signal')} {age_min:.0f} min ago"
            run.status, note = stopped(run, at)
            run.problems.append(note)
        elif age_min < running_minutes:
            run.status = "running"
            run.problems.append(f"still running ({progress}, last write {age_min:.1f} min ago)")
        else:
            run.status, note = stopped(run, f"{progress}, last write {age_min:.0f} min ago")
            run.problems.append(note)
    if len(run.returns) == 0:
        run.problems.append("no finished game: no return to report")
    run.not_numbers = int((~np.isfinite(run.returns)).sum())
    if run.not_numbers:
        run.problems.append(
            f"{plural(run.not_numbers, 'game')} of {len(run.returns)} with a NaN or infinite "
            f"`{RETURN_TAG}`: its score is not a number, so it is left out of every table, "
            "curve and aggregate"
        )
    return run


def stopped(run: RunLog, progress: str) -> tuple[str, str]:
    """The status and note of a run below its budget whose logs no longer change: `resumable`
    when it has a checkpoint (a stop signal writes one at the iteration it stops), else
    `stopped`."""
    checkpoints = list_checkpoints(run.path)
    if not checkpoints:
        return "stopped", f"stopped early ({progress}): crashed or killed?"
    resume = f"`--resume {run.where}` continues it"
    match = CHECKPOINT_ITERATION.search(checkpoints[0].name)
    batch = ((run.config or {}).get("args") or {}).get("batch_size")
    if match is None or not batch:
        return "resumable", f"stopped, resumable ({progress}): {resume}"
    at = int(match.group(1)) * int(batch)
    if at >= run.last_step:
        return "resumable", f"stopped, resumable ({progress}, checkpointed): {resume}"
    return "resumable", (
        f"stopped, resumable ({progress}): crashed or killed after its checkpoint at "
        f"{at:,} steps; {resume} from there"
    )


def _union_length(spans: list[tuple[float, float]]) -> float:
    total, current_start, current_end = 0.0, None, None
    for start, end in sorted(spans):
        if current_end is None or start > current_end:
            if current_end is not None:
                total += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    return total + (current_end - current_start if current_end is not None else 0.0)


def load_runs(
    dirs: list[Path], running_minutes: float, now: float, select: Callable | None = None
) -> list[RunLog]:
    """`load_run` of each folder; a folder that cannot be read at all becomes an unreadable run
    with a note, so one bad folder never stops the report."""
    runs = []
    for path in dirs:
        try:
            runs.append(load_run(path, running_minutes, now, select))
        except Exception as exc:
            run = RunLog(path=path, name=shown(path.name), status="unreadable")
            run.problems.append(f"could not be read ({type(exc).__name__}: {exc})")
            runs.append(run)
    return runs
