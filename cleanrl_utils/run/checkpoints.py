"""A run's checkpoints as `cleanrl_utils.run.Run` writes them: every `--checkpoint-every`
iterations, after the last and after a stop signal (the stop's record and line are
`cleanrl_utils.run.stops`'), the newest `KEEP` kept (`save`); a run resumed from an older checkpoint
than its folder's newest, whose later ones are set aside (`rewind`); and a write into the run
folder that fails, which ends the run in one line (`disk_failed`)."""

from __future__ import annotations

import dataclasses
import errno
import fcntl
import os
import re
import sys
import time
from pathlib import Path

from cleanrl_utils.files.atomic import fsync_dir
from cleanrl_utils.files.config import read_record
from cleanrl_utils.files.state_file import (
    checkpoint_iteration,
    checkpoint_path,
    list_checkpoints,
    rng_state,
    saved_value,
    write_checkpoint,
)
from cleanrl_utils.run.folder_guard import (
    disk_failure,
    folder_gone,
    kept_after,
    trim_partial_record,
)
from cleanrl_utils.run.records import write_record
from cleanrl_utils.run.stops import Phase

KEEP = 2  # checkpoints kept per run, newest first


class Checkpoints:
    """What a run's checkpoints are: how many are kept (`keep`) and the (iteration, global step)
    of the newest one written or resumed from (`newest`: what a second Ctrl-C falls back to, and
    what a diverged run names). Only its own methods change it."""

    def __init__(self, newest: tuple[int, int] | None, keep: int = KEEP):
        self.newest, self.keep = newest, keep

    def written(self, iteration: int, global_step: int) -> None:
        self.newest = (iteration, global_step)


def save(run, iteration: int, global_step: int, state: dict) -> Path | None:
    """Writes the checkpoint of `iteration` of `run` (after flushing TensorBoard, so that it
    holds every scalar up to it) and drops all but the newest `KEEP`. A write that fails ends the
    run (`disk_failed`); when it is TensorBoard's, the checkpoint is still tried first. On a rank
    other than 0 (rank 0 writes every rank's RNGs), only what a second Ctrl-C falls back to."""
    ranks_rng = run.dist.gather(rng_state()) if run.dist is not None else None
    if run.rank != 0:
        run.checkpoints.written(iteration, global_step)
        return None
    run.writer.flush()
    failed = run.writer.error  # (TensorBoard's: the checkpoint is still worth a try)
    payload = {
        "script": run.script,
        "run_name": run.name,
        "iteration": iteration,
        "global_step": global_step,
        "args": dataclasses.asdict(run.args),
        "rng": rng_state(),
        "state": {name: saved_value(value) for name, value in state.items()},
        "elapsed": time.time() - run.start_time,
        "time": time.time(),
    }
    if run.world_size > 1:
        payload |= {"world_size": run.world_size, "ranks_rng": ranks_rng}
    path = checkpoint_path(run.dir, iteration)
    try:
        folder_gone(run.dir, run.lock_fd)  # (a write would make a new, empty one)
        write_checkpoint(path, payload)
    except OSError as exc:
        what = (
            "the TensorBoard event file" if failed else f"the checkpoint of iteration {iteration}"
        )
        disk_failed(run, what, failed or exc)
    if failed:
        disk_failed(run, "the TensorBoard event file", failed)
    run.checkpoints.written(iteration, global_step)
    for old in list_checkpoints(run.dir)[run.checkpoints.keep :]:
        old.unlink(missing_ok=True)
    return path


REWOUND = "rewound_to_{iteration:07d}"  # the folder of the checkpoints a rewind sets aside
REWOUND_NAME = re.compile(r"rewound_to_\d+(\.\d+)?")  # (`.2`, ...: a second rewind there)
PENDING = "pending"  # a rewind's record written before its moves, removed once they are done


