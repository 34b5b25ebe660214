"""Checkpoint files: written atomically, checked when read.

A checkpoint is one file `runs/{run_name}/checkpoint_{iteration:07d}.ckpt`: a magic line, the
SHA-256 of the payload and a pickle of the payload (a dict: the run's name and arguments, its
iteration and step, the RNG states and the script's state), written to a temporary file, fsynced
and renamed. A damaged file is detected when read. What goes into the payload, and when a
checkpoint is written, is `cleanrl_utils.run.Run`'s business.
"""

from __future__ import annotations

import hashlib
import pickle
from pathlib import Path

from cleanrl_utils.runs import atomic_write_bytes

MAGIC = b"CLEANRL-CHECKPOINT-1\n"
CHECKPOINT_GLOB = "checkpoint_*.ckpt"


class CorruptCheckpoint(Exception):
    pass


def checkpoint_path(run_dir: Path, iteration: int) -> Path:
    return Path(run_dir) / f"checkpoint_{iteration:07d}.ckpt"


def list_checkpoints(run_dir: Path) -> list[Path]:
    """The checkpoints of a run, newest (highest iteration) first."""
    return sorted(Path(run_dir).glob(CHECKPOINT_GLOB), reverse=True)


def write_checkpoint(path: Path, payload: dict) -> None:
    data = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
    atomic_write_bytes(path, MAGIC + hashlib.sha256(data).digest() + data)


def read_checkpoint(path: Path) -> dict:
    """The payload of a checkpoint file; `CorruptCheckpoint` saying why when it is not one."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise CorruptCheckpoint(f"cannot read it ({exc.strerror or exc})") from None
    if not raw.startswith(MAGIC):
        raise CorruptCheckpoint("not a cleanrl checkpoint (wrong header)")
    digest, data = raw[len(MAGIC) : len(MAGIC) + 32], raw[len(MAGIC) + 32 :]
    if hashlib.sha256(data).digest() != digest:
        raise CorruptCheckpoint(f"checksum mismatch: truncated or damaged ({len(raw)} bytes)")
    try:
        payload = pickle.loads(data)
    except Exception as exc:  # a valid checksum over data that does not unpickle here
        raise CorruptCheckpoint(f"cannot unpickle it ({type(exc).__name__}: {exc})") from None
    if not isinstance(payload, dict) or "iteration" not in payload:
        raise CorruptCheckpoint("not a cleanrl checkpoint (no iteration)")
    return payload
