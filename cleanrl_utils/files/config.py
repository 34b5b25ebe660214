"""Run folders on disk: their names, how to find them, and what each records about itself."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cleanrl_utils.envs import protocols
from cleanrl_utils.files import machine
from cleanrl_utils.files.sweeps import current_sweep, tuner_trial

REPO_ROOT = Path(__file__).resolve().parent.parent


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


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write to a temporary file in the same folder, fsync, then rename over `path`.

    A crash mid-write leaves the previous file (or no file) behind, never a truncated one.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMP_SUFFIX)
    try:
        os.chmod(tmp, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)  # the rename itself survives a power cut


TEMP_SUFFIX = ".tmp"  # `.{name}.XXXXXXXX.tmp`: what a write killed before its rename leaves


def fsync_dir(folder: str | os.PathLike) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_temp_files(folder: str | os.PathLike) -> list[Path]:
    """Removes what `atomic_write_bytes` calls killed before their rename left in `folder`
    (only safe while no other process writes there: the run's lock). Returns them."""
    found = [p for p in Path(folder).glob(f".*{TEMP_SUFFIX}") if p.is_file()]
    for p in found:
        p.unlink(missing_ok=True)
    return found


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def git_version(cwd: Path = REPO_ROOT) -> dict:
    """The commit and dirty state of the code that runs, or "unknown" where there is no git."""

    def git(*cmd: str) -> str | None:
        try:
            out = subprocess.run(
                ["git", *cmd], cwd=cwd, capture_output=True, text=True, timeout=5, check=True
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip()

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return {"commit": "unknown", "dirty": None}
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(status)}


def slurm_task() -> dict | None:
    """The SLURM job (and array task) this process runs in, None outside SLURM."""
    names = {"job_id": "SLURM_JOB_ID", "array_job_id": "SLURM_ARRAY_JOB_ID"}
    names["array_task_id"] = "SLURM_ARRAY_TASK_ID"
    task = {key: os.environ[name] for key, name in names.items() if name in os.environ}
    return task or None


# Free arguments that say what the run does besides learning: a resume that does not give them
# carries the checkpoint's on (the resume command a stopped run prints names only the folder)
CARRIED_ARGS = {
    "track",
    "wandb_project_name",
    "wandb_entity",
    "capture_video",
    "save_model",
    "eval_episodes",
    "checkpoint_every",
    "upload_model",
    "hf_entity",
}
# Arguments that may change between a run and its resumption: they do not change what is learned.
FREE_ARGS = CARRIED_ARGS | {
    "resume",
    "cuda",
    "compile",
    "cudagraphs",
    "async_envs",
    "backend",  # (the multi-process scripts: how the processes talk, and on which GPUs)
    "device_ids",
}
# Arguments derived from the others once they are reconciled with the checkpoint.
DERIVED_ARGS = {"batch_size", "minibatch_size", "num_iterations"}
# What names a run rather than its experiment: its folder holds them (`RunName`).
IDENTITY_ARGS = {"exp_name", "env_id", "seed"}


def experiment_args(args: dict) -> dict:
    """The arguments of a run (config.json's `args`) that define its experiment: every one but
    the seed, the env id, the exp name, the protocol's settings (a run's `protocol` record tells
    those apart), the free arguments (what a resume may change: tracking, video, saving,
    upload, checkpoint cadence, devices...) and those derived from the others. Two runs of one
    exp name whose experiment arguments differ are two variants, never two seeds of one."""
    left_out = FREE_ARGS | DERIVED_ARGS | IDENTITY_ARGS | {"protocol", *protocols.SETTINGS}
    return {key: value for key, value in args.items() if key not in left_out}


def run_record(args, run_name: str) -> dict:
    """Everything needed to tell later what produced a run: the arguments, the command as it was
    typed (and where), the code version, the machine and the package versions, the SLURM task,
    the sweep the launcher or the tuner started it in (`cleanrl_utils.files.sweeps`), the tuner's trial,
    and the protocol of the games (`cleanrl_utils.envs.protocols`; the device the agent trains on is
    added once the script has built it: `run_logs.record_device`)."""
    record = {
        "run_name": run_name,
        "protocol": protocols.record(args),
        "args": dataclasses.asdict(args),
        "command": list(sys.argv),
        "cwd": os.getcwd(),
        "git": git_version(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": machine.packages(),
        "start_time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "slurm": slurm_task(),
        "sweep": current_sweep(),  # None: started by hand
        "finished": None,  # when the steps after training are done too (`mark_finished`)
    }
    tuner = tuner_trial()
    if tuner is not None:
        record["tuner"] = tuner
    return record


def hyperparameter_table(args) -> str:
    """A markdown table of the arguments (a dataclass, or a dict of them)."""
    values = args if isinstance(args, dict) else dataclasses.asdict(args)
    rows = "\n".join(f"|{key}|{value}|" for key, value in values.items())
    return f"|param|value|\n|-|-|\n{rows}"


def read_record(config_path: Path) -> tuple[dict | None, str | None]:
    """A run's config.json: (the record, None), or (None, why it cannot be used) when it is
    missing, unreadable, not JSON or JSON of another shape (a list, `null`, `resumes` not a
    list)."""
    try:
        record = json.loads(Path(config_path).read_text())
    except FileNotFoundError:
        return None, "missing"
    except (OSError, ValueError) as exc:
        return None, f"unreadable ({type(exc).__name__})"
    if not isinstance(record, dict):
        return None, f"a JSON {type(record).__name__}, not an object"
    if not isinstance(record.get("resumes", []), list):
        return None, "its 'resumes' is not a list"
    return record, None


def resumed_record(config_path: Path, record: dict) -> dict:
    """config.json of a resumed run: the original record, plus one entry per resumption. One
    that cannot be used (damaged, of another shape) is replaced by `record`, said so; a run
    folder copied or renamed keeps its record under the folder's name, and starts a W&B run of
    its own (the original's may still be going on)."""
    original, problem = read_record(config_path)
    if original is None:
        if problem != "missing":
            print(
                f"warning: {config_path} is {problem}: written anew from the checkpoint's "
                "arguments and this command",
                file=sys.stderr,
            )
        return record
    original.pop("stopped", None)  # running again
    resumes = original.setdefault("resumes", [])
    original.setdefault("protocol", record["protocol"])  # (a run begun before it was recorded)
    keys = ("command", "cwd", "git", "packages", "start_time", "slurm", "sweep", "tuner")
    resumes.append({k: record[k] for k in keys if k in record})
    if original.get("run_name") != record["run_name"]:
        resumes[-1]["run_name_was"] = original.get("run_name")
        original["run_name"] = record["run_name"]
        original.pop("wandb_id", None)
    return original


def mark_stopped(config_path: Path, signal: str, global_step: int) -> None:
    """Records in config.json that the run stopped on a signal, its checkpoint written at
    `global_step`: the report then calls it stopped at once, not still running (a resumption
    rewrites config.json without it)."""
    update_record(config_path, stopped={"signal": signal, "global_step": global_step})


def mark_finished(config_path: Path, global_step: int) -> None:
    """Records in config.json that the run is over, the steps after training (model file,
    evaluation, upload) done: a resume has nothing left to do."""
    update_record(config_path, finished={"global_step": global_step})


def mark_output_lost(config_path: Path, lost: dict[str, str]) -> None:
    """Records in config.json the standard streams the run could no longer write, and why
    (`cleanrl_utils.cli.output.lost`: a closed terminal, a `| tee` ended by Ctrl-C, a full disk):
    what it said there from then on is lost, and this says so; nothing when `lost` is empty."""
    if lost:
        update_record(config_path, output_lost=lost)


def update_record(config_path: Path, **entries: dict) -> None:
    """Sets `entries` (each with the time added) in config.json; a config.json that cannot be
    read or written is left as it is (a full disk: the report then tells a stop by the logs'
    age, as before)."""
    record, _ = read_record(config_path)
    if record is None:
        return
    for key, value in entries.items():
        record[key] = {**value, "time": time.time()}
    try:
        atomic_write_bytes(config_path, json.dumps(record, indent=2).encode())
    except OSError:
        pass
