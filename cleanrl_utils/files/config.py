"""A run's `config.json`: what it records about itself (the arguments, the code's version, the
machine, the sweep, the SLURM task; `run_record`), read back (`read_record`) and updated as the
run goes (stopped, finished, output lost: `update_record`, atomically), and which arguments make
its experiment (`experiment_args`: what resume compares and the report tells variants by)."""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from cleanrl_utils.envs import protocols
from cleanrl_utils.files import machine
from cleanrl_utils.files.atomic import atomic_write_bytes
from cleanrl_utils.files.sweeps import current_sweep, tuner_trial

REPO_ROOT = Path(__file__).resolve().parents[2]


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
    (`cleanrl_utils.console.output.lost`: a closed terminal, a `| tee` ended by Ctrl-C, a full disk):
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
