"""What a run logs besides its checkpoints: config.json and the first records of the TensorBoard
event file in the run folder (`open_folder`), and the W&B run of `--track` (`start_wandb`,
`finish_wandb`), which a resumed run continues."""

from __future__ import annotations

import dataclasses
import json
import sys
import uuid
from pathlib import Path

from cleanrl_utils.console.errors import CHECKPOINT_EXIT
from cleanrl_utils.files.atomic import atomic_write_bytes, remove_temp_files
from cleanrl_utils.files.config import hyperparameter_table, resumed_record, run_record


def open_folder(run_dir: Path, writer, record: dict, args, new: bool) -> None:
    """Writes into the run folder: config.json (`record`), the event file of `writer` (a new
    run's first records: the hyperparameters, the git commit); removes the temporary files of
    writes that a crash or a full disk cut short. A failed write raises its `OSError`."""
    for tmp in remove_temp_files(run_dir):
        print(f"removed {tmp}, left by a write that did not finish", file=sys.stderr)
    write_record(run_dir, record)
    writer.open()
    if new:
        writer.add_text("hyperparameters", hyperparameter_table(args))
        git = record["git"]
        writer.add_text("git_commit", f"{git['commit']} (dirty: {git['dirty']})")


def write_record(run_dir: Path, record: dict) -> None:
    atomic_write_bytes(run_dir / "config.json", json.dumps(record, indent=2).encode())


def record_device(record: dict, device: dict | None, resumed: bool) -> None:
    """Puts into `record` (config.json) the device the run trains on (`machine.device_of`: where
    the script put its agent, whatever `--cuda` asked for); a resumption's, which may be another
    machine's, goes into its entry of `resumes`. A new run's `args.cuda` says whether it trained
    on a GPU: `--cuda` is on by default, and a record of `"cuda": true` from a machine without
    one would say what did not happen (the command line, also recorded, says what was asked)."""
    entry = record["resumes"][-1] if resumed and record.get("resumes") else record
    entry["device"] = device
    if not resumed and device is not None and "cuda" in record.get("args", {}):
        record["args"]["cuda"] = device["type"] in ("cuda", "gpu")


def config_record(args, name: str, run_dir: Path, resumed: bool) -> dict:
    """What config.json holds (`cleanrl_utils.files.config.run_record`); a resumed run's keeps the
    original record with this resumption appended."""
    record = run_record(args, name)
    config_path = run_dir / "config.json"
    if resumed and config_path.exists():
        record = resumed_record(config_path, record)
    return record


def start_wandb(args, name: str, record: dict) -> None:
    """With `--track`, the W&B run, TensorBoard synced; its id is kept in `record` (config.json),
    so that a resumption continues it."""
    if not getattr(args, "track", False):
        return
    import wandb

    record.setdefault("wandb_id", uuid.uuid4().hex[:12])  # resumptions reuse it
    wandb.init(
        project=args.wandb_project_name,
        entity=args.wandb_entity,
        sync_tensorboard=True,
        config={
            **dataclasses.asdict(args),
            "git": record["git"],
            "protocol": record.get("protocol"),
        },
        name=name,
        id=record["wandb_id"],
        resume="allow",
        save_code=True,
    )


def finish_wandb(code: int) -> None:
    """The W&B run, if one is under way, finished with the run's exit code (marked preempting
    after a stop signal: it is resumed)."""
    wandb = sys.modules.get("wandb")
    if wandb is not None and wandb.run is not None:
        if code == CHECKPOINT_EXIT:
            wandb.mark_preempting()
        wandb.finish(exit_code=code)
