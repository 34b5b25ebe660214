"""One JAX run on many processes (hosts): `jax.distributed` set up from the environment, and the
few exchanges that the run lifecycle (`cleanrl_utils.run.Run`) makes between them.

The JAX counterpart of `cleanrl_utils.distributed.torch_ranks.Distributed` for
`cleanrl/ppo_atari_envpool_xla_jax_scan_multigpu.py`, which makes these calls:

    with entry_point(), Run(parse_args(Args), __file__, dist=JaxDistributed) as run:
        processes = run.dist          # how many processes, which one (bad input: exit 2); process
        ...                           # 0 alone writes; the stop agreement
        configure_jax(args)
        processes.connect(run)        # jax.distributed.initialize; the processes agree on the run
        devices = jax.devices()       # every process's devices

The processes are given by the environment, in one of two ways (all else: one process):

- `srun` with several tasks (`SLURM_STEP_NUM_TASKS` > 1): one process per task, its id
  `SLURM_PROCID`; the coordinator is `JAX_COORDINATOR_ADDRESS` (`host:port` of process 0), which
  `benchmark/cleanrl_multinode_jax.slurm_template` sets to the job's first node.
- By hand (any launcher, or several shells): `JAX_COORDINATOR_ADDRESS`, `JAX_NUM_PROCESSES` and
  `JAX_PROCESS_ID` (0 to JAX_NUM_PROCESSES - 1), the same on every process but the id.

Each process uses all of its host's devices (JAX's own SLURM detection would give each task one
device: not what a process per host wants). On CPUs the processes' collectives go through gloo
(JAX's default). Every wait for the others (joining, the agreement) is bounded by
`CLEANRL_DIST_TIMEOUT_S` (`cleanrl_utils.distributed.lost_ranks.timeout_s`); a process that ends waits for
process 0, which runs the evaluation after training, at most `SHUTDOWN_S`. The processes' messages
are JSON (`ranks.encode_message`), never pickles; process 0 listens on the host of the address.
"""

from __future__ import annotations

import errno
import math
import os
import socket
import threading
import time

import numpy as np

from cleanrl_utils.checks.args import C_INT
from cleanrl_utils.console.errors import FAILED, USAGE_ERROR, fail
from cleanrl_utils.console.output import flush, say
from cleanrl_utils.distributed.agreement import (
    BadMessage,
    decode_messages,
    disagreement,
    encode_message,
    run_view,
)
from cleanrl_utils.distributed.lost_ranks import DEFAULT_TIMEOUT_S, timeout_s

SHUTDOWN_S = 6 * 3600  # (process 0's evaluation games, after the others are done)
JAX_GRACE_S = 60  # jaxlib's own join timeout past CLEANRL_DIST_TIMEOUT_S (the watchdog's)
VARIABLES = ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID")


def process_layout(env=os.environ) -> tuple[str | None, int, int]:
    """(coordinator address, process count, this process's id) from the environment (the module
    docstring); a layout that cannot work is one `error:` line and exit code 2."""
    address, count, index = (env.get(name) for name in VARIABLES)
    if count is None and index is None and int(env.get("SLURM_STEP_NUM_TASKS", "1") or 1) > 1:
        count, index = env["SLURM_STEP_NUM_TASKS"], env.get("SLURM_PROCID", "0")
        given = "srun's SLURM_STEP_NUM_TASKS"
    elif address is None and count is None and index is None:
        return None, 1, 0
    else:
        missing = [name for name, value in zip(VARIABLES[1:], (count, index)) if value is None]
        if missing:
            fail(f"{' and '.join(missing)} not set: a run on many processes needs {VARIABLES}")
        given = "JAX_NUM_PROCESSES"
    try:
        count, index = int(count), int(index)
    except ValueError:
        fail(f"the process count and id must be integers, got {count!r} and {index!r}")
    if count < 1 or not 0 <= index < count:
        fail(f"process id {index} of {count} processes: give an id from 0 to {count - 1}")
    if count > 1 and address is None:
        fail(
            f"{count} processes ({given}) but no coordinator: set JAX_COORDINATOR_ADDRESS to "
            "host:port of process 0, the same on every process"
        )
    if count > 1 and not address.rpartition(":")[2].isdigit():
        fail(f"JAX_COORDINATOR_ADDRESS {address!r} is not host:port")
    return address, count, index


def listen_problem(host: str, port: int) -> str | None:
    """Why process 0 cannot listen on `host:port` (JAX's coordinator), found by binding it
    first; None when it can. jaxlib's own failure comes after a C++ log line."""
    address = f"{host}:{port}"
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError) as exc:
        return f"cannot listen at {address}: the host is not known here ({exc})"
    for family, kind, proto, _, where in found:
        with socket.socket(family, kind, proto) as probe:
            # (as JAX's server does: a connection of an earlier run, closing, holds nothing)
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(where)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    return (
                        f"the port of {address} is in use by another program: give "
                        "JAX_COORDINATOR_ADDRESS another port (the same on every process)"
                    )
                return (
                    f"cannot listen at {address} ({exc.strerror or exc}): give "
                    "JAX_COORDINATOR_ADDRESS a host:port of process 0's machine"
                )
    return None


def wait_for_listener(host: str, port: int) -> None:
    """Returns once `host:port` takes a TCP connection (the caller's watchdog bounds the wait):
    jaxlib's own wait for a coordinator that never comes ends in an abort."""
    while True:
        try:
            with socket.create_connection((host, port), timeout=1.0):
                return
        except OSError:
            time.sleep(0.2)


