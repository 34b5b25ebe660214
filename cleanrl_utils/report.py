# docs: docs/report.md
"""Tables and plots from the TensorBoard logs of finished runs, offline, in the formats users know.

    python -m cleanrl_utils.report --runs runs/ --output-dir report/ --compare-published

Reads only the scalars it needs (`charts/episodic_return`, `charts/SPS`, the steps and wall
times) straight from the event files, groups the runs by script, env id and seed (from
`config.json`, else from the run name `{env_id}__{exp_name}__{seed}__{unix_time}`), and writes
markdown tables, learning-curve PNGs and a per-run CSV under `--output-dir`. Anything odd about a
run (still running, stopped early, no finished game, a corrupt event file, mixed step budgets)
becomes a note in the report, never a traceback.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import math
import os
import re
import struct
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import tyro

DATA_DIR = Path(__file__).resolve().parent / "data"
HUMAN_RANDOM_SCORES = DATA_DIR / "atari_human_random_scores.csv"
PUBLISHED_RESULTS = DATA_DIR / "published_ppo_atari.csv"

RETURN_TAG = "charts/episodic_return"
SPS_TAG = "charts/SPS"
EVENT_FILE_GLOB = "events.out.tfevents.*"


@dataclass
class Args:
    runs: tuple[str, ...] = ("runs",)
    """run folders, or folders searched (recursively) for run folders: any folder that holds a TensorBoard event file or a `config.json`"""
    output_dir: str = "report"
    """where the markdown files, the PNGs and `runs.csv` are written (created if needed)"""
    title: str = "Benchmark report"
    """the heading of `report.md`"""
    hardware: str = ""
    """the machine the runs ran on, printed at the top of the report (the event files do not record it)"""
    notes: tuple[str, ...] = ()
    """extra paragraphs printed at the top of the report, after the summary of what was read"""
    last_n: int = 100
    """a run's final return is the mean of its last `last_n` games (fewer when it has fewer); the curves use the same running mean"""
    include_unfinished: bool = False
    """also report runs that have not reached their step budget (still running or stopped early); they are always listed in the notes"""
    running_minutes: float = 10.0
    """an unfinished run whose event file changed less than this many minutes ago is reported as still running, an older one as stopped early"""
    wall_clock: bool = False
    """also plot the learning curves against wall-clock time (`curves_*_wallclock.png`)"""
    curve_points: int = 200
    """the number of points on each curve's x-axis"""
    compare_published: bool = False
    """compare with the published CleanRL numbers (`cleanrl_utils/data/published_ppo_atari.csv`): each difference and whether it is inside the seeds' spread"""
    aggregate_min_games: int = 5
    """write the human-normalised median and IQM for a script only when it has at least this many games with known random and human scores"""
    bootstrap_samples: int = 2000
    """the stratified bootstrap resamples behind the aggregate's confidence intervals"""
    confidence: float = 0.95
    """the level of the aggregate's confidence intervals"""
    bootstrap_seed: int = 0
    """the seed of the bootstrap (the same runs and seed give the same intervals)"""


# ---------------------------------------------------------------------------------------------
# Reading event files: TFRecord framing, a few bytes of each Event by hand, and the protobuf
# parser only for the records that hold a wanted tag.
# ---------------------------------------------------------------------------------------------

_RECORD_HEADER = struct.Struct("<QI")  # data length, masked CRC of the length
_DOUBLE = struct.Struct("<d")
_MAX_RECORD_BYTES = 1 << 28


@dataclass
class EventData:
    scalars: dict[str, list[tuple[int, float, float]]]  # tag -> [(step, wall_time, value)]
    first_wall: float | None = None  # the earliest and latest wall time of any record
    last_wall: float | None = None
    last_step: int = 0
    records: int = 0
    problem: str | None = None  # why reading stopped early, if it did
    purge_step: int | None = None  # a resumed run's file: earlier files' steps >= this are void


