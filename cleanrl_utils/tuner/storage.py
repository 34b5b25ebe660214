"""One `--storage` flag for Optuna's storages: an RDB URL (`sqlite:///tuner.db` in the working
folder, `postgresql://...` for a cluster), or a journal file (`PATH.log` or `journal:PATH`) that
tuners on a shared filesystem append to. Opened (and so checked) before anything starts."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from cleanrl_utils.console.errors import DISK_EXIT, RunError
from cleanrl_utils.console.output import cause

# SQLite's primary result codes of a write the file system refused (extended codes add bits)
SQLITE_DISK_CODES = (sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN)


def disk_cause(exc: BaseException) -> str | None:
    """Why a file storage's write failed, when the file system refused it (a full disk, a
    read-only file system, a folder gone: any `OSError` of a journal, SQLite's full, I/O and
    cannot-open errors, wrapped or not by SQLAlchemy), in words; None for any other error."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [exc]
    while pending:
        error = pending.pop()
        if error is None or id(error) in seen:
            continue
        seen.add(id(error))
        if isinstance(error, OSError):
            return cause(error)
        code = getattr(error, "sqlite_errorcode", None)
        if isinstance(code, int) and code & 0xFF in SQLITE_DISK_CODES:
            return f"{str(error).strip() or type(error).__name__} (SQLite)"
        pending += [error.__cause__, error.__context__, getattr(error, "orig", None)]
    return None


def folder_missing(text: str, folder: Path, kind: str) -> RunError:
    """The error of a file storage (`kind`: journal, database) whose folder is not one: missing,
    or something else (a file, a device) in its place."""
    if folder.exists() or folder.is_symlink():
        return RunError(
            f"--storage {text}: {folder} is not a folder, so it cannot hold the {kind} file"
        )
    what = "the journal's folder" if kind == "journal" else "the folder"
    return RunError(f"--storage {text}: {what} {folder} does not exist")


def journal_path(text: str) -> str | None:
    """The journal file a `--storage` value names, None for an RDB URL."""
    if text.startswith("journal:"):
        return text.removeprefix("journal:")
    if "://" not in text and text.endswith(".log"):
        return text
    return None


def check_folder(text: str) -> bool:
    """A file storage's folder (a journal's, a SQLite database's) exists, or `RunError`; True
    for a file storage, False for a database server."""
    path = journal_path(text)
    if path is not None:
        if not path:
            raise RunError(f"--storage {text}: names no journal file")
        if not Path(path).parent.is_dir():
            raise folder_missing(text, Path(path).parent, "journal")
        return True
    url = sqlite_url(text)
    if url.startswith("sqlite:///"):
        folder = Path(url.removeprefix("sqlite:///")).parent
        if not folder.is_dir():
            raise folder_missing(text, folder, "database")
        return True
    return False


def check_storage(text: str) -> None:
    """What can be checked of a storage without creating anything: a file storage's folder
    exists; a database server (an RDB URL other than SQLite) answers (opened, then let go)."""
    if not check_folder(text):
        open_storage(text)


def sqlite_url(text: str) -> str:
    """A plain `*.db` path as a SQLite URL; an URL as it is."""
    if "://" in text:
        return text
    if text.endswith((".db", ".sqlite", ".sqlite3")):
        return f"sqlite:///{text}"
    raise RunError(
        f"--storage {text}: not a storage (an RDB URL such as sqlite:///tuner.db or "
        "postgresql://user@host/db, or a journal file PATH.log or journal:PATH)"
    )


def open_storage(text: str):
    """The Optuna storage of `text`, connected: a URL that cannot be reached, a driver that is
    not installed or a folder that does not exist raise `RunError` (exit code 2, or `DISK_EXIT`
    for a file storage the disk refuses)."""
    import optuna

    check_folder(text)
    path = journal_path(text)
    if path is not None:
        from optuna.storages import JournalStorage
        from optuna.storages.journal import JournalFileBackend, JournalFileOpenLock

        try:
            # an open lock works on NFS too, where symlinks may not be atomic
            return JournalStorage(JournalFileBackend(path, lock_obj=JournalFileOpenLock(path)))
        except OSError as e:
            raise RunError(
                f"--storage {text}: cannot open the journal: {cause(e)}", DISK_EXIT
            ) from None
    text = sqlite_url(text)
    try:
        return optuna.storages.RDBStorage(
            text, engine_kwargs={"pool_pre_ping": True}, skip_compatibility_check=False
        )
    except ModuleNotFoundError as e:
        raise RunError(
            f"--storage {text}: needs the database driver {e.name!r} (pip install it)"
        ) from None
    except Exception as e:  # noqa: BLE001 (SQLAlchemy's errors: unreachable, refused, bad URL)
        if (why := disk_cause(e)) is not None:
            raise RunError(f"--storage {text}: cannot write there: {why}", DISK_EXIT) from None
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise RunError(f"--storage {text}: cannot connect: {first}") from None
