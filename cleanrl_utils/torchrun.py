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
- forwards SIGUSR1 to the processes too (SLURM's warning before the time limit), and waits up
  to `SHUTDOWN_S` for them to write their checkpoint after a stop signal (torchrun's
  `--signals-to-handle` and `--shutdown-timeout`, or their variables, still override).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import socket
import sys
import threading

from cleanrl_utils.exits import CHECKPOINT_EXIT, FAILED, INTERRUPTED, stops_on_ctrl_c

SIGNALS = "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1"
SHUTDOWN_S = 120  # for the ranks to finish their iteration and checkpoint (SLURM: USR1@120)
# the lines of the ranks held back and printed last: their errors and the way to go on
LAST_WORDS = re.compile(rb"^(error: |.*\(continue with: )")
DRAIN_S = 5.0  # how long the ranks' output is read after torchrun returns (orphans may hold it)


class LastWords:
    """The ranks' stderr through a pipe: forwarded line by line as it comes (a progress bar's
    redraws at once), but for the lines `LAST_WORDS` matches, kept (each once) to be printed at
    the end."""

    def __init__(self, out_fd: int):
        self.out_fd = out_fd
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
                os.write(self.out_fd, line)
                line = b""
        if line:
            self._line(line + b"\n")
        os.close(self.read_fd)

    def _line(self, line: bytes) -> None:
        if LAST_WORDS.match(line):
            if line not in self.held:
                self.held.append(line)
        else:
            os.write(self.out_fd, line)

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


@stops_on_ctrl_c  # (Ctrl-C before torchrun handles it: one line, 130)
def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("PET_SIGNALS_TO_HANDLE", SIGNALS)
    os.environ.setdefault("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", str(SHUTDOWN_S))
    terminal = os.dup(2)
    sys.stderr = open(terminal, "w", buffering=1, closefd=False)  # noqa: SIM115  (this process's)
    words = LastWords(terminal)
    os.dup2(words.write_fd, 2)  # the processes torchrun starts write into the pipe
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    host = socket.gethostname()
    closed = exit_codes_on_close()
    line, code = None, 0
    try:
        said = io.StringIO()
        try:
            with contextlib.redirect_stderr(said):
                launch = parse_args(argv)
        except SystemExit as exc:  # torchrun's own flags: argparse's usage, said in one line
            if exc.code not in (0, None):
                reason = (said.getvalue().strip().splitlines() or [""])[-1].partition("error: ")
                line = f"error: torchrun: {reason[2] or 'bad flags'} (see --help)"
            raise
        run(launch)
    except ChildFailedError as exc:
        codes = {rank: failure.exitcode for rank, failure in exc.failures.items()}
        first = exc.get_first_failure()[0]
        line, code = summary(codes, first, host), run_code(codes, first)
    except (SignalException, KeyboardInterrupt) as exc:
        signum = getattr(exc, "sigval", signal.SIGINT)
        code = INTERRUPTED if signum == signal.SIGINT else CHECKPOINT_EXIT
        if closed:  # (the ranks' own codes: 130 or 75 when they wrote their checkpoint)
            line, code = summary(closed, None, host), run_code(closed)
        stopped = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        line = f"{line or f'torchrun on {host}'} (stopped by {stopped})"
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else FAILED
    except Exception as exc:  # the rendezvous, a node that never came: torchrun's own failure
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        line, code = f"error: torchrun on {host}: {type(exc).__name__}: {first_line}", FAILED
        if closed:  # (its processes had ended: another node's agent, gone first, took the store)
            said = f"torchrun then failed: {type(exc).__name__}: {first_line}"
            line, code = f"{summary(closed, None, host)} ({said})", run_code(closed)
    finally:
        os.dup2(terminal, 2)
    held = words.finish()
    for said in ([line] if line else []) + held:
        print(said, file=sys.stderr, flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
