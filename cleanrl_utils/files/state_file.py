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
the script's current value as template. `cleanrl_utils.run.Run` writes them when they are due.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import stat
import struct
import sys
from collections import deque
from pathlib import Path

import numpy as np

from cleanrl_utils.files.atomic import atomic_write_bytes

MAGIC = b"CLEANRL-CHECKPOINT-2\n"
PICKLE_MAGIC = b"CLEANRL-CHECKPOINT-1\n"  # the older format: a pickle, never read
CHECKPOINT_GLOB = "checkpoint_*.ckpt"
# the names a run gives its checkpoints; others (`checkpoint_best.ckpt`) are a user's files
CHECKPOINT_NAME = re.compile(r"checkpoint_(\d+)\.ckpt")
FORMAT = "cleanrl-checkpoint"
_LENGTH = struct.Struct("<Q")
_NUMBER_KINDS = "biufc"  # bool, int, uint, float, complex: what an array read back may hold


class CorruptCheckpoint(Exception):
    pass


class PickleCheckpoint(Exception):
    """A checkpoint of the older format, whose payload is a pickle: it is not read."""


def checkpoint_path(run_dir: Path, iteration: int) -> Path:
    return Path(run_dir) / f"checkpoint_{iteration:07d}.ckpt"


def checkpoint_iteration(path: Path) -> int | None:
    """The iteration of a checkpoint named as a run names it (`checkpoint_path`), else None."""
    m = CHECKPOINT_NAME.fullmatch(Path(path).name)
    return int(m[1]) if m and checkpoint_path(".", int(m[1])).name == m[0] else None


def list_checkpoints(run_dir: Path) -> list[Path]:
    """The checkpoints a run wrote in `run_dir` (named as `checkpoint_path` names them, regular
    files: reading a FIFO would hang), newest first by iteration (from 10,000,000 the names are
    longer); none when the folder cannot be read."""
    try:
        paths = list(Path(run_dir).iterdir())
    except OSError:
        return []
    found = [(i, p) for p in paths if (i := checkpoint_iteration(p)) is not None and p.is_file()]
    return [p for _, p in sorted(found, reverse=True)]


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


def read_regular_file(path: Path) -> bytes:
    """The bytes of a regular file; `CorruptCheckpoint` when it cannot be read or is something
    else (opened without blocking: opening or reading a FIFO named like a checkpoint would wait
    forever for a writer)."""
    try:
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as file:
            if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                raise CorruptCheckpoint("not a regular file (a FIFO, a device or a socket)")
            return file.read()
    except OSError as exc:
        raise CorruptCheckpoint(f"cannot read it ({exc.strerror or exc})") from None


def read_checkpoint(path: Path) -> dict:
    """The payload of a checkpoint file; `CorruptCheckpoint` saying why when it is not one,
    `PickleCheckpoint` when it is one of the older format (never unpickled)."""
    raw = read_regular_file(path)
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


# -- checking a checkpoint against what the script built, before anything is changed -------

_PAYLOAD_TYPES = {
    "script": str,
    "run_name": str,
    "iteration": int,
    "global_step": int,
    "args": dict,
    "rng": dict,
    "state": dict,
}


def payload_problem(payload: dict) -> str | None:
    """Why a decoded checkpoint is not one a run wrote (a field missing or of another type, a
    count out of range), or None."""
    for name, kind in _PAYLOAD_TYPES.items():
        value = payload.get(name)
        if not isinstance(value, kind) or isinstance(value, bool):
            return f"its {name!r} is {type(value).__name__}, not {kind.__name__}"
    total = payload["args"].get("num_iterations")
    if not isinstance(total, int) or isinstance(total, bool) or total < 1:
        return f"its number of iterations is {total!r}"
    if not 0 <= payload["iteration"] <= total or payload["global_step"] < 0:
        return (
            f"its iteration {payload['iteration']} or step {payload['global_step']} is out of range"
        )
    elapsed = payload.get("elapsed", 0.0)
    if not isinstance(elapsed, (int, float)) or isinstance(elapsed, bool) or not elapsed >= 0:
        return f"its elapsed time is {elapsed!r}"
    return None


def _is_array(x) -> bool:
    torch = sys.modules.get("torch")
    jax = sys.modules.get("jax")
    return (
        isinstance(x, (np.ndarray, np.generic))
        or (torch is not None and isinstance(x, torch.Tensor))
        or (jax is not None and isinstance(x, jax.Array))
    )


def _shape_dtype(x) -> tuple[tuple, np.dtype]:
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        return tuple(x.shape), np.dtype(str(x.dtype).removeprefix("torch."))
    return tuple(np.shape(x)), np.dtype(x.dtype)


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _is_scalar(x) -> bool:
    """A number, or an array of numbers of shape ()."""
    if _is_number(x):
        return True
    if not _is_array(x):
        return False
    shape, dtype = _shape_dtype(x)
    return shape == () and dtype.kind in "biuf"


