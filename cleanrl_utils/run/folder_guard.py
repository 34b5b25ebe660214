"""What keeps a run folder whole when the machine misbehaves: one writer per folder (a lock), and a
failing disk (full, read-only, gone) stopping the run in one line with what it keeps.

- **The lock.** The training process holds an advisory lock (`flock`) on the run folder
  itself; a second process that wants the folder is refused in one line naming the holder's PID
  (as the kernel lists it in /proc/locks). The kernel drops the lock when the process dies,
  however it dies: `kill -9` leaves no stale lock, and no lock file is left behind.
- **A failing disk.** A write into the run folder that fails (a checkpoint, config.json, the
  TensorBoard writer's thread) ends the run with one line naming the folder and the cause, and
  exit code `DISK_EXIT`; the event file is cut back to its last whole record, and the newest
  checkpoint already on disk is left as it is (a new one is written beside it and renamed, so a
  failed write never harms it): the line says which it is and how to continue.

`cleanrl_utils.run.Run` uses both; see docs/faults.md for every fault tried and what it does.
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
from pathlib import Path
from typing import NoReturn

from cleanrl_utils.console.errors import DISK_EXIT, RunError, fail
from cleanrl_utils.console.output import cause

_RECORD_HEADER = struct.Struct("<QI")  # TFRecord: data length, masked CRC of the length


def lock_run_folder(run_dir: Path) -> int:
    """Takes the run folder's lock (creating the folder when missing) and returns the open file
    descriptor that holds it, for the life of the process; exits with one `error:` line naming
    the holder when another process has it. The lock is on the folder itself: taking it
    changes no file."""
    run_dir = Path(run_dir)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        folder_failure(run_dir, exc)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        inode = os.fstat(fd).st_ino
        os.close(fd)
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
            fail(f"cannot lock the run folder {run_dir}: {exc.strerror}")
        fail(
            f"the run folder {run_dir} is in use by process {lock_holder(inode)} (one process "
            "writes a run at a time; wait for it to end, or stop it)"
        )
    return fd


def lock_holder(inode: int) -> str:
    """The PID holding a `flock` on the file of `inode`, as the kernel lists it (Linux's
    /proc/locks: `1: FLOCK ADVISORY WRITE PID MAJOR:MINOR:INODE 0 EOF`), or "unknown"."""
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return "unknown"
    for line in lines:
        parts = line.split()
        if "FLOCK" in parts and len(parts) >= 6:
            at = parts.index("FLOCK")
            if len(parts) > at + 4 and parts[at + 4].rsplit(":", 1)[-1] == str(inode):
                return parts[at + 3]
    return "unknown"


def release_run_folder(fd: int | None) -> None:
    """Gives the lock back (the process goes on without writing the folder)."""
    if fd is not None:
        os.close(fd)


def trim_partial_record(path: Path) -> int:
    """Cuts a TensorBoard event file back to its last whole record (a write that failed midway
    leaves part of one); returns the bytes removed. Truncating frees space: it works on a full
    disk."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return 0
    pos = 0
    while pos + _RECORD_HEADER.size <= len(data):
        (length,) = struct.unpack_from("<Q", data, pos)
        end = pos + _RECORD_HEADER.size + length + 4
        if end > len(data):
            break
        pos = end
    if pos < len(data):
        os.truncate(path, pos)
    return len(data) - pos


def folder_gone(run_dir: Path, fd: int | None) -> None:
    """`FileNotFoundError` when the run folder that `fd` holds (its lock) is no longer at
    `run_dir`: deleted, moved or unmounted under the run."""
    if fd is None:
        return
    held = os.fstat(fd)
    try:
        here = os.stat(run_dir)
    except OSError:
        here = None
    if (
        held.st_nlink == 0
        or here is None
        or (here.st_dev, here.st_ino) != (held.st_dev, held.st_ino)
    ):
        raise FileNotFoundError(errno.ENOENT, "the run folder is no longer there", str(run_dir))


