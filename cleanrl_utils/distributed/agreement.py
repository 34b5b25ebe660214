"""What the ranks of one run on many processes must hold alike (`cleanrl_utils.distributed.torch_ranks`):
what they compare at the start (`run_view`, `disagreement`), and the generator of the minibatch
permutations (`Shuffle`), whose digest they compare every iteration."""

from __future__ import annotations

import dataclasses
import hashlib
import zlib
from pathlib import Path

import numpy as np

from cleanrl_utils.checks.args import flag
from cleanrl_utils.files.state_file import decode_tree, encode_tree

# arguments a rank may hold differently: each node's own GPUs; the resume target is compared
# as what `--resume` found, not as the words given
PER_RANK_ARGS = {"device_ids", "resume"}
# compared as what it means: its five settings, each an argument of the view (the same settings
# given one by one or as `--protocol machado` are the same games)
BY_MEANING_ARGS = {"protocol"}
SHOWN_DIFFERENCES = 3  # an error line names at most this many disagreements, then counts them


class Shuffle:
    """The minibatch permutations' own generator: MT19937 seeded as `np.random.seed(seed)` (run
    alone, a script draws its one-process sibling's permutations). No other draw touches it, so
    the ranks' copies stay equal (`digest`); a checkpoint holds its state."""

    def __init__(self, seed: int):
        self.rng = np.random.RandomState(seed)

    def __call__(self, inds: np.ndarray) -> None:
        self.rng.shuffle(inds)

    def state_dict(self) -> dict:
        state = self.rng.get_state(legacy=False)["state"]
        return {"key": state["key"], "pos": int(state["pos"])}

    def load_state_dict(self, saved: dict) -> None:
        state = {"key": np.asarray(saved["key"], dtype=np.uint32), "pos": int(saved["pos"])}
        self.rng.set_state({"bit_generator": "MT19937", "state": state})

    def digest(self) -> int:
        """A CRC-32 of the generator's state: equal on every rank while their draws are."""
        state = self.state_dict()
        return zlib.crc32(state["key"].tobytes() + state["pos"].to_bytes(4, "little"))


def run_view(run) -> dict[str, object]:
    """What the ranks of `run` (a `cleanrl_utils.run.Run`) must hold alike, by the name an error
    line gives it: the script and its code, every argument that shapes the run, the resume
    target, the runs folder."""
    source = Path(run.script_file).read_bytes()
    view: dict[str, object] = {
        "the script": f"{run.script}.py (sha256 {hashlib.sha256(source).hexdigest()[:12]})"
    }
    for field in dataclasses.fields(run.args):
        if field.init and field.name not in PER_RANK_ARGS | BY_MEANING_ARGS:
            view[flag(field.name)] = getattr(run.args, field.name)
    target = "none (a new run)"
    if run.payload is not None:
        target = f"{run.name}, iteration {run.payload['iteration']}"
    view["the resume target"] = target
    view["the runs folder"] = str(Path(run.runs_dir).resolve())
    return view


def disagreement(views: list[dict[str, object]]) -> str | None:
    """The line naming what the ranks' `views` (in rank order) differ on, each value with the
    ranks holding it (`--seed: 1 on rank 0, 7 on rank 1`); None when they agree."""
    differences = []
    for name in views[0]:
        holders: dict[str, list[int]] = {}
        for rank, view in enumerate(views):
            holders.setdefault(str(view.get(name, "nothing")), []).append(rank)
        if len(holders) > 1:
            said = [
                f"{value} on rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}"
                for value, ranks in holders.items()
            ]
            differences.append(f"{name}: {', '.join(said)}")
    if not differences:
        return None
    more = len(differences) - SHOWN_DIFFERENCES
    shown = "; ".join(differences[:SHOWN_DIFFERENCES]) + (f"; {more} more" if more > 0 else "")
    return f"the ranks disagree on {shown} (start every rank with the same command and files)"


class BadMessage(ValueError):
    """Another process's message is not one `encode_message` makes: its line names the sender."""


def encode_message(value) -> bytes:
    """`value` (plain data, NumPy arrays and torch tensors: what a checkpoint holds) as the bytes
    a process sends the others: JSON and raw numbers (`checkpoint.encode_tree`), which cannot
    carry code, as a pickle can: the processes listen on a port of the network."""
    return encode_tree(value)


def decode_messages(rows, sizes, noun: str) -> list:
    """The values in the processes' messages, `rows[i][: sizes[i]]` sent by `noun` i;
    `BadMessage` naming the first sender whose message is not one (it is never run)."""
    values = []
    for sender, (row, size) in enumerate(zip(rows, sizes)):
        data = bytes(np.asarray(row, np.uint8)[: int(size)])
        try:
            values.append(decode_tree(data))
        except (ValueError, KeyError, TypeError, IndexError, AttributeError, RecursionError) as e:
            why = str(e).strip().splitlines()[0][:120] if str(e).strip() else type(e).__name__
            raise BadMessage(
                f"{noun} {sender} sent a message that is not JSON of this project's form ({why}): "
                "it is refused unread, nothing in it is run (every process must run the same "
                "version of cleanrl_utils)"
            ) from None
    return values


def adopt_old_shuffle(payload: dict, rank: int) -> None:
    """A checkpoint written before the permutations had a generator of their own: the global
    NumPy generator drew them, and the checkpoint holds its state (each rank's), which becomes
    the `Shuffle`'s, so that the run goes on with the permutations it would have drawn."""
    state = payload.get("state")
    if not isinstance(state, dict) or "shuffle" in state:
        return
    rngs = payload.get("ranks_rng") or [payload.get("rng")]
    mine = rngs[rank] if isinstance(rngs, list) and rank < len(rngs) else None
    numpy_state = mine.get("numpy") if isinstance(mine, dict) else None
    if isinstance(numpy_state, (tuple, list)) and len(numpy_state) >= 3:
        key = np.asarray(numpy_state[1], dtype=np.uint32)
        state["shuffle"] = {"key": key, "pos": int(numpy_state[2])}