def _finite(x) -> bool:
    try:
        return bool(np.isfinite(float(x)))
    except OverflowError:
        return False


def tree_problem(template, saved, where: str) -> str | None:
    """Where `saved` differs from `template` in structure (dict keys, list lengths, tuples),
    array shapes and dtypes, or the kind of a plain value; None when it fits. A list of numbers
    in the template (a deque) takes a list of numbers of any length; an integer array of shape ()
    may stand where the template has an int (a fresh flax `TrainState` counts its steps in one)."""
    if type(template) is int and _is_scalar(saved) and np.asarray(saved).dtype.kind in "iu":
        return None
    if _is_array(template):
        if not _is_array(saved):
            return f"{where} is {type(saved).__name__}, not an array"
        (shape, dtype), (saved_shape, saved_dtype) = _shape_dtype(template), _shape_dtype(saved)
        if shape != saved_shape or dtype != saved_dtype:
            return f"{where} is {saved_dtype}{list(saved_shape)}, not {dtype}{list(shape)}"
        return None
    if isinstance(template, dict):
        if not isinstance(saved, dict):
            return f"{where} is {type(saved).__name__}, not a dict"
        if set(template) != set(saved):
            missing, extra = set(template) - set(saved), set(saved) - set(template)
            diff = [f"no {k!r}" for k in list(missing)[:3]] + [f"{k!r}" for k in list(extra)[:3]]
            return f"{where} does not have the entries the script's has ({', '.join(diff)})"
        for key, value in template.items():
            problem = tree_problem(value, saved[key], f"{where}[{key!r}]")
            if problem:
                return problem
        return None
    if isinstance(template, deque):
        if not isinstance(saved, list) or not all(_is_number(x) and _finite(x) for x in saved):
            return f"{where} is not a list of numbers"
        if template.maxlen is not None and len(saved) > template.maxlen:
            return f"{where} has {len(saved)} entries, more than {template.maxlen}"
        return None
    if isinstance(template, (list, tuple)):
        if type(saved) is not type(template):
            return f"{where} is {type(saved).__name__}, not {type(template).__name__}"
        if len(saved) != len(template):
            return f"{where} has {len(saved)} entries, not {len(template)}"
        for i, (t, s) in enumerate(zip(template, saved)):
            problem = tree_problem(t, s, f"{where}[{i}]")
            if problem:
                return problem
        return None
    if _is_number(template) and _is_number(saved):
        return None if _finite(saved) else f"{where} is {str(saved)[:40]}"
    if type(template) is not type(saved):
        return (
            f"{where} is {type(saved).__name__} {str(saved)[:40]!r}, not {type(template).__name__}"
        )
    return None


def _template(value):
    """What `saved_value(value)` would look like once the script has trained: an optimizer's
    state is empty before its first step, so one step with zero gradients on a copy fills it."""
    if hasattr(value, "state_dict") and hasattr(value, "param_groups"):
        import copy

        optimizer = copy.deepcopy(value)
        for group in optimizer.param_groups:
            for p in group["params"]:
                p.grad = p.detach().new_zeros(p.shape)
        optimizer.step()
        return optimizer.state_dict()
    return saved_value(value)


def state_problem(state: dict, saved: dict) -> str | None:
    """Why the checkpoint's `saved` state cannot be loaded into the script's `state` (names,
    shapes, dtypes), or None. Nothing is changed."""
    for name, value in state.items():
        if name not in saved:
            return f"the checkpoint has no {name!r} (saved: {', '.join(map(str, saved))})"[:300]
        template = value if isinstance(value, deque) else _template(value)
        problem = tree_problem(template, saved[name], f"the checkpoint's {name}")
        if problem:
            return problem
    return None


def rng_problem(rng: dict) -> str | None:
    """Why the saved RNG states cannot be set, or None: each is tried on a new generator."""
    try:
        random.Random().setstate(rng["python"])
        np.random.RandomState().set_state(rng["numpy"])
        if "torch" in rng or "cuda" in rng:
            import torch

            states = [rng["torch"]] if "torch" in rng else []
            states += list(rng["cuda"]) if "cuda" in rng else []
            for s in states:
                if not isinstance(s, torch.Tensor) or s.dtype != torch.uint8 or s.dim() != 1:
                    raise ValueError("not a torch RNG state")
            if "torch" in rng:
                torch.Generator().set_state(rng["torch"])
    except Exception as exc:  # whatever a generator says of a state it cannot take
        return f"the checkpoint's RNG states cannot be set ({type(exc).__name__}: {str(exc)[:80]})"
    return None
