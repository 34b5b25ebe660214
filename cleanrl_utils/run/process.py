"""What a run changes in its process while it lives, and gives back when it ends: the handlers of
its stop signals (SIGTERM, SIGUSR1, SIGHUP, Ctrl-C: `signals.StopRequest`; one the process ignores,
SIGHUP under `nohup`, stays ignored), `sys.stdout` on the ranks of a multi-process run other than
0 (their informational lines would repeat rank 0's: they go to os.devnull), `sys.excepthook`
(which a library started by the run may replace: W&B), and the claim a run of a sweep holds on
its env id and seed (`cleanrl_utils.run.resume.claim_sweep_run`).

The stops a run recorded before its handlers caught them (`signals.hold_stops`) are forgotten when
it ends (`signals.release_stops`): a next run in the process starts with none. A script run as a
program gets back the handlers its first import installed (`signals.record_stops`), which from then
on ignore a stop: a signal that comes while the process exits (torchrun's SIGTERM to the ranks
left, once one has ended) leaves its exit code its own. A notebook or a test gets back its own."""

from __future__ import annotations

import os
import signal
import sys

from cleanrl_utils.console.signals import STOP_SIGNALS, StopRequest, hold_stops, release_stops


class ProcessState:
    """`catch_stops(handler)`: `handler` for the stop signals not ignored; `silence_stdout()`: stdout to
    os.devnull; `give_back()` puts back all they changed and `sys.excepthook` (a second time:
    nothing)."""

    def __init__(self):
        hold_stops()  # (a stop since the script's first import ends the run at its next safe point)
        self.stops: StopRequest | None = None
        self.stdout = self.devnull = None
        self.excepthook = sys.excepthook
        self.claim: int | None = None  # (a descriptor with its `flock`)

    def hold_claim(self, fd: int | None) -> None:
        self.claim = fd

    def silence_stdout(self) -> None:
        if self.devnull is None:
            self.stdout = sys.stdout
            self.devnull = sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (until give_back)

    def catch_stops(self, handler) -> StopRequest:
        if self.stops is None:
            caught = [s for s in STOP_SIGNALS if signal.getsignal(s) is not signal.SIG_IGN]
            self.stops = StopRequest(tuple(caught), handler).__enter__()
        return self.stops

    def give_back(self) -> None:
        release_stops()
        if self.stops is not None:
            self.stops.__exit__(None, None, None)
            self.stops = None
        if self.devnull is not None:
            if sys.stdout is self.devnull:
                sys.stdout = self.stdout
            self.devnull.close()
            self.stdout = self.devnull = None
        sys.excepthook = self.excepthook
        if self.claim is not None:
            os.close(self.claim)
            self.claim = None
