"""Reading TensorBoard event files: the TFRecord framing and a few bytes of each Event by hand,
and the protobuf parser only for the records that hold a wanted tag."""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

EVENT_FILE_GLOB = "events.out.tfevents.*"
_RECORD_HEADER = struct.Struct("<QI")  # data length, masked CRC of the length
_MAX_RECORD_BYTES = 1 << 28


def _crc32c_table() -> np.ndarray:
    """CRC-32C (Castagnoli, reflected polynomial 0x82F63B78): the byte-at-a-time table."""
    crc = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        crc = np.where(crc & 1, (crc >> 1) ^ np.uint32(0x82F63B78), crc >> 1)
    return crc.astype(np.uint32)


_CRC_TABLE = _crc32c_table()


_CHUNK = 4096  # bytes a checksum walks per NumPy step at most; longer ranges are cut into chunks


def _after_zeros(n: int) -> np.ndarray:
    """The CRC register after `n` zero bytes from each one-byte register value, by byte position
    (4 x 256): the register's walk over zeros is linear, so these tables shift any register."""
    shifts = 8 * np.arange(4, dtype=np.uint32)[:, None]
    reg = (np.arange(256, dtype=np.uint32)[None, :] << shifts).ravel()
    for _ in range(n):
        reg = _CRC_TABLE[reg & 0xFF] ^ (reg >> 8)
    return reg.reshape(4, 256)


_AFTER_CHUNK = _after_zeros(_CHUNK)


def _walk(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, init: np.ndarray):
    """The CRC registers after the byte ranges `data[starts[i] : starts[i] + lengths[i]]`, each
    from its register `init[i]`, all at once: one NumPy step per byte position, over the ranges
    that are that long."""
    order = np.argsort(-lengths, kind="stable")
    starts_sorted, lengths_sorted = starts[order], lengths[order]
    crc = init[order]
    longest = int(lengths_sorted[0]) if len(lengths_sorted) else 0
    # how many ranges are longer than j, for each j: the ranges are sorted longest first
    active = np.searchsorted(-lengths_sorted, -np.arange(longest), side="left")
    for j in range(longest):
        k = active[j]
        part = crc[:k]
        crc[:k] = _CRC_TABLE[(part ^ data[starts_sorted[:k] + j]) & 0xFF] ^ (part >> 8)
    out = np.empty_like(crc)
    out[order] = crc
    return out


