"""The stop signals: how the package catches them, and a script's stops before its run holds them.

- `StopRequest`: the one way the package catches stop signals: a `with` block in which they set
  a flag (or call a handler) instead of raising wherever the program happens to be, and that
  gives back every handler it replaced. The benchmark launcher's pool, `--slurm-wait` and the
  tuner use it for Ctrl-C, SIGTERM and SIGHUP; a training run (`cleanrl_utils.run`) for SIGTERM,
  SIGUSR1, SIGHUP (a closed terminal) and Ctrl-C (`STOP_SIGNALS`).
- `record_stops`: from a script's first import (`cleanrl_utils.entry`) until its `Run` takes the
  handlers over, the stop signals end the process at once (before the run exists) or are
  recorded (`early_stop`) and end it at the run's next safe point.

A training run's own stop signals (finish the iteration, write a checkpoint) are `Run`'s
(`cleanrl_utils.run.stops`); they end with `stop_code(signal)`: `CHECKPOINT_EXIT`, or
`INTERRUPTED` for Ctrl-C (`cleanrl_utils.console.errors`).
"""

from __future__ import annotations

import os
import signal

from cleanrl_utils.console.errors import CHECKPOINT_EXIT, INTERRUPTED
from cleanrl_utils.console.output import say


class StopRequest:
    """Stop signals caught for the length of a `with` block: each sets `requested` (and `signum`,
    the last received), or calls `handler(signum, frame)` when one is given, instead of raising
    wherever the program happens to be, so that nothing is started without being tracked.
    `replace(signum, handler)` changes the handler of one of them inside the block (a second
    Ctrl-C that stops at once). Every handler the block replaced is back when it ends. Only the
    main thread may use it (Python runs signal handlers there).

    Default signals: Ctrl-C (SIGINT), SIGTERM and SIGHUP (a closed terminal)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self, signals: tuple[int, ...] = SIGNALS, handler=None):
        self.signals = tuple(signals)
        self.handler = handler if handler is not None else self._handle
        self.requested = False
        self.signum: int | None = None
        self.previous: dict = {}

    def __enter__(self) -> StopRequest:
        self.requested, self.signum = False, None
        for signum in self.signals:
            self.replace(signum, self.handler)
        return self

    def replace(self, signum: int, handler) -> None:
        """`handler` for `signum` until the block ends; the handler from before the block is the
        one given back."""
        previous = signal.signal(signum, handler)
        self.previous.setdefault(signum, previous)

    def __exit__(self, *exc) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        self.previous = {}

    def _handle(self, signum, frame) -> None:
        self.requested, self.signum = True, signum


# SIGTERM (SLURM's preemption), SIGUSR1 (SLURM's warning before the time limit), SIGHUP (a closed
# terminal or ssh session; `nohup` ignores it, and an ignored signal stays ignored), Ctrl-C
STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGHUP, signal.SIGINT)
_early_stops: list[int] = []  # what `record_stops` received while a run held them, in order
# "importing": a stop ends the process at once; "run": a run holds them (`hold_stops`), they are
# recorded; "ended": a run has ended (`release_stops`), a stop leaves its exit code alone
_phase = "importing"


def signal_name(signum: int) -> str:
    return "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name


def stop_code(signum: int) -> int:
    """The exit code of a run stopped by `signum`: `INTERRUPTED` for Ctrl-C, else
    `CHECKPOINT_EXIT` (resumable: the SLURM templates requeue it)."""
    return INTERRUPTED if signum == signal.SIGINT else CHECKPOINT_EXIT


def record_stops() -> None:
    """The stop signals from now on: while a script imports torch, EnvPool and JAX (nothing is
    written yet), each ends the process at once from the handler, with one line and exit code 75
    (SIGTERM, SIGUSR1, SIGHUP: requeued by the SLURM templates, where SIGTERM's default would end
    it with 143) or 130: a KeyboardInterrupt raised where it lands could be swallowed
    (JAX's gc callback: "Exception ignored in"), and the run would train on. Once a run holds
    them (`hold_stops`) they are recorded, and the run stops at its next safe point
    (`early_stop`); a second Ctrl-C stops at once. A signal ignored (SIG_IGN) stays ignored."""
    for signum in STOP_SIGNALS:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, _record_stop)


def hold_stops() -> None:
    """A run has begun: the stops `record_stops` receives are recorded, no longer acted on (none
    is left from a run before it)."""
    global _phase
    _phase = "run"
    _early_stops.clear()


def release_stops() -> None:
    """The run has ended: what it recorded is forgotten (a next run in the process starts with
    none), and a stop from now on leaves the exit code the run's (torchrun's SIGTERM to a rank
    that is exiting)."""
    global _phase
    _phase = "ended"
    _early_stops.clear()


def stops_phase() -> str:
    """`importing`, `run` or `ended` (see `hold_stops`, `release_stops`)."""
    return _phase


def _record_stop(signum, frame) -> None:
    if _phase == "ended":
        return
    if _phase == "importing":
        code = stop_code(signum)
        line = f"received {signal_name(signum)} before training began: stopping; nothing was "
        say(f"{line}written (exit code {code})")
        os._exit(code)
    if signum == signal.SIGINT and signal.SIGINT in _early_stops:  # the process ends by it
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        say("received Ctrl-C again: stopping now")
        os.kill(os.getpid(), signal.SIGINT)
    _early_stops.append(signum)


def early_stop() -> int | None:
    """The first stop signal `record_stops` received while a run held them, or None."""
    return _early_stops[0] if _early_stops else None
