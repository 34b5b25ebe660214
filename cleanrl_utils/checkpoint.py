"""Checkpoint files and what they hold.

A checkpoint is one file `runs/{run_name}/checkpoint_{iteration:07d}.ckpt`: a magic line, the
SHA-256 of the body and the body, written to a temporary file, fsynced and renamed. A damaged
file is detected when read. The body holds the payload (a dict: the run's name and arguments,
its iteration and step, the RNG states and the script's state) in a form that cannot carry code:

    8 bytes     the length of the JSON tree (unsigned, little-endian)
    JSON tree   {"format": "cleanrl-checkpoint", "version": 2, "tree": NODE}
    arrays      the raw bytes of every array, one after the other

A NODE is JSON's own `null`, `true`, `false`, number or string, a list of NODEs, or an object
tagged `t`: `{"t": "tuple", "v": [NODE, ...]}`, `{"t": "dict", "v": [[KEY, NODE], ...]}` (keys
are strings or integers), or an array: `{"t": "ndarray" | "tensor" | "scalar", "dtype": "<f4",
"shape": [...], "offset": N}` (a NumPy array, a torch tensor, a NumPy scalar; `offset` into the
arrays). Reading builds NumPy arrays from the bytes (numbers only: no object dtype) and torch
tensors from those; nothing is unpickled. Checkpoints of the older format (a pickle) are
refused (`PickleCheckpoint`): `python -m cleanrl_utils.convert` converts one you trust.

The script's state is a dict of what it keeps: objects with `state_dict()`/`load_state_dict()`
(torch modules and optimizers) are saved and loaded in place, deques likewise, JAX arrays and
pytrees (a flax `TrainState`, a PRNG key) as NumPy arrays in flax's state-dict form, restored on
the script's current value as template. When checkpoints are written is
`cleanrl_utils.run.Run`'s business.
"""

from __future__ import annotations

import hashlib
import json
import random
import struct
import sys
from collections import deque
from pathlib import Path

import numpy as np

from cleanrl_utils.runs import atomic_write_bytes

MAGIC = b"CLEANRL-CHECKPOINT-2\n"
PICKLE_MAGIC = b"CLEANRL-CHECKPOINT-1\n"  # the older format: a pickle, never read
CHECKPOINT_GLOB = "checkpoint_*.ckpt"
FORMAT = "cleanrl-checkpoint"
_LENGTH = struct.Struct("<Q")
_NUMBER_KINDS = "biufc"  # bool, int, uint, float, complex: what an array read back may hold


class CorruptCheckpoint(Exception):
    pass


class PickleCheckpoint(Exception):
    """A checkpoint of the older format, whose payload is a pickle: it is not read."""


def checkpoint_path(run_dir: Path, iteration: int) -> Path:
    return Path(run_dir) / f"checkpoint_{iteration:07d}.ckpt"


def list_checkpoints(run_dir: Path) -> list[Path]:
    """The checkpoints of a run, newest (highest iteration) first."""
    return sorted(Path(run_dir).glob(CHECKPOINT_GLOB), reverse=True)


def encode_tree(value) -> bytes:
    """The body of a checkpoint (see the module's docstring) holding `value`: nested dicts,
    lists, tuples, str, int, float, bool, None, NumPy arrays and scalars, torch tensors and JAX
    arrays (stored as NumPy arrays). Anything else is a `TypeError`."""
    arrays: list[bytes] = []
    offset = 0

    def array_node(tag: str, array: np.ndarray) -> dict:
        nonlocal offset
        if array.dtype.kind not in _NUMBER_KINDS:
            raise TypeError(f"cannot store an array of dtype {array.dtype} in a checkpoint")
        data = np.ascontiguousarray(array).tobytes()
        node = {"t": tag, "dtype": array.dtype.str, "shape": list(array.shape), "offset": offset}
        arrays.append(data)
        offset += len(data)
        return node

    def encode(x):
        if x is None or isinstance(x, (bool, int, float, str)):
            return x
        if isinstance(x, (list, deque)):
            return [encode(v) for v in x]
        if isinstance(x, tuple):
            return {"t": "tuple", "v": [encode(v) for v in x]}
        if isinstance(x, dict):
            for key in x:
                if not isinstance(key, (str, int)) or isinstance(key, bool):
                    raise TypeError(f"cannot store a dict key {key!r} in a checkpoint")
            return {"t": "dict", "v": [[key, encode(v)] for key, v in x.items()]}
        if isinstance(x, np.ndarray):
            return array_node("ndarray", x)
        if isinstance(x, np.generic):
            return array_node("scalar", np.asarray(x))
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(x, torch.Tensor):
            return array_node("tensor", x.detach().cpu().numpy())
        jax = sys.modules.get("jax")
        if jax is not None and isinstance(x, jax.Array):
            return array_node("ndarray", np.asarray(jax.device_get(x)))
        raise TypeError(f"cannot store a {type(x).__name__} in a checkpoint")

    tree = json.dumps({"format": FORMAT, "version": 2, "tree": encode(value)}).encode()
    return _LENGTH.pack(len(tree)) + tree + b"".join(arrays)