def _scalar_value(value) -> float | None:
    """The float of a `Summary.Value`: `simple_value` (PyTorch, TF1) or a scalar tensor (TF2)."""
    kind = value.WhichOneof("value")
    if kind == "simple_value":
        return float(value.simple_value)
    if kind == "tensor":
        tensor = value.tensor
        if tensor.float_val:
            return float(tensor.float_val[0])
        if tensor.double_val:
            return float(tensor.double_val[0])
        if tensor.tensor_content:
            dtype = {1: "<f4", 2: "<f8"}.get(tensor.dtype)
            if dtype is not None:
                return float(np.frombuffer(tensor.tensor_content, dtype=dtype)[0])
    return None


def read_event_file(path: str | os.PathLike, tags: tuple[str, ...]) -> EventData:
    """The scalars of `tags` in one event file, with the first and last wall time and the last
    step. Stops at the first record that cannot be read and says why in `problem`, keeping
    everything before it (a run that is still writing ends in a partial record).

    Only the TFRecord framing is walked in Python; the wall times (the first field of every
    Event) are read with numpy, and the protobuf parser sees only the records that contain one
    of `tags`.
    """
    from google.protobuf.message import DecodeError
    from tensorboard.compat.proto import event_pb2
    from tensorboard.compat.proto.event_pb2 import SessionLog

    START = SessionLog.START

    data = Path(path).read_bytes()
    out = EventData(scalars={tag: [] for tag in tags})
    starts, stops = [], []
    pos, end, header = 0, len(data), _RECORD_HEADER.size
    unpack = _RECORD_HEADER.unpack_from
    while pos < end:
        if end - pos < header:
            out.problem = (
                f"ends in a partial record at byte {pos} (still being written, or cut off)"
            )
            break
        length = unpack(data, pos)[0]
        if length > _MAX_RECORD_BYTES:
            out.problem = f"corrupt record at byte {pos} (length {length})"
            break
        if pos + header + length + 4 > end:
            out.problem = (
                f"ends in a partial record at byte {pos} (still being written, or cut off)"
            )
            break
        starts.append(pos + header)
        pos += header + length
        stops.append(pos)
        pos += 4
    starts_arr, stops_arr = np.array(starts, dtype=np.int64), np.array(stops, dtype=np.int64)
    # every Event starts with its wall time: field 1, a double (tag byte 0x09)
    raw = np.frombuffer(data, dtype=np.uint8)
    ok = (stops_arr - starts_arr >= 9) & (raw[np.minimum(starts_arr, end - 1)] == 0x09)
    idx = np.minimum(starts_arr[:, None] + 1 + np.arange(8), end - 1)
    walls = raw[idx].copy().view("<f8")[:, 0] if len(starts) else np.zeros(0)
    ok &= (walls > 1e8) & (walls < 1e11)
    if not ok.all():
        bad = int(np.argmin(ok))
        out.problem = f"corrupt record at byte {starts[bad] - header} (not a TensorBoard event)"
        starts_arr, stops_arr, walls = starts_arr[:bad], stops_arr[:bad], walls[:bad]
    count = len(starts_arr)
    pattern = re.compile(b"|".join(re.escape(tag.encode()) for tag in tags))
    limit = int(stops_arr[-1]) if count else 0
    hits = [m.start() for m in pattern.finditer(data, 0, limit)]
    wanted = sorted(set((np.searchsorted(starts_arr, hits, side="right") - 1).tolist()))
    if count:
        # the last record: the last step; the first few: a resumed run's purge marker
        wanted = sorted(set(wanted) | {count - 1} | set(range(min(count, 3))))
    last_step = 0
    for i in wanted:
        if i < 0:
            continue
        try:
            event = event_pb2.Event.FromString(data[starts_arr[i] : stops_arr[i]])
        except DecodeError:
            out.problem = f"corrupt record at byte {int(starts_arr[i]) - header} (DecodeError)"
            count = i
            break
        if event.HasField("session_log") and event.session_log.status == START:
            out.purge_step = event.step
            continue
        last_step = max(last_step, event.step)
        for value in event.summary.value:
            if value.tag in out.scalars:
                number = _scalar_value(value)
                if number is not None:
                    out.scalars[value.tag].append((event.step, float(walls[i]), number))
    if count:
        out.first_wall, out.last_wall = float(walls[:count].min()), float(walls[:count].max())
    out.last_step, out.records = last_step, count
    return out


