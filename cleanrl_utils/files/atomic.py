"""Atomic writes: a file is written beside its place under a temporary name, flushed to disk and
renamed over it, so a reader sees the old file or the new one, never half of one; a write killed
before its rename leaves a `.{name}.XXXXXXXX.tmp` that `remove_temp_files` clears."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


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