def rewind(run, record: dict) -> None:
    """A run resumed from a checkpoint older than its folder's newest (`--resume
    runs/RUN/checkpoint_N.ckpt`, or a damaged newest passed over) continues from there: that is
    the run's line from now on. Each checkpoint of a later iteration, of the line it abandons, is
    set aside, never deleted and never resumed from: moved into the run folder's
    `rewound_to_{N}/` (`.2`, ... when that is taken) with the model file that line saved, and
    the rewind recorded in `record` (config.json's `rewinds`; a `finished` of that line is void).
    TensorBoard drops the abandoned line's later steps itself (the writer's purge step, flushed
    here first)."""
    iteration = run.payload["iteration"]
    later = [p for p in list_checkpoints(run.dir) if checkpoint_iteration(p) > iteration]
    if not later:
        return
    model = run.dir / f"{run.args.exp_name}.cleanrl_model"  # (`cleanrl_utils.after_training`)
    moved = [*later, model] if model.is_file() else later
    run.writer.open()  # (its purge step on disk before the line it purges is set aside)
    run.writer.flush()
    folder = run.dir / REWOUND.format(iteration=iteration)
    for n in range(2, 1000):
        if not folder.exists():
            break
        folder = run.dir / f"{REWOUND.format(iteration=iteration)}.{n}"
    if not isinstance(record.get("rewinds"), list):
        record["rewinds"] = []
    entry = {
        "to_iteration": iteration,
        "global_step": run.payload["global_step"],
        "from_iteration": checkpoint_iteration(later[0]),
        "set_aside": [f"{folder.name}/{p.name}" for p in moved],
        "time": time.time(),
        PENDING: True,
    }
    record["rewinds"].append(entry)
    record["finished"] = None  # (the abandoned line's: this line has its steps to do)
    # the plan on disk before the first move: a process killed among the moves leaves a record
    # that the next start finishes (`finish_rewind`), never a model file left to be overwritten
    write_record(run.dir, record)
    set_aside(run.dir, folder, [p.name for p in moved])
    del entry[PENDING]
    names = ", ".join(p.name for p in moved)
    run.say(
        f"rewound to iteration {iteration}: the run goes on from there; the later line it "
        f"abandons ({names}) is kept in {folder}/, never resumed from"
    )


def set_aside(run_dir: Path, folder: Path, names: list[str]) -> None:
    folder.mkdir(exist_ok=True)
    for name in names:
        if (run_dir / name).exists():  # (a rewind finished after a kill: some are moved)
            os.replace(run_dir / name, folder / name)
    fsync_dir(folder)
    fsync_dir(run_dir)


def finish_rewind(run_dir: Path) -> None:
    """Finishes a rewind that a process killed among its moves left half-made (config.json's
    entry of `rewinds` still marked pending): the files it set out to set aside moved into its
    folder, the entry completed, said in one line. Before a resume chooses its checkpoint: one
    of the abandoned line's is never resumed from, nor its model file overwritten. Nothing when
    another process holds the run folder (a live rewind finishes itself; the run is refused by
    the lock) or config.json records no such rewind; a failed write is said and left as it is
    (the run's own writes will fail the same way, in its one line)."""
    record, _ = read_record(run_dir / "config.json")
    rewinds = record.get("rewinds") if record is not None else None
    if not isinstance(rewinds, list) or not any(
        isinstance(e, dict) and e.get(PENDING) for e in rewinds
    ):
        return
    try:
        fd = os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        record, _ = read_record(run_dir / "config.json")  # (as it is now, under the lock)
        for entry in record.get("rewinds", []) if record is not None else []:
            if not (isinstance(entry, dict) and entry.get(PENDING)):
                continue
            paths = [str(p).split("/") for p in entry.get("set_aside", [])]
            folders = {parts[0] for parts in paths if len(parts) == 2}
            if len(folders) != 1 or not REWOUND_NAME.fullmatch(next(iter(folders))):
                continue  # (not a plan this module wrote)
            folder = run_dir / folders.pop()
            set_aside(run_dir, folder, [parts[1] for parts in paths])
            del entry[PENDING]
            write_record(run_dir, record)
            names = ", ".join(parts[1] for parts in paths)
            print(
                f"{run_dir}: finished the rewind to iteration {entry.get('to_iteration')} that a "
                f"killed process left half-made: the abandoned line ({names}) is kept in "
                f"{folder}/, never resumed from",
                file=sys.stderr,
            )
    except OSError as exc:  # (the lock held by a live process, or a write that failed)
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
            print(f"warning: {run_dir}: cannot finish its half-made rewind: {exc}", file=sys.stderr)
    finally:
        os.close(fd)


def disk_failed(run, what: str, exc: OSError) -> None:
    """A write into `run`'s folder failed (a full disk): the event file cut back to its last
    whole record, then one line naming the folder, the cause and what is kept, and exit code
    `DISK_EXIT` (`cleanrl_utils.run.folder_guard`)."""
    if run.writer is not None and run.writer.event_file is not None:
        trim_partial_record(run.writer.event_file)
    kept = kept_after(run.dir, exc, list_checkpoints(run.dir), run.resume_command())
    if run.progress is not None:
        run.progress.close()
    run.stop.enter(Phase.FINISHED)  # (nothing more to close: `finish` would fail the same way)
    disk_failure(run.dir, what, exc, kept)
