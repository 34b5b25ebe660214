"""Checkpoint files and what they hold.

A checkpoint is one file `runs/{run_name}/checkpoint_{iteration:07d}.ckpt`: a magic line, the
SHA-256 of the payload and a pickle of the payload (a dict: the run's name and arguments, its
iteration and step, the RNG states and the script's state), written to a temporary file, fsynced
and renamed. A damaged file is detected when read. The script's state is a dict of what it keeps:
objects with `state_dict()`/`load_state_dict()` (torch modules and optimizers) are saved and
loaded in place, deques likewise, JAX arrays and pytrees (a flax `TrainState`, a PRNG key) as
NumPy arrays in flax's state-dict form, restored on the script's current value as template.
When checkpoints are written is `cleanrl_utils.run.Run`'s business.
"""

from __future__ import annotations

import hashlib
import pickle
import random
import sys
from collections import deque
from pathlib import Path

import numpy as np

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


def rng_state() -> dict:
    """The global RNGs a script draws from (python, numpy; torch and CUDA where imported)."""
    state = {"python": random.getstate(), "numpy": np.random.get_state()}
    if "torch" in sys.modules:
        import torch

        state["torch"] = torch.get_rng_state()
        if torch.cuda.is_available():
            state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    if "torch" in state:
        import torch

        torch.set_rng_state(state["torch"])
        if "cuda" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda"])


def is_jax_tree(value) -> bool:
    """A JAX array, or a pytree holding some (a flax `TrainState`, a PRNG key)."""
    jax = sys.modules.get("jax")
    if jax is None:
        return False
    return any(isinstance(leaf, jax.Array) for leaf in jax.tree_util.tree_leaves(value))


def saved_value(value):
    """What a checkpoint stores of one entry of the script's state."""
    if hasattr(value, "state_dict"):  # torch modules and optimizers
        return value.state_dict()
    if isinstance(value, deque):
        return list(value)
    if is_jax_tree(value):  # as NumPy arrays, in flax's state-dict form
        import flax.serialization
        import jax

        return flax.serialization.to_state_dict(jax.device_get(value))
    return value


def restored_value(current, saved):
    """One entry of the script's state as checkpointed: loaded into `current` where it is an
    object, else built on `current` as template."""
    if hasattr(current, "load_state_dict"):
        current.load_state_dict(saved)
        return current
    if isinstance(current, deque):
        current.clear()
        current.extend(saved)
        return current
    if is_jax_tree(current):
        import flax.serialization

        return flax.serialization.from_state_dict(current, saved)
    return saved