# ---------------------------------------------------------------------------------------------
# Runs: discovery, identity (script, env id, seed), status and per-run numbers
# ---------------------------------------------------------------------------------------------

RUN_NAME = re.compile(r"^(?P<env_id>.+?)__(?P<script>.+)__(?P<seed>-?\d+)__(?P<time>\d+)$")


@dataclass
class Run:
    path: Path
    name: str
    script: str | None = None
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
    status: str = "finished"  # finished, running, stopped, unreadable, unknown
    problems: list[str] = field(default_factory=list)

    @property
    def usable(self) -> bool:
        return self.status != "unreadable" and self.script is not None

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
            notes.append(f"no runs under `{raw}` (no folder with an event file or a config.json)")
    unique = {p.resolve(): p for p in reversed(found)}  # each folder once, as first found
    return sorted(unique.values()), notes


def load_run(path: Path, running_minutes: float, now: float) -> Run:
    run = Run(path=path, name=path.name)
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
    match = RUN_NAME.match(run.name) or RUN_NAME.match(path.name)
    run.script = args.get("exp_name") or (match["script"] if match else None)
    run.env_id = args.get("env_id") or (match["env_id"] if match else None)
    seed = args.get("seed", int(match["seed"]) if match else None)
    run.seed = int(seed) if seed is not None else None
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

    files = sorted(path.glob(EVENT_FILE_GLOB))
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
        if age_min < running_minutes:
            run.status = "running"
            run.problems.append(f"still running ({progress}, last write {age_min:.1f} min ago)")
        else:
            run.status = "stopped"
            run.problems.append(
                f"stopped early ({progress}, last write {age_min:.0f} min ago): crashed or killed?"
            )
    if len(run.returns) == 0:
        run.problems.append("no finished game: no return to report")
    return run


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


# ---------------------------------------------------------------------------------------------
# Data kept in the repository: human and random scores, published results
# ---------------------------------------------------------------------------------------------


def _read_csv(path: Path) -> list[dict[str, str]]:
    lines = [line for line in path.read_text().splitlines() if line and not line.startswith("#")]
    return list(csv.DictReader(lines))


def load_human_random(path: Path = HUMAN_RANDOM_SCORES) -> dict[str, tuple[float, float]]:
    """game -> (random score, human score)."""
    return {row["game"]: (float(row["random"]), float(row["human"])) for row in _read_csv(path)}


def load_published(path: Path = PUBLISHED_RESULTS) -> dict[tuple[str, str], dict]:
    """(script, env id) -> the published row, numbers as floats."""
    out = {}
    for row in _read_csv(path):
        out[row["script"], row["env_id"]] = {
            key: float(value) for key, value in row.items() if key not in ("script", "env_id")
        }
    return out


def game_name(env_id: str) -> str:
    """`Pong-v5`, `PongNoFrameskip-v4`, `ALE/Pong-v5` -> `Pong`."""
    name = env_id.split("/")[-1]
    name = re.sub(r"-v\d+$", "", name)
    return re.sub(r"(NoFrameskip|Deterministic)$", "", name)


# ---------------------------------------------------------------------------------------------
# Statistics
# ---------------------------------------------------------------------------------------------


def mean_std(values) -> tuple[float, float]:
    """Mean and population standard deviation (numpy's default, as the published tables)."""
    values = np.asarray(values, dtype=np.float64)
    return float(values.mean()), float(values.std())


def trimmed_mean(values: np.ndarray, proportion: float = 0.25, axis: int = -1) -> np.ndarray:
    """Mean of the values left after cutting `int(proportion * n)` from each end (as
    `scipy.stats.trim_mean`); with 0.25 this is the interquartile mean."""
    values = np.sort(np.asarray(values, dtype=np.float64), axis=axis)
    n = values.shape[axis]
    cut = int(proportion * n)
    return np.take(values, np.arange(cut, n - cut), axis=axis).mean(axis=axis)


