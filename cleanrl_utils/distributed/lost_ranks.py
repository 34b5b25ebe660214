"""What a rank of a torch process group (`cleanrl_utils.distributed.torch_ranks`) does when another rank is
missing: one that stopped before joining, one lost in a collective, one not yet at the end.

Each of them goes through the store the ranks meet at (torchrun's agent's, or rank 0's), which
outlives a rank that died:

- before joining: a rank that stops (bad input on it alone, a checkpoint it cannot read) says so
  in the store at its exit (`tell_stopped_before_joining`); the others, while they join, watch
  for it (`watch_joining`) and stop at once with one line instead of waiting `timeout_s()`;
- in a collective: the ranks left say they are alive; those that do not within `ALIVE_WAIT_S`
  are lost, and each rank left exits with one line naming them (`exit_lost`), exit code 1 (`FAILED`: the run goes on from its newest checkpoint);
- at the end: a rank in step with the others leaves the group only once every rank is closing
  (`wait_closing`): one that left at once could reset the connection under rank 0's last gather.

These functions read the `Distributed` they are given (its rank, world size, store, run); none
changes it.
"""

from __future__ import annotations

import datetime
import math
import os
import signal
import threading
import time

from cleanrl_utils.checks.args import C_INT
from cleanrl_utils.console.errors import FAILED, USAGE_ERROR, fail
from cleanrl_utils.console.output import say
from cleanrl_utils.files.config import mark_stopped

DEFAULT_TIMEOUT_S = 600.0
ALIVE_WAIT_S = 5.0  # how long the ranks left wait for each other to say they are alive
# a rank that stopped before the others joined, in this attempt of torchrun's (its store lasts)
STOPPED_KEY = f"cleanrl/stopped_before_joining/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"


def timeout_s() -> float:
    """How long a rank waits for the others (joining, closing), in seconds: the variable
    `CLEANRL_DIST_TIMEOUT_S` (unset or empty: `DEFAULT_TIMEOUT_S`). One that is not a number of
    seconds from 1 to `C_INT` (JAX takes it as a C int of whole seconds; a timer and a store
    cannot wait forever) is one `error:` line naming it and exit code 2, where a run reads it:
    when a rank of a multi-process run starts, before it connects."""
    text = os.environ.get("CLEANRL_DIST_TIMEOUT_S", "").strip()
    if not text:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 1 <= value <= C_INT):
        fail(
            f"CLEANRL_DIST_TIMEOUT_S={text[:100]!r}: give the seconds a rank waits for the "
            f"others as a number from 1 to {C_INT} (unset: {DEFAULT_TIMEOUT_S:.0f})"
        )
    return value


def client_store(timeout_s: float):
    """A connection to the store the ranks meet at (torchrun's agent's, or rank 0's)."""
    import torch.distributed as torch_dist

    addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    timeout = datetime.timedelta(seconds=timeout_s)
    return torch_dist.TCPStore(addr, port, is_master=False, timeout=timeout)


def late(world_size: int, where: str, wait_s: float) -> str:
    return (
        f"the {world_size} ranks did not all join at {where} within {wait_s:.0f} s "
        "(CLEANRL_DIST_TIMEOUT_S)"
    )


def say_and_exit(rank: int, why: str) -> None:
    say(f"error: rank {rank}: {why}")
    os._exit(USAGE_ERROR)


def watch_joining(rank: int, joined: threading.Event) -> None:
    """While rank `rank` joins (until `joined` is set): a rank that stopped before joining stops
    this one at once. (A store that never answers holds this thread, not the watchdog of
    `timeout_s()`.)"""
    store = None
    while not joined.wait(0.5):
        try:
            store = store or client_store(1.0)
            if store.check([STOPPED_KEY]) and not joined.is_set():
                stopped = store.get(STOPPED_KEY).decode()
                say_and_exit(rank, f"rank {stopped} stopped before joining (it says why)")
        except (RuntimeError, ValueError, OSError):  # (no store yet)
            store = None


def tell_stopped_before_joining(dist) -> None:
    """At the exit of a rank that never joined the others: it says so in the store, so that they
    stop at once instead of waiting for it (`watch_joining`). torchrun's agent always holds the
    store; without torchrun, rank 0 holds it once it is joining: a short wait."""
    agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    if dist.joined or not (agent or dist.rank != 0):  # (rank 0 would host it: nobody does)
        return
    # this rank's exit code is its own: torchrun's SIGTERM, once another node's agent has gone,
    # would make it -15
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    wait_s = 1.0 if agent else 3.0  # (an agent's store is there from the start)

    def tell() -> None:
        try:
            client_store(wait_s).set(STOPPED_KEY, str(dist.rank))
        except (RuntimeError, ValueError, OSError, KeyError):
            pass

    # (in a thread: the exit waits no longer, whatever listens on the port and answers or not)
    teller = threading.Thread(target=tell, daemon=True)
    teller.start()
    teller.join(wait_s + 1.0)


def wait_closing(dist, wait: bool) -> None:
    """Says in the store that this rank is closing; with `wait`, returns once every rank is
    (up to `dist.timeout_s`), or once the store is gone with rank 0."""
    try:
        dist.store.set(f"cleanrl/closing/{dist.rank}", "1")
        if wait:
            keys = [f"cleanrl/closing/{r}" for r in range(dist.world_size)]
            dist.store.wait(keys, datetime.timedelta(seconds=dist.timeout_s))
    except RuntimeError:
        pass


def exit_lost(dist, exc) -> None:
    """A collective failed with `exc`: the ranks left say so in the store (torchrun's agent keeps
    it; without torchrun, rank 0 does); the ranks that do not within `ALIVE_WAIT_S` are lost,
    named in one line, and this rank exits with `FAILED`."""
    lost: list[int] | None = None
    try:
        dist.store.set(f"cleanrl/alive/{dist.rank}", "1")
        deadline = time.time() + ALIVE_WAIT_S
        while True:
            lost = [
                r for r in range(dist.world_size) if not dist.store.check([f"cleanrl/alive/{r}"])
            ]
            if not lost or time.time() > deadline:
                break
            time.sleep(0.1)
    except RuntimeError:  # the store went with rank 0
        lost = [0]
    first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
    names = ", ".join(map(str, lost or [])) or "unknown"
    say(
        f"error: rank {dist.rank}: lost rank {names} of {dist.world_size} ({first}); "
        f"{after_loss(dist, lost or [], names)}"
    )
    os._exit(FAILED)  # (no clean-up: it would wait on the lost rank again)


def after_loss(dist, lost: list[int], names: str) -> str:
    """What becomes of the run after the loss of the ranks `lost`: the lowest rank left records
    the stop in config.json (the report then calls the run stopped, not still running; rank 0
    first flushes what TensorBoard holds); the way on is its resume command when it has a
    checkpoint, a new start when it has none."""
    run = dist.run
    if run is None or getattr(run, "writer", None) is None:
        return "the run had not started: start it again"
    if dist.is_main:
        run.writer.flush()  # (what the iteration under way logged, for the report to read)
    if dist.rank == min(set(range(dist.world_size)) - set(lost), default=dist.rank):
        logged = run.global_step + getattr(run.args, "batch_size", 0)
        mark_stopped(run.dir / "config.json", f"the loss of rank {names}", logged)
    if run.checkpoints.newest is None:
        return "no checkpoint was written yet: the run must start again"
    return f"continue from its newest checkpoint with: {run.resume_command()}"