class JaxDistributed:
    """This process's place in the run (rank, world size) and the exchanges `Run` makes."""

    launcher = "srun (or JAX_NUM_PROCESSES=... JAX_PROCESS_ID=...) python"

    def __init__(self, args):
        """Reads the layout (`process_layout`); envs that do not split over the processes are
        one `error:` line and exit code 2, on every process alike, before any connection."""
        self.address, self.world_size, self.rank = process_layout()
        self.is_main = self.rank == 0
        self.connected = False
        self.timeout_s = timeout_s() if self.world_size > 1 else DEFAULT_TIMEOUT_S
        if args.num_envs % self.world_size:
            fail(
                f"--num-envs {args.num_envs} does not split over the {self.world_size} "
                f"processes: give a multiple of {self.world_size}"
            )

    def connect(self, run=None) -> None:
        """Joins the other processes (`jax.distributed.initialize`, before any JAX computation);
        a coordinator that cannot be reached or bound, or processes that do not all join within
        `timeout_s`, is one `error:` line and exit code 2. With `run`, the processes then agree
        on it (`agree`)."""
        if self.world_size == 1:
            return
        import jax

        host, _, port = self.address.rpartition(":")
        # jaxlib ends a join that outlasts its own timeout with LOG(FATAL), a SIGABRT that Python
        # cannot catch: this watchdog ends it first, with the line of how far it got
        self.joining = f"nothing answered at {self.address} (process 0, the coordinator)"
        if self.is_main:
            self.joining = f"the other {self.world_size - 1} did not all join at {self.address}"
        if self.is_main and (problem := listen_problem(host.strip("[]"), int(port))):
            fail(f"process 0: {problem}")
        watchdog = threading.Timer(self.timeout_s, self._late)
        watchdog.daemon = True
        watchdog.start()
        try:
            if not self.is_main:
                wait_for_listener(host.strip("[]"), int(port))
                self.joining = (
                    f"something listens at {self.address}, but the {self.world_size} processes "
                    "did not all join there (another program on that port, or a process not "
                    "started?)"
                )
            jax.distributed.initialize(
                self.address,
                self.world_size,
                self.rank,
                local_device_ids=None,
                cluster_detection_method="deactivate",
                # (longer than the watchdog's: its line, not jaxlib's abort)
                initialization_timeout=min(math.ceil(self.timeout_s) + JAX_GRACE_S, C_INT),
                shutdown_timeout_seconds=SHUTDOWN_S,
                # (JAX's own default is every interface, whatever host the address names)
                coordinator_bind_address=self.address if self.is_main else None,
            )
        except Exception as exc:  # (jaxlib's errors: a port in use, a deadline exceeded)
            first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else repr(exc)
            fail(
                f"process {self.rank}: could not join the other {self.world_size - 1} at "
                f"{self.address}: {first}"
            )
        finally:
            watchdog.cancel()
        self.connected = True
        if run is not None:
            self.agree(run)

    def agree(self, run) -> None:
        """The processes compare `run_view` of their run: a difference is one `error:` line
        naming it on every process and exit code 2. A new run takes process 0's name."""
        views = self.all_gather((run_view(run), run.name))
        if problem := disagreement([view for view, _ in views]):
            self._fail_together(problem, USAGE_ERROR)
        if run.payload is None:
            run.take_name(views[0][1])

    def _late(self) -> None:
        flush()
        say(
            f"error: process {self.rank}: {self.joining} within {self.timeout_s:.0f} s "
            "(CLEANRL_DIST_TIMEOUT_S): start every process with the same "
            "JAX_COORDINATOR_ADDRESS and JAX_NUM_PROCESSES, or wait longer"
        )
        os._exit(USAGE_ERROR)  # (from the watchdog's thread, while jaxlib holds the main one)

    def _fail_together(self, message: str, code: int) -> None:
        """Every process found the same problem in the same exchange: one `error:` line each,
        and `code`."""
        flush()
        say(f"error: {message}")
        os._exit(code)  # (every process exits alike: no one waits in the shutdown)

    def all_gather(self, value) -> list:
        """Every process's `value` (plain data: `ranks.encode_message`), in process order, on
        every process. A message that is not one is one line naming its sender on every
        process, exit code 1, and never run."""
        if self.world_size == 1:
            return [value]
        from jax.experimental.multihost_utils import process_allgather

        data = np.frombuffer(encode_message(value), np.uint8)
        sizes = process_allgather(np.array([len(data)], np.int64))[:, 0]
        padded = np.zeros(int(sizes.max()), np.uint8)
        padded[: len(data)] = data
        rows = process_allgather(padded)
        try:
            return decode_messages(rows, sizes, "process")
        except BadMessage as exc:
            self._fail_together(str(exc), FAILED)

    def gather(self, value) -> list | None:
        """Every process's `value`, in process order, on process 0; None elsewhere."""
        values = self.all_gather(value)
        return values if self.is_main else None

    def agreed_stop(self, signum: int | None) -> int | None:
        """Once an iteration on every process: None when no process got a stop signal, else the
        signal of the lowest process that got one, the same everywhere, so that all stop after
        the same iteration."""
        if self.world_size == 1:
            return signum
        from jax.experimental.multihost_utils import process_allgather

        signals = process_allgather(np.array([signum or 0], np.int32))[:, 0]
        return next((int(s) for s in signals if s), None)

    def close(self, wait: bool = True) -> None:
        """Nothing: JAX leaves the other processes at the exit (a barrier, `SHUTDOWN_S`)."""
