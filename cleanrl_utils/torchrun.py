"""`python -m cleanrl_utils.torchrun`: torchrun (its own flags, through `torch.distributed.run`)
that ends as the run ends.

    python -m cleanrl_utils.torchrun --standalone --nproc_per_node=2 \\
        cleanrl/ppo_atari_envpool_multigpu.py --local-num-envs 4

Plain torchrun exits 1 whatever its processes' codes and prints a traceback of its own
(`ChildFailedError`, `SignalException`) under their last words. This launcher instead:

- exits with the run's code: 0, 2 (bad input), 74 (a full disk), 75 (stopped by SIGTERM or
  SIGUSR1 after a checkpoint: SLURM requeues it), 130 (Ctrl-C), 1 (a failure, a lost rank);
- prints no launcher traceback: what torchrun's says (which rank ended first, on which host,
  with which code) is one line, and the ranks' last words come after it, each once: their
  `error:` lines and the line naming the resume command are held back from the stream and
  printed last, so the last line on screen is the run's own;
- forwards SIGUSR1 to the processes too (SLURM's warning before the time limit), and SIGHUP (a
  closed terminal: the ranks stop with a checkpoint and 75; under `nohup`, which ignores it, it
  is not handled, and the ranks ignore it too), and waits up to `SHUTDOWN_S` for them to write
  their checkpoint after a stop signal (torchrun's `--signals-to-handle` and
  `--shutdown-timeout`, or their variables, still override);
- says a bad flag of its own in one line, exit code 2 (`--nproc-per-node 0`: torchrun's own
  check is an AssertionError naming nothing), and so a master port (or rendezvous endpoint)
  that another program holds, and a master (or other nodes) that did not come within
  `CLEANRL_DIST_TIMEOUT_S`, how long its rendezvous waits;
- never depends on its output being readable (`cleanrl_utils.console.output`): a terminal gone, or a
  `| tee` ended by Ctrl-C, drops the ranks' lines and its own, and the ranks still stop with
  their checkpoint and the launcher with their code.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import os
import re
import signal
import socket
import sys
import threading

from cleanrl_utils.console import output
from cleanrl_utils.console.errors import FAILED, USAGE_ERROR, entry_point
from cleanrl_utils.console.signals import signal_name, stop_code
from cleanrl_utils.distributed.lost_ranks import timeout_s

SIGNALS = "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1"
DEVICE_WORDS = ("auto", "cpu", "gpu", "xpu")  # `--nproc-per-node`: one process per device
SHUTDOWN_S = 120  # for the ranks to finish their iteration and checkpoint (SLURM: USR1@120)
# the lines of the ranks held back and printed last: their errors and the way to go on
LAST_WORDS = re.compile(rb"^(error: |.*\(continue with: )")
DRAIN_S = 5.0  # how long the ranks' output is read after torchrun returns (orphans may hold it)


class LastWords:
    """The ranks' stderr through a pipe: forwarded to `out` (an `output.SafeStream`: a terminal
    that is gone drops the lines, and the pipe is still read, so that no rank waits on it) line
    by line as it comes (a progress bar's redraws at once), but for the lines `LAST_WORDS`
    matches, kept (each once) to be printed at the end."""

    def __init__(self, out: output.SafeStream):
        self.out = out
        self.decode = codecs.getincrementaldecoder("utf-8")(errors="replace").decode
        self.read_fd, self.write_fd = os.pipe()
        self.held: list[bytes] = []
        self.thread = threading.Thread(target=self._forward, daemon=True)
        self.thread.start()

    def _forward(self) -> None:
        line = b""
        while chunk := os.read(self.read_fd, 65536):
            *lines, line = (line + chunk).split(b"\n")
            for whole in lines:
                self._line(whole + b"\n")
            if b"\r" in line:  # a progress bar, redrawn in place: shown as it is drawn
                self._write(line)
                line = b""
        if line:
            self._line(line + b"\n")
        os.close(self.read_fd)

    def _line(self, line: bytes) -> None:
        if LAST_WORDS.match(line):
            if line not in self.held:
                self.held.append(line)
        else:
            self._write(line)

    def _write(self, data: bytes) -> None:
        self.out.write(self.decode(data))
        self.out.flush()

    def finish(self) -> list[str]:
        """The held lines, once every process has closed the pipe (or after `DRAIN_S`)."""
        os.close(self.write_fd)
        self.thread.join(DRAIN_S)
        return [line.decode(errors="replace").rstrip("\n") for line in self.held]


def describe_code(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def run_code(codes: dict[int, int], first: int | None = None) -> int:
    """The run's exit code from its processes' (rank: code): the code the ranks exited with
    themselves (a rank killed by a signal, or stopped by torchrun after another failed, says
    nothing of the run), the first failed rank's when they differ; `FAILED` when none did."""
    own = {rank: code for rank, code in codes.items() if code > 0}
    if not own:
        return FAILED if any(codes.values()) else 0
    if len(set(own.values())) == 1:
        return next(iter(own.values()))
    return own.get(first, min(own.values(), key=lambda c: (c != FAILED, c)))


def summary(codes: dict[int, int], first: int | None, host: str) -> str:
    said = ", ".join(f"rank {r}: {describe_code(c)}" for r, c in sorted(codes.items()))
    head = f"rank {first} ended first; " if first is not None and len(codes) > 1 else ""
    return f"torchrun on {host}: {head}{said}"


def launch_problem(launch) -> str | None:
    """Why torchrun's own flags (parsed: `launch`) cannot start the processes, or None: what
    torchrun would find only later, as an AssertionError naming nothing (`--nproc-per-node 0`)
    or a ValueError naming no flag (`--nnodes abc`)."""
    from torch.distributed.run import determine_local_world_size

    nproc = str(launch.nproc_per_node)
    if nproc not in DEVICE_WORDS and not (nproc.isdigit() and int(nproc) > 0):
        return (
            f"--nproc-per-node {nproc}: give a number of processes of 1 or more, or one per "
            f"device: {', '.join(DEVICE_WORDS)}"
        )
    try:
        determine_local_world_size(nproc)
    except ValueError as exc:  # (`gpu` without CUDA)
        return f"--nproc-per-node {nproc}: {str(exc).rstrip('.')}"
    nnodes = str(launch.nnodes)
    counts = nnodes.split(":")
    if not (
        len(counts) <= 2
        and all(c.isdigit() for c in counts)
        and 0 < int(counts[0]) <= int(counts[-1])
    ):
        return (
            f"--nnodes {nnodes}: give a number of nodes of 1 or more, or MIN:MAX (1 <= MIN <= MAX)"
        )
    if launch.max_restarts < 0:
        return f"--max-restarts {launch.max_restarts}: give 0 or more"
    return None


def port_taken(exc: BaseException, launch) -> str | None:
    """The line of torchrun's own failure `exc` when it is the store's port held by another
    program (the store of the ranks, on the node that hosts it: EADDRINUSE), naming the flag that
    gives the port; None for any other failure."""
    if not any("EADDRINUSE" in str(e) for e in (exc, exc.__cause__, exc.__context__)):
        return None
    if launch is not None and launch.rdzv_backend != "static":
        where, flag = launch.rdzv_endpoint, "--rdzv-endpoint"
    else:
        where = f"{getattr(launch, 'master_addr', '?')}:{getattr(launch, 'master_port', '?')}"
        flag = "--master-port"
    return (
        f"error: torchrun: the port of {where} is in use by another program: give another "
        f"{flag} (--standalone picks a free one)"
    )


def with_rendezvous_timeout(launch, seconds: float) -> None:
    """`launch`'s rendezvous waits `seconds` (`CLEANRL_DIST_TIMEOUT_S`, as the ranks wait for
    each other) for the other nodes, unless its `--rdzv-conf` says otherwise: torchrun's own
    defaults are 600 s for the static backend's store (`timeout`), and for c10d's 600 s to join
    (`join_timeout`) after 60 s for each read of the store (`read_timeout`), so a node whose
    master never comes waited past 15 minutes whatever the variable said."""
    conf = launch.rdzv_conf or ""
    given = {item.partition("=")[0].strip() for item in conf.split(",") if item.strip()}
    wait = max(1, int(seconds))
    if launch.rdzv_backend == "static":
        wanted = {"timeout": wait}
    else:
        wanted = {"join_timeout": wait, "read_timeout": min(60, wait)}
    added = [f"{key}={value}" for key, value in wanted.items() if key not in given]
    launch.rdzv_conf = ",".join(part for part in [conf, *added] if part)


def never_met(exc: BaseException, launch, seconds: float) -> str | None:
    """The line of torchrun's own failure `exc` when it is the rendezvous that did not meet
    within `seconds` (the master, or the other nodes, never came), naming where it waited; None
    for any other failure."""
    from torch.distributed import DistStoreError
    from torch.distributed.elastic.rendezvous.api import (
        RendezvousConnectionError,
        RendezvousTimeoutError,
    )

    kinds = (DistStoreError, RendezvousTimeoutError, RendezvousConnectionError, TimeoutError)
    causes = (exc, exc.__cause__, exc.__context__)
    if not any(isinstance(e, kinds) or "timed out" in str(e).lower() for e in causes if e):
        return None
    if launch.rdzv_backend != "static":
        where = f"the rendezvous at {launch.rdzv_endpoint}"
    else:
        where = f"the master {launch.master_addr}:{launch.master_port}"
    return (
        f"error: torchrun: {where} did not meet this node's within {seconds:.0f} s "
        "(CLEANRL_DIST_TIMEOUT_S): start every node with the same --master-addr, --master-port "
        "(or --rdzv-endpoint) and --nnodes, or wait longer"
    )


def signals_to_handle() -> str:
    """The signals torchrun forwards to the processes: `SIGNALS`, less SIGHUP when this process
    ignores it (`nohup`: the processes, which inherit that, ignore it too)."""
    if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
        return ",".join(name for name in SIGNALS.split(",") if name != "SIGHUP")
    return SIGNALS


def exit_codes_on_close() -> dict[int, int]:
    """Where torchrun's processes' exit codes land when it stops them after a signal: it keeps
    them only in its process context, which this wraps (left as it is where it has no such
    context: the codes then come from the signal)."""
    codes: dict[int, int] = {}
    try:
        from torch.distributed.elastic.multiprocessing.api import PContext
    except ImportError:
        return codes
    close = PContext.close

    def recording_close(self, *args, **kwargs):
        close(self, *args, **kwargs)
        for local_rank, handler in getattr(self, "subprocess_handlers", {}).items():
            code = handler.proc.poll()
            if code is not None:
                codes[getattr(self, "global_ranks", {}).get(local_rank, local_rank)] = code

    PContext.close = recording_close
    return codes


@entry_point()  # (Ctrl-C before torchrun handles it: one line, 130)
def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("PET_SIGNALS_TO_HANDLE", signals_to_handle())
    os.environ.setdefault("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", str(SHUTDOWN_S))
    output.guard()  # (the standard descriptors exist: `2>&-` is os.devnull)
    wait_s = timeout_s()  # (a bad value: one line, exit code 2, before anything starts)
    output.move_stderr(os.dup(2))  # this process's own lines: the processes get a pipe
    words = LastWords(output.stream("stderr"))
    os.dup2(words.write_fd, 2)  # the processes torchrun starts write into the pipe
    # this process's own C++ logs (a store that cannot reach its master: a C++ stack each try)
    # say nothing its one line does not; torch reads the level once, when it loads
    quiet = "TORCH_CPP_LOG_LEVEL" not in os.environ
    if quiet:
        os.environ["TORCH_CPP_LOG_LEVEL"] = "FATAL"
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    if quiet:
        del os.environ["TORCH_CPP_LOG_LEVEL"]  # (the ranks' own, as they would be)

    host = socket.gethostname()
    closed = exit_codes_on_close()
    line, code, launch = None, 0, None
    try:
        said = io.StringIO()
        try:
            with contextlib.redirect_stderr(said):
                launch = parse_args(argv)
        except SystemExit as exc:  # torchrun's own flags: argparse's usage, said in one line
            code = exc.code if isinstance(exc.code, int) else FAILED  # (0: --help)
            if code:
                reason = (said.getvalue().strip().splitlines() or [""])[-1].partition("error: ")
                line = f"error: torchrun: {reason[2] or 'bad flags'} (see --help)"
        if launch is not None and (problem := launch_problem(launch)):
            line, code = f"error: torchrun: {problem} (see --help)", USAGE_ERROR
        elif launch is not None:
            with_rendezvous_timeout(launch, wait_s)
            run(launch)
    except ChildFailedError as exc:
        codes = {rank: failure.exitcode for rank, failure in exc.failures.items()}
        first = exc.get_first_failure()[0]
        line, code = summary(codes, first, host), run_code(codes, first)
    except (SignalException, KeyboardInterrupt) as exc:
        signum = getattr(exc, "sigval", signal.SIGINT)
        code = stop_code(signum)
        if closed:  # (the ranks' own codes: 130 or 75 when they wrote their checkpoint)
            line, code = summary(closed, None, host), run_code(closed)
        line = f"{line or f'torchrun on {host}'} (stopped by {signal_name(signum)})"
    except Exception as exc:  # the rendezvous, a node that never came: torchrun's own failure
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        line, code = f"error: torchrun on {host}: {type(exc).__name__}: {first_line}", FAILED
        if (taken := port_taken(exc, launch)) is not None:  # (bad input: nothing started)
            line, code = taken, USAGE_ERROR
        elif not closed and (alone := never_met(exc, launch, wait_s)) is not None:
            line, code = alone, USAGE_ERROR
        elif closed:  # (its processes had ended: another node's agent, gone first, took the store)
            said = f"torchrun then failed: {type(exc).__name__}: {first_line}"
            line, code = f"{summary(closed, None, host)} ({said})", run_code(closed)
    finally:
        os.dup2(output.stream("stderr").fd, 2)
    held = words.finish()
    for said in ([line] if line else []) + held:
        output.say(said)
    return code


if __name__ == "__main__":
    sys.exit(main())