def masked_crc32c(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The masked CRC-32C (as TFRecord frames each length and each record) of the byte ranges
    `data[starts[i] : starts[i] + lengths[i]]`, all at once. A long range is cut into chunks of
    `_CHUNK` bytes that are walked side by side, each from a zero register but the first, and
    joined after (the register is linear: walking a chunk from register r is walking it from 0,
    xor r walked over as many zeros), so a record of 40 MB takes about `_CHUNK` + 10,000 NumPy
    steps, not 40 million."""
    chunks = np.maximum(-(-lengths // _CHUNK), 1)  # the first chunk takes what is left over
    owner = np.repeat(np.arange(len(starts)), chunks)
    first = np.cumsum(chunks) - chunks  # each range's first chunk
    index = np.arange(len(owner)) - first[owner]
    head = (lengths - (chunks - 1) * _CHUNK)[owner]
    chunk_starts = starts[owner] + np.where(index == 0, 0, head + (index - 1) * _CHUNK)
    chunk_lengths = np.where(index == 0, head, _CHUNK)
    init = np.where(index == 0, 0xFFFFFFFF, 0).astype(np.uint32)
    registers = _walk(data, chunk_starts, chunk_lengths, init)
    crc = registers[first]
    for j in range(1, int(chunks.max()) if len(chunks) else 0):
        live = np.flatnonzero(chunks > j)
        r, table = crc[live], _AFTER_CHUNK
        shifted = table[0][r & 0xFF] ^ table[1][(r >> 8) & 0xFF] ^ table[2][(r >> 16) & 0xFF]
        crc[live] = shifted ^ table[3][r >> 24] ^ registers[first[live] + j]
    crc ^= np.uint32(0xFFFFFFFF)
    return ((crc >> 15) | (crc << 17)) + np.uint32(0xA282EAD8)


@dataclass
class EventData:
    scalars: dict[str, list[tuple[int, float, float]]]  # tag -> [(step, wall_time, value)]
    first_wall: float | None = None  # the earliest and latest wall time of any record
    last_wall: float | None = None
    last_step: int = 0
    records: int = 0
    problem: str | None = None  # why reading stopped early, if it did
    bad_records: int = 0  # records whose checksum failed, dropped (as TensorBoard drops them)
    purge_step: int | None = None  # a resumed run's file: earlier files' steps >= this are void


def _scalar_value(value) -> float | None:
    """The float of a `Summary.Value`: `simple_value` (PyTorch, TF1) or a scalar tensor (TF2)."""
    kind = value.WhichOneof("value")
    if kind == "simple_value":
        return float(value.simple_value)
    if kind == "tensor":
        tensor = value.tensor
        if tensor.float_val:
            return float(tensor.float_val[0])
        if tensor.double_val:
            return float(tensor.double_val[0])
        if tensor.tensor_content:
            dtype = {1: "<f4", 2: "<f8"}.get(tensor.dtype)
            if dtype is not None:
                return float(np.frombuffer(tensor.tensor_content, dtype=dtype)[0])
    return None


def read_event_file(path: str | os.PathLike, tags: tuple[str, ...]) -> EventData:
    """The scalars of `tags` in one event file, with the first and last wall time and the last
    step. Stops at the first record that cannot be read and says why in `problem`, keeping
    everything before it (a run that is still writing ends in a partial record).

    A record is corrupt only where the framing or a checksum says so (a record whose checksum
    fails is dropped and counted in `bad_records`). Only the TFRecord framing is walked in
    Python; the checksums and the wall times (the first field of every Event) are computed with
    NumPy, and the protobuf parser sees only the records that contain one of `tags`.
    """
    from google.protobuf.message import DecodeError
    from tensorboard.compat.proto import event_pb2
    from tensorboard.compat.proto.event_pb2 import SessionLog

    START = SessionLog.START

    data = Path(path).read_bytes()
    out = EventData(scalars={tag: [] for tag in tags})
    starts, stops = [], []
    pos, end, header = 0, len(data), _RECORD_HEADER.size
    unpack = _RECORD_HEADER.unpack_from
    while pos < end:
        if end - pos < header:
            out.problem = (
                f"ends in a partial record at byte {pos} (still being written, or cut off)"
            )
            break
        length = unpack(data, pos)[0]
        if length > _MAX_RECORD_BYTES:
            out.problem = f"corrupt record at byte {pos} (length {length})"
            break
        if pos + header + length + 4 > end:
            out.problem = (
                f"ends in a partial record at byte {pos} (still being written, or cut off)"
            )
            break
        starts.append(pos + header)
        pos += header + length
        stops.append(pos)
        pos += 4
    starts_arr, stops_arr = np.array(starts, dtype=np.int64), np.array(stops, dtype=np.int64)
    raw = np.frombuffer(data, dtype=np.uint8)
    # the checksums: a damaged length loses the records after it, a damaged record only itself
    crc_at = lambda at: raw[at[:, None] + np.arange(4)].copy().view("<u4")[:, 0]  # noqa: E731
    length_ok = masked_crc32c(
        raw, starts_arr - header, np.full(len(starts), 8, np.int64)
    ) == crc_at(starts_arr - 4)
    if not length_ok.all():
        bad = int(np.argmin(length_ok))
        out.problem = (
            f"corrupt record at byte {starts[bad] - header} (its length fails its checksum)"
        )
        starts_arr, stops_arr = starts_arr[:bad], stops_arr[:bad]
    data_ok = masked_crc32c(raw, starts_arr, stops_arr - starts_arr) == crc_at(stops_arr)
    out.bad_records = int((~data_ok).sum())
    starts_arr, stops_arr = starts_arr[data_ok], stops_arr[data_ok]
    # every Event written by TensorBoard's writers starts with its wall time, field 1, a double
    # (tag byte 0x09); any wall time is valid (a tool may write its own), and a record without
    # one (a wall time of 0 is not written) has none to count
    has_wall = (stops_arr - starts_arr >= 9) & (raw[np.minimum(starts_arr, end - 1)] == 0x09)
    idx = np.minimum(starts_arr[:, None] + 1 + np.arange(8), end - 1)
    walls = raw[idx].copy().view("<f8")[:, 0] if len(starts_arr) else np.zeros(0)
    walls = np.where(has_wall, walls, np.nan)
    count = len(starts_arr)
    pattern = re.compile(b"|".join(re.escape(tag.encode()) for tag in tags))
    limit = int(stops_arr[-1]) if count else 0
    hits = [m.start() for m in pattern.finditer(data, 0, limit)]
    wanted = sorted(set((np.searchsorted(starts_arr, hits, side="right") - 1).tolist()))
    if count:
        # the last record: the last step; the first few: a resumed run's purge marker
        wanted = sorted(set(wanted) | {count - 1} | set(range(min(count, 3))))
    last_step = 0
    for i in wanted:
        if i < 0:
            continue
        try:
            event = event_pb2.Event.FromString(data[starts_arr[i] : stops_arr[i]])
        except DecodeError:
            out.problem = f"corrupt record at byte {int(starts_arr[i]) - header} (DecodeError)"
            count = i
            break
        if event.HasField("session_log") and event.session_log.status == START:
            out.purge_step = event.step
            continue
        last_step = max(last_step, event.step)
        for value in event.summary.value:
            if value.tag in out.scalars:
                number = _scalar_value(value)
                if number is not None:
                    out.scalars[value.tag].append((event.step, event.wall_time, number))
    counted = walls[:count][np.isfinite(walls[:count])]
    if len(counted):
        out.first_wall, out.last_wall = float(counted.min()), float(counted.max())
    out.last_step, out.records = last_step, count
    return out


def event_files(run_dir: str | os.PathLike) -> list[Path]:
    """The event files of a run folder (not of its subfolders), in name order: by start time."""
    return sorted(Path(run_dir).glob(EVENT_FILE_GLOB))