def decode_tree(body: bytes):
    """The value `encode_tree` stored; `ValueError` saying why when `body` is not one."""
    if len(body) < _LENGTH.size:
        raise ValueError("too short")
    (length,) = _LENGTH.unpack_from(body)
    start = _LENGTH.size + length
    header = json.loads(body[_LENGTH.size : start])
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ValueError("no cleanrl-checkpoint tree")
    arrays = memoryview(body)[start:]

    def array(node) -> np.ndarray:
        dtype = np.dtype(str(node["dtype"]))
        if dtype.kind not in _NUMBER_KINDS:
            raise ValueError(f"an array of dtype {dtype} (only numbers are read)")
        shape = tuple(int(n) for n in node["shape"])
        count = int(np.prod(shape, dtype=np.int64))
        flat = np.frombuffer(arrays, dtype=dtype, count=count, offset=int(node["offset"]))
        return flat.reshape(shape).copy()

    def decode(x):
        if x is None or isinstance(x, (bool, int, float, str)):
            return x
        if isinstance(x, list):
            return [decode(v) for v in x]
        tag = x.get("t") if isinstance(x, dict) else None
        if tag == "tuple":
            return tuple(decode(v) for v in x["v"])
        if tag == "dict":
            return {key: decode(v) for key, v in x["v"]}
        if tag == "ndarray":
            return array(x)
        if tag == "scalar":
            return array(x)[()]
        if tag == "tensor":
            import torch

            return torch.from_numpy(array(x))
        raise ValueError(f"unknown node {str(x)[:60]}")

    return decode(header["tree"])


def write_checkpoint(path: Path, payload: dict) -> None:
    body = encode_tree(payload)
    atomic_write_bytes(path, MAGIC + hashlib.sha256(body).digest() + body)


def checked_body(raw: bytes, magic: bytes = MAGIC) -> bytes:
    """The body of a checkpoint file's bytes after its header and checksum are verified;
    `CorruptCheckpoint` saying why when they are not."""
    digest, body = raw[len(magic) : len(magic) + 32], raw[len(magic) + 32 :]
    if hashlib.sha256(body).digest() != digest:
        raise CorruptCheckpoint(f"checksum mismatch: truncated or damaged ({len(raw)} bytes)")
    return body


def read_checkpoint(path: Path) -> dict:
    """The payload of a checkpoint file; `CorruptCheckpoint` saying why when it is not one,
    `PickleCheckpoint` when it is one of the older format (never unpickled)."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise CorruptCheckpoint(f"cannot read it ({exc.strerror or exc})") from None
    if raw.startswith(PICKLE_MAGIC):
        raise PickleCheckpoint(
            f"{path} is a checkpoint of the older format, a pickle: it is not read, since "
            "unpickling a file can run any code in it; if you trust the file (your own run "
            f"wrote it), convert it with `python -m cleanrl_utils.convert {path}`"
        )
    if not raw.startswith(MAGIC):
        raise CorruptCheckpoint("not a cleanrl checkpoint (wrong header)")
    body = checked_body(raw)
    try:
        payload = decode_tree(body)
    except Exception as exc:  # a valid checksum over a body this version cannot read
        raise CorruptCheckpoint(f"cannot decode it ({type(exc).__name__}: {exc})") from None
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