def remedy(exc: OSError) -> str:
    """What a user can do about a write that failed with `exc`, by its cause."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "free some space"
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "make the folder writable (or mount it read-write)"
    return "fix the cause"


def kept_after(run_dir: Path, exc: OSError, checkpoints: list[Path], resume: str) -> str:
    """What is kept of a run whose write failed with `exc`, and how to go on: the newest of
    `checkpoints` (the run's, newest first) and the remedy for the cause (`resume`: the command
    that continues the run), or that the folder itself is gone."""
    if exc.errno == errno.ENOENT or not Path(run_dir).is_dir():
        return (
            "the run folder is gone (deleted, moved or unmounted): nothing is written elsewhere; "
            "where it went, its checkpoints went too"
        )
    if not checkpoints:
        return "the run has no checkpoint yet: nothing of it can be continued"
    return (
        f"the newest checkpoint, {checkpoints[0].name}, is intact: {remedy(exc)} and continue "
        f"with: {resume}"
    )


def folder_failure(run_dir: Path, exc: OSError) -> NoReturn:
    """A `RunError`: the run folder cannot be made (or opened) where it belongs; one line
    naming the folder and what stands in the way, exit code `DISK_EXIT`."""
    blocker = next((p for p in reversed(run_dir.parents) if p.exists() and not p.is_dir()), None)
    if blocker is not None or exc.errno in (errno.ENOTDIR, errno.EEXIST):
        why = f"{blocker or run_dir} is a file, not a folder: move it away"
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        why = f"{remedy(exc)}, or run from another folder"
    else:
        why = "nothing was written"
    raise RunError(f"cannot create the run folder {run_dir}/: {cause(exc)}; {why}", DISK_EXIT)


def disk_failure(run_dir: Path, what: str, exc: OSError, kept: str) -> NoReturn:
    """A `RunError`: one `error:` line naming the folder, what could not be written, the
    cause and what is kept; exit code `DISK_EXIT`."""
    message = f"cannot write {what} in the run folder {run_dir}/: {cause(exc)}; {kept}"
    raise RunError(message, DISK_EXIT)


class GuardedRecords:
    """Stands in for TensorBoard's record writer in its writer thread: a write or flush that
    fails keeps its error in `error` (the thread would die printing a traceback, and the main
    thread get the error at some later call) and drops what follows."""

    def __init__(self, records):
        self.records = records
        self.error: OSError | None = None

    def write(self, data: bytes) -> None:
        if self.error is None:
            try:
                self.records.write(data)
            except OSError as exc:
                self.error = exc

    def flush(self) -> None:
        if self.error is None:
            try:
                self.records.flush()
            except OSError as exc:
                self.error = exc

    def close(self) -> None:
        try:
            self.records.close()
        except OSError as exc:
            self.error = self.error or exc

    @property
    def closed(self):
        return self.records.closed


class NoWriter:
    """The TensorBoard writer of a rank other than 0: it writes nothing (rank 0 logs)."""

    def add_scalar(self, *args, **kwargs) -> None:
        pass

    add_text = add_histogram = add_scalar
    error = event_file = None  # (it writes no file that could fail)

    def flush(self) -> None:
        pass

    close = flush


def guard_event_records(file_writer) -> tuple[GuardedRecords, Path]:
    """The one place where the project reaches into another library's private attributes: torch's
    `FileWriter` writes its records from a thread of its own (`_AsyncWriter`), which dies on a
    write error (a full disk) with a traceback while the training goes on, and names its event
    file nowhere public. Its record writer is wrapped in `GuardedRecords` (in the thread and in
    the object that flushes it) so that the error is kept for the run to stop on, in one line.
    tests/test_faults.py::test_torch_event_writer_still_has_what_the_guard_wraps fails when
    torch renames what this reads."""
    events = file_writer.event_writer
    async_writer = events._async_writer
    guard = GuardedRecords(async_writer._writer)
    async_writer._writer = async_writer._worker._record_writer = guard
    return guard, Path(events._file_name)


def run_writer(log_dir: Path, purge_step: int | None, opened: bool):
    """The run's TensorBoard writer (a `SummaryWriter`), whose event file is created only once
    `open()` is called (at once with `opened`): a resume creates nothing before its checkpoint is
    checked. Write errors of its thread are kept (`error`), not raised."""
    from torch.utils.tensorboard import SummaryWriter

    class RunWriter(SummaryWriter):
        def __init__(self):
            self.opened, self.guard, self.event_file = opened, None, None
            super().__init__(str(log_dir), purge_step=purge_step)

        def open(self) -> None:
            self.opened = True
            self._get_file_writer()

        def _get_file_writer(self):
            if not self.opened:
                return None
            if self.file_writer is None:
                self.guard, self.event_file = guard_event_records(super()._get_file_writer())
            return self.file_writer

        @property
        def error(self) -> OSError | None:
            return self.guard.error if self.guard is not None else None

    return RunWriter()