def aggregate_with_ci(
    scores_by_game: list[np.ndarray], samples: int, confidence: float, seed: int
) -> dict[str, tuple[float, float, float]]:
    """Median (over games, of each game's mean over seeds) and interquartile mean (over all
    runs of all games) of normalised scores, each with a stratified bootstrap percentile
    interval: the seeds of each game are resampled with replacement, games kept fixed."""
    rng = np.random.default_rng(seed)
    game_means, pooled = [], []
    for scores in scores_by_game:
        idx = rng.integers(0, len(scores), size=(samples, len(scores)))
        resampled = scores[idx]
        game_means.append(resampled.mean(axis=1))
        pooled.append(resampled)
    boot_median = np.median(np.stack(game_means, axis=1), axis=1)
    boot_iqm = trimmed_mean(np.concatenate(pooled, axis=1), 0.25, axis=1)
    alpha = (1 - confidence) / 2
    point_median = float(np.median([s.mean() for s in scores_by_game]))
    point_iqm = float(trimmed_mean(np.concatenate(scores_by_game), 0.25))
    return {
        "median": (point_median, *np.quantile(boot_median, [alpha, 1 - alpha]).tolist()),
        "iqm": (point_iqm, *np.quantile(boot_iqm, [alpha, 1 - alpha]).tolist()),
    }


# ---------------------------------------------------------------------------------------------
# The report
# ---------------------------------------------------------------------------------------------


@dataclass
class Cell:
    """The runs of one script on one env id."""

    runs: list[Run]
    finals: list[float]  # final return of each run that has one


def fmt(x: float | None, digits: int = 2) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:,.{digits}f}"


