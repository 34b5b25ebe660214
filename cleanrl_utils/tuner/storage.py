"""One `--storage` flag for Optuna's storages: an RDB URL (`sqlite:///tuner.db` in the working
folder, `postgresql://...` for a cluster), or a journal file (`PATH.log` or `journal:PATH`) that
tuners on a shared filesystem append to. Opened (and so checked) before anything starts."""

from __future__ import annotations

from pathlib import Path

from cleanrl_utils.tuner.state import TunerError


class StorageError(TunerError):
    """A storage that cannot be opened; the message is the `error:` line."""


def journal_path(text: str) -> str | None:
    """The journal file a `--storage` value names, None for an RDB URL."""
    if text.startswith("journal:"):
        return text.removeprefix("journal:")
    if "://" not in text and text.endswith(".log"):
        return text
    return None


def check_folder(text: str) -> bool:
    """A file storage's folder (a journal's, a SQLite database's) exists, or StorageError; True
    for a file storage, False for a database server."""
    path = journal_path(text)
    if path is not None:
        if not path or not Path(path).parent.is_dir():
            raise StorageError(f"--storage {text}: the journal's folder does not exist")
        return True
    url = sqlite_url(text)
    if url.startswith("sqlite:///"):
        folder = Path(url.removeprefix("sqlite:///")).parent
        if not folder.is_dir():
            raise StorageError(f"--storage {text}: the folder {folder} does not exist")
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
    raise StorageError(
        f"--storage {text}: not a storage (an RDB URL such as sqlite:///tuner.db or "
        "postgresql://user@host/db, or a journal file PATH.log or journal:PATH)"
    )


def open_storage(text: str):
    """The Optuna storage of `text`, connected: a URL that cannot be reached, a driver that is
    not installed or a folder that does not exist raise StorageError."""
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
            raise StorageError(f"--storage {text}: cannot open the journal: {e}") from None
    text = sqlite_url(text)
    try:
        return optuna.storages.RDBStorage(
            text, engine_kwargs={"pool_pre_ping": True}, skip_compatibility_check=False
        )
    except ModuleNotFoundError as e:
        raise StorageError(
            f"--storage {text}: needs the database driver {e.name!r} (pip install it)"
        ) from None
    except Exception as e:  # noqa: BLE001 (SQLAlchemy's errors: unreachable, refused, bad URL)
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise StorageError(f"--storage {text}: cannot connect: {first}") from None
