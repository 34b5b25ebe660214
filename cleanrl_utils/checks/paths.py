"""A folder a command writes into (a tool's `--output-dir`, a run's `videos/`), checked before any
work: a file in its place, a broken link, no write permission, a read-only disk: one line and
exit code 74 (`check_output_folder`), or the problem as a line (`folder_problem`)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from cleanrl_utils.console.errors import DISK_EXIT, fail


def folder_problem(folder: str | os.PathLike) -> str | None:
    """Why files cannot be written in `folder`, checked without writing anything: it (or, where
    it does not exist yet, the nearest folder above it, where it would be made) is a file or is
    not writable. None when it can take them (a full disk shows only when written)."""
    path = Path(folder)
    for above in (path, *path.parents):
        if not above.exists():
            if above.is_symlink():  # (mkdir would find it taken, after all the work)
                return broken_link(above)
            continue
        if not above.is_dir():
            return f"{above} is a file, not a folder"
        if not os.access(above, os.W_OK | os.X_OK):
            read_only = os.statvfs(above).f_flag & os.ST_RDONLY
            return f"{above} is {'on a read-only file system' if read_only else 'not writable'}"
        return None
    return None


def broken_link(link: Path) -> str:
    """Why the symbolic link `link`, which leads nowhere, cannot be a folder."""
    try:
        link.stat()
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return f"{link} is a symbolic link in a loop"
    return f"{link} is a symbolic link to {os.readlink(link)}, which does not exist"


def check_output_folder(folder: str | os.PathLike, flag_name: str) -> None:
    """A tool's output folder that cannot take files ends the process before any work: one
    `error:` line naming the flag, the folder and why, and exit code `DISK_EXIT`."""
    problem = folder_problem(folder)
    if problem is not None:
        fail(f"{flag_name} {folder}: cannot write there: {problem}", DISK_EXIT)