def plural(n: int | None, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def fmt_steps(steps: int) -> str:
    return f"{steps:,}"


def markdown_table(header: list[str], rows: list[list[str]], align: list[str] | None = None) -> str:
    align = align or ["l"] + ["r"] * (len(header) - 1)
    rule = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(rule) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


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
    def __init__(self, args: Args, runs: list[Run], notes: list[str]):
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

    # -- notes ----------------------------------------------------------------------------

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

    # -- tables ---------------------------------------------------------------------------

    def _seed_counts(self, scripts, env_ids, attr: str = "runs") -> int | None:
        """The most seeds of any cell (its `runs`, or its `finals`: runs with a game)."""
        cells = [self.cells[s, e] for s in scripts for e in env_ids if (s, e) in self.cells]
        return max((len(getattr(cell, attr)) for cell in cells), default=None)

    def returns_cell(self, script: str, env_id: str, usual_n: int | None) -> str:
        cell = self.cells.get((script, env_id))
        if cell is None:
            return ""
        if not cell.finals:
            return "no finished game"
        mean, std = mean_std(cell.finals)
        text = f"{mean:.2f} ± {std:.2f}"
        return text if len(cell.finals) == usual_n else f"{text} (n={len(cell.finals)})"

    def returns_table(self, scripts: list[str], env_ids: list[str]) -> str:
        usual = self._seed_counts(scripts, env_ids, "finals")
        rows = [[e] + [self.returns_cell(s, e, usual) for s in scripts] for e in env_ids]
        return markdown_table(["env"] + scripts, rows)

    def _per_cell_mean(self, scripts, env_ids, value) -> str:
        rows = []
        for env_id in env_ids:
            row = [env_id]
            for script in scripts:
                cell = self.cells.get((script, env_id))
                values = [value(r) for r in cell.runs] if cell else []
                values = [v for v in values if v is not None]
                row.append(
                    fmt(float(np.mean(values))) if values else ("" if cell is None else "n/a")
                )
            rows.append(row)
        return markdown_table(["env"] + scripts, rows)

    def runtimes_table(self, scripts, env_ids) -> str:
        return self._per_cell_mean(
            scripts, env_ids, lambda r: r.runtime_s / 60 if r.runtime_s is not None else None
        )

    def sps_table(self, scripts, env_ids) -> str:
        return self._per_cell_mean(scripts, env_ids, lambda r: r.sps)

    def speed_table(self, script: str, env_ids: list[str]) -> str:
        rows = []
        for env_id in env_ids:
            runs = self.cells[script, env_id].runs
            minutes = [r.runtime_s / 60 for r in runs if r.runtime_s is not None]
            sps = [r.sps for r in runs if r.sps is not None]
            rows.append([env_id] + [fmt(float(np.mean(v))) if v else "n/a" for v in (minutes, sps)])
        return markdown_table(["env", "minutes", "SPS"], rows)

    def describe_set(self, scripts, env_ids) -> str:
        cells = [self.cells[s, e] for s in scripts for e in env_ids if (s, e) in self.cells]
        runs = [r for cell in cells for r in cell.runs]
        steps = sorted({r.last_step for r in runs})
        seeds = sorted({r.seed for r in runs}, key=str)
        counts = sorted({len(cell.runs) for cell in cells})
        per_cell = (
            plural(counts[0], "seed") if len(counts) == 1 else f"{counts[0]} to {counts[-1]} seeds"
        )
        return (
            f"{plural(len(runs), 'run')}; {per_cell} per cell "
            f"(seeds {', '.join(map(str, seeds))}); "
            f"{' / '.join(map(fmt_steps, steps))} env steps per run"
        )

    # -- learning curves ------------------------------------------------------------------

    def curve(
        self, runs: list[Run], wall_clock: bool
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """Mean and std over runs of each run's running mean of its last `last_n` games,
        on a grid over the range that every run covers."""
        series = []
        for run in runs:
            if len(run.returns) == 0:
                continue
            running = np.convolve(run.returns, np.ones(self.args.last_n), "full")[
                : len(run.returns)
            ]
            running /= np.minimum(np.arange(1, len(run.returns) + 1), self.args.last_n)
            if wall_clock:
                x = np.maximum.accumulate((run.walls - run.start_wall) / 60)
                end = (run.runtime_s or 0) / 60
            else:
                x = run.steps.astype(np.float64)
                end = float(run.last_step)
            series.append((x, running, max(end, x[-1])))
        if not series:
            return None
        lo, hi = max(s[0][0] for s in series), min(s[2] for s in series)
        if hi < lo:
            hi = lo
        grid = np.linspace(lo, hi, self.args.curve_points)
        values = np.stack([np.interp(grid, x, y) for x, y, _ in series])
        return grid, values.mean(axis=0), values.std(axis=0)

    def plot_set(self, scripts, env_ids, path: Path, wall_clock: bool) -> list[str]:
        """One panel per env id, one line per script; returns the panel titles."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        nrows, ncols = panel_grid(len(env_ids))
        fig, axes = plt.subplots(
            nrows,
            ncols,
            figsize=(PANEL_SIZE[0] * ncols, PANEL_SIZE[1] * nrows + LEGEND_HEIGHT),
            dpi=PLOT_DPI,
            squeeze=False,
            layout="constrained",
        )
        colors = plt.get_cmap("tab10")
        titles = []
        for i, ax in enumerate(axes.flat):
            if i >= len(env_ids):
                ax.set_axis_off()
                continue
            env_id = env_ids[i]
            titles.append(env_id)
            ax.set_title(env_id, fontsize=10)
            for script in scripts:
                cell = self.cells.get((script, env_id))
                result = self.curve(cell.runs, wall_clock) if cell else None
                color = colors(self.scripts.index(script) % 10)
                if result is None:
                    ax.plot([], [], color=color, label=script)
                    continue
                x, mean, std = result
                ax.plot(x, mean, color=color, label=script, linewidth=1.5)
                ax.fill_between(x, mean - std, mean + std, color=color, alpha=0.2, linewidth=0)
            ax.set_xlabel("wall-clock time (minutes)" if wall_clock else "env steps", fontsize=8)
            ax.set_ylabel("episodic return", fontsize=8)
            ax.tick_params(labelsize=7)
            ax.grid(alpha=0.3)
        handles, labels = axes.flat[0].get_legend_handles_labels()
        fig.legend(
            handles, labels, loc="outside upper center", ncol=min(len(scripts), 3), fontsize=8
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=PLOT_DPI)
        plt.close(fig)
        return titles

    # -- human-normalised aggregate -------------------------------------------------------

    def aggregate_section(self) -> str:
        scores = load_human_random()
        args = self.args
        rows, lines = [], []
        for script in self.scripts:
            by_game, missing = [], []
            for (s, env_id), cell in sorted(self.cells.items()):
                if s != script or not cell.finals:
                    continue
                game = game_name(env_id)
                if game not in scores:
                    missing.append(env_id)
                    continue
                random, human = scores[game]
                by_game.append((np.asarray(cell.finals) - random) / (human - random))
            if missing:
                lines.append(f"{script}: no random and human scores for {', '.join(missing)}")
            if len(by_game) < args.aggregate_min_games:
                lines.append(
                    f"{script}: {plural(len(by_game), 'game')} with known "
                    f"scores, fewer than `--aggregate-min-games` {args.aggregate_min_games}: "
                    "no aggregate"
                )
                continue
            agg = aggregate_with_ci(
                by_game, args.bootstrap_samples, args.confidence, args.bootstrap_seed
            )
            rows.append(
                [script, str(len(by_game)), str(sum(len(g) for g in by_game))]
                + [f"{p:.3f} [{lo:.3f}, {hi:.3f}]" for p, lo, hi in (agg["median"], agg["iqm"])]
            )
        level = f"{100 * args.confidence:g}%"
        text = (
            "Human-normalised score per run: (return - random) / (human - random), with the "
            "random and human scores of `cleanrl_utils/data/atari_human_random_scores.csv`. "
            "Median: over games, of each game's mean over seeds. IQM: the mean of the middle "
            f"50% of all runs' scores. [{level} stratified bootstrap interval, "
            f"{args.bootstrap_samples} resamples of the seeds of each game, seed {args.bootstrap_seed}.]\n\n"
        )
        if rows:
            text += markdown_table(["script", "games", "runs", "median", "IQM"], rows)
        if not rows:
            text += "No script has enough games for an aggregate.\n"
        if lines:
            text += "\n" + "".join(f"- {line}\n" for line in lines)
        return text

    # -- comparison with the published numbers --------------------------------------------

    def comparison_section(self) -> str:
        published = load_published()
        rows, runtime_rows = [], []
        for (script, env_id), cell in sorted(self.cells.items()):
            ref = published.get((script, env_id))
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
        unmatched = sorted({s for s, _ in self.cells} - {s for s, _ in published})
        for script in unmatched:
            self.notes.append(f"comparison: no published numbers for {script}")
        if not rows:
            return "None of these runs has a published counterpart (script and env id).\n"
        text = (
            "Ours against the published CleanRL numbers (REFERENCE.md; 3 seeds, 10M steps, "
            "one GPU machine). *inside spread*: yes when the difference is at most the sum of "
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

    # -- output ---------------------------------------------------------------------------

    def runs_table(self) -> str:
        rows = []
        for run in sorted(
            self.runs, key=lambda r: (str(r.script), str(r.env_id), str(r.seed), r.name)
        ):
            rows.append(
                [
                    f"`{run.name}`",
                    str(run.script),
                    str(run.env_id),
                    str(run.seed),
                    fmt_steps(run.last_step),
                    str(len(run.returns)),
                    fmt(run.final_return(self.args.last_n)),
                    fmt(run.runtime_s / 60 if run.runtime_s is not None else None),
                    fmt(run.sps, 0),
                    run.status,
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
            ],
            rows,
            ["l", "l", "l", "r", "r", "r", "r", "r", "r", "l"],
        )

    def write(self) -> dict[str, str]:
        """Write every output file; returns {file name: markdown} of the fragments."""
        args = self.args
        out = Path(args.output_dir)
        out.mkdir(parents=True, exist_ok=True)
        for old in out.glob("curves_*.png"):
            old.unlink()
        fragments: dict[str, str] = {}
        last_n = f"the mean of its last {args.last_n} games (fewer when it has fewer)"
        returns = (
            f"Episodic return (the real game score over all lives): mean ± std over seeds of each "
            f"run's final return, {last_n}. (n=k): a cell with fewer seeds than the others.\n\n"
        )
        runtimes = (
            "Minutes per run (wall clock from the first to the last event), mean over seeds.\n\n"
        )
        sps = "Steps per second (each run's last `charts/SPS`, its average over the run), mean over seeds.\n\n"
        curves = (
            f"Return against env steps: for each run the running mean of its last {args.last_n} "
            "games, then the mean over seeds (line) ± one std (band), over the steps every seed "
            "covers; the last point of a curve is the table's cell.\n\n"
        )
        per_script: dict[str, list[str]] = defaultdict(list)
        have_matplotlib = importlib.util.find_spec("matplotlib") is not None
        if not have_matplotlib and self.cells:
            self.notes.append(
                'no plots: matplotlib is not installed (`pip install -e ".[report]"`)'
            )
        plotted: set[str] = set()
        for scripts, env_ids in self.sets:
            slug = scripts[0]
            heading = f"### {', '.join(scripts)}\n\n{self.describe_set(scripts, env_ids)}\n\n"
            returns += heading + self.returns_table(scripts, env_ids) + "\n"
            runtimes += heading + self.runtimes_table(scripts, env_ids) + "\n"
            sps += heading + self.sps_table(scripts, env_ids) + "\n"
            images = [(f"curves_{slug}.png", False)]
            if args.wall_clock:
                images.append((f"curves_{slug}_wallclock.png", True))
            curves += heading
            for name, wall in images:
                if not have_matplotlib:
                    continue
                try:
                    self.plot_set(scripts, env_ids, out / name, wall)
                except Exception as exc:  # a plot must never take the tables down with it
                    self.notes.append(f"plot `{name}` failed: {type(exc).__name__}: {exc}")
                    continue
                curves += f"![{', '.join(scripts)}: learning curves]({name})\n\n"
                plotted.add(name)
            for script in scripts:
                envs = [e for e in env_ids if (script, e) in self.cells]
                per_script[script] += [
                    f"Final return ({self.describe_set([script], envs)}):\n\n",
                    self.returns_table([script], envs),
                    "\nMinutes per run and steps per second, mean over seeds:\n\n",
                    self.speed_table(script, envs),
                ]
                if f"curves_{slug}.png" in plotted:
                    per_script[script].append(f"\n![learning curves](curves_{slug}.png)\n")
        if not self.cells:
            empty = "No finished runs to report (see the notes).\n"
            returns += empty
            runtimes += empty
            sps += empty
            curves += empty
        fragments["returns.md"] = returns
        fragments["runtimes.md"] = runtimes + "\n" + sps
        fragments["curves.md"] = curves
        fragments["aggregate.md"] = self.aggregate_section() if self.cells else "No runs.\n"
        if args.compare_published:
            fragments["comparison.md"] = self.comparison_section() if self.cells else "No runs.\n"
        fragments["runs.md"] = self.runs_table() if self.runs else "No runs found.\n"
        fragments["notes.md"] = (
            "".join(f"- {note}\n" for note in self.notes)
            if self.notes
            else "None: every run read cleanly.\n"
        )
        page = [f"# {args.title}\n\n", self.summary(), "\n"]
        sections = [
            ("Returns", "returns.md"),
            ("Learning curves", "curves.md"),
            ("Runtimes and speed", "runtimes.md"),
            ("Human-normalised aggregate", "aggregate.md"),
            ("Against the published numbers", "comparison.md"),
            ("Notes", "notes.md"),
            ("Runs", "runs.md"),
        ]
        for title, name in sections:
            if name in fragments:
                page += [f"## {title}\n\n", fragments[name].strip() + "\n\n"]
        fragments["report.md"] = "".join(page).rstrip() + "\n"
        for script, parts in per_script.items():
            name = f"{script}.md" if f"{script}.md" not in fragments else f"script_{script}.md"
            fragments[name] = (
                f"# `{script}`: benchmark\n\n{self.summary(script)}\n"
                + "".join(parts)
                + "\nAll scripts, the notes and every run: [the full report](report.md).\n"
            )

        for name, text in fragments.items():
            (out / name).write_text(text)
        self.write_csv(out / "runs.csv")
        return fragments

    def summary(self, script: str | None = None) -> str:
        """Hardware, runs, seeds, step budget, dates and commits, of one script or of all."""
        args = self.args
        reported = [r for r in self.reported if script is None or r.script == script]
        scripts = sorted({r.script for r in reported})
        lines = []
        if args.hardware:
            lines.append(f"**Hardware**: {args.hardware}")
        if reported:
            steps = sorted({r.last_step for r in reported})
            seeds = sorted({r.seed for r in reported}, key=str)
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
            found = f" of {len(self.runs)} found" if script is None else ""
            lines += [
                f"**Runs**: {len(reported)} reported{found}: "
                f"{plural(len(scripts), 'script')} ({', '.join(scripts)}), "
                f"{plural(len({r.env_id for r in reported}), 'env id')}, "
                f"seeds {', '.join(map(str, seeds))}.",
                f"**Step budget**: {' / '.join(map(fmt_steps, steps))} env steps per run.",
                f"**Dates**: {dates} (UTC); code at {'commits' if len(commits) > 1 else 'commit'} "
                f"{', '.join(commits)}{dirty}.",
            ]
        else:
            lines.append(f"**Runs**: none reported ({len(self.runs)} found).")
        if self.notes and script is None:
            lines.append(f"**Notes**: {len(self.notes)} (see [Notes](#notes)).")
        text = "  \n".join(lines) + "\n"
        for note in args.notes:
            text += f"\n{note}\n"
        return text

    def write_csv(self, path: Path) -> None:
        with path.open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(
                [
                    "run",
                    "script",
                    "env_id",
                    "seed",
                    "steps",
                    "budget",
                    "games",
                    "final_return",
                    "runtime_minutes",
                    "sps",
                    "status",
                    "path",
                ]
            )
            for run in self.runs:
                final = run.final_return(self.args.last_n)
                writer.writerow(
                    [
                        run.name,
                        run.script,
                        run.env_id,
                        run.seed,
                        run.last_step,
                        run.budget,
                        len(run.returns),
                        "" if final is None else f"{final:.6g}",
                        "" if run.runtime_s is None else f"{run.runtime_s / 60:.4f}",
                        "" if run.sps is None else f"{run.sps:.2f}",
                        run.status,
                        str(run.path),
                    ]
                )


PANEL_SIZE = (4.0, 3.0)  # inches per panel
LEGEND_HEIGHT = 0.5  # inches above the panels for the legend
PLOT_DPI = 100


def panel_grid(n: int) -> tuple[int, int]:
    """(rows, columns) of the panels for n env ids: up to 3 columns, more for many games."""
    ncols = min(n, 3) if n <= 9 else math.ceil(math.sqrt(n))
    return math.ceil(n / max(ncols, 1)), max(ncols, 1)


def plot_size(n_envs: int) -> tuple[int, int]:
    """(width, height) in pixels of a learning-curve PNG with n_envs panels."""
    nrows, ncols = panel_grid(n_envs)
    return (
        round(PANEL_SIZE[0] * ncols * PLOT_DPI),
        round((PANEL_SIZE[1] * nrows + LEGEND_HEIGHT) * PLOT_DPI),
    )


def main(argv: list[str] | None = None) -> int:
    from cleanrl_utils.checks import fail

    args = tyro.cli(
        Args, args=argv, prog="python -m cleanrl_utils.report", description=__doc__.split("\n\n")[0]
    )
    for path in args.runs:
        if not Path(path).is_dir():
            fail(f"--runs: `{path}` is not a folder")
    if args.last_n < 1:
        fail(f"--last-n must be at least 1, got {args.last_n}")
    if args.curve_points < 2:
        fail(f"--curve-points must be at least 2, got {args.curve_points}")
    if args.bootstrap_samples < 1:
        fail(f"--bootstrap-samples must be at least 1, got {args.bootstrap_samples}")
    if not 0 < args.confidence < 1:
        fail(f"--confidence must be between 0 and 1, got {args.confidence}")

    dirs, notes = find_run_dirs(args.runs)
    now = time.time()
    runs = []
    for path in dirs:
        try:
            runs.append(load_run(path, args.running_minutes, now))
        except Exception as exc:  # one bad run folder must not stop the report
            run = Run(path=path, name=path.name, status="unreadable")
            run.problems.append(f"could not be read ({type(exc).__name__}: {exc})")
            runs.append(run)
    report = Report(args, runs, notes)
    fragments = report.write()

    print(fragments["returns.md"])
    print("notes:")
    print(fragments["notes.md"])
    print(f"report written to {Path(args.output_dir) / 'report.md'}")
    return 0 if report.cells else 1


if __name__ == "__main__":
    sys.exit(main())
