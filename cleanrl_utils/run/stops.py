"""A training run's stop signals (SIGTERM, SIGUSR1, SIGHUP, Ctrl-C), from the handler to the
process's end.

The first stop decides how the run ends: its exit code (75, or 130 for Ctrl-C) and what its
config.json records; a later one (Ctrl-C 50 ms after SLURM's SIGTERM) is said, and changes
nothing but arming a second Ctrl-C. No stop depends on its output being readable: every line is
said through `cleanrl_utils.console.output`, so a terminal gone with its ssh session or a `| tee` ended
by the same Ctrl-C drops the line, and the stop goes on to its checkpoint and its exit code.

- **in training** (`on_stop_signal`): the run finishes its iteration, writes a checkpoint and
  stops (`Run.end_iteration`, then `stopped_with_checkpoint`); a stop that comes while a
  checkpoint is written makes that checkpoint the stop's (after the last iteration too: the steps
  after training are left to the resume). A second Ctrl-C stops at once, saying what is lost
  (`on_second_ctrl_c`).
- **before training** (`stop_before_training`): a stop signal received since the script's first
  import (`cleanrl_utils.console.signals.record_stops`) or by the run's handlers ends the run at its next
  safe point (`Run.__init__`, `start`, `restore`) with a `RunError`: one line and exit code 75
  (SIGTERM, SIGUSR1, SIGHUP: the SLURM templates requeue the task, which starts again or resumes)
  or 130 (Ctrl-C). This process trained nothing yet: nothing is lost.
- **after training** (`stop_after_training`): during the model file, the evaluation and the
  upload, the training's last checkpoint is on disk and a resumed run does these steps again
  (`cleanrl_utils.run.resume.after_training_due`), so the process ends at once, from the signal
  handler itself: an exception raised there could land in a library's callback that swallows it
  (JAX's gc callback), and the run would go on.
"""

from __future__ import annotations

import enum
import os
import signal

from cleanrl_utils.console import output
from cleanrl_utils.console.errors import RunError
from cleanrl_utils.console.signals import early_stop, signal_name, stop_code
from cleanrl_utils.files.config import mark_output_lost, mark_stopped


class Phase(enum.Enum):
    """Where a run is in its life, which decides what a stop signal does."""

    STARTING = "starting"  # from `Run(...)` to its first iteration: a stop ends it at a safe point
    TRAINING = "training"  # the iterations: finish this one, checkpoint, stop
    AFTER_TRAINING = "after training"  # model file, evaluation, upload: a stop ends it at once
    STOPPING = "stopping"  # its stop's checkpoint is written: the run is on its way out
    FINISHED = "finished"  # closed (or a failed write closed it): nothing more to close


class StopState:
    """A run's stop: the first stop signal (`signal`, which decides the exit code), whether the
    run stops (`requested`: after its checkpoint, or before training), and its `phase`. Only its
    own methods change it."""

    def __init__(self):
        self.signal: int | None = None
        self.requested = False
        self.phase = Phase.STARTING

    def receive(self, signum: int) -> int | None:
        """A stop signal came; the first one received is kept. Returns the one before, if any."""
        first = self.signal
        if first is None:
            self.signal = signum
        return first

    def agree(self, signum: int | None) -> None:
        """The stop the ranks agreed on (`Distributed.agreed_stop`, given this rank's `signal`):
        when there is one, it is this rank's too and the run stops after this iteration. When
        there is none, a signal that came here while the ranks agreed (after this rank's part was
        sent: a rank waits there for the slowest) is kept for the next agreement, not dropped."""
        if signum is not None:
            self.signal = signum
        self.requested = signum is not None

    def request(self) -> None:
        """The run stops now (a signal was received): after this iteration's checkpoint, or
        before training begins."""
        self.requested = self.signal is not None

    def enter(self, phase: Phase) -> None:
        self.phase = phase


def record_stop(run, stopped_by: str, global_step: int) -> None:
    """`run`'s config.json records the stop (the report then calls the run stopped, not still
    running) and the output lost on the way, if any."""
    config = run.dir / "config.json"
    mark_stopped(config, stopped_by, global_step)
    mark_output_lost(config, output.lost())


def stop_before_training(run) -> None:
    """Finishes `run` and raises a `RunError` (its line; exit code 75 or 130) when a stop came
    (recorded since the run began, `early_stop`, or to `run`'s handlers; the first decides) and
    `run` is not training yet; else nothing."""
    signum = early_stop() or run.stop.signal
    if signum is None or run.stop.phase is Phase.TRAINING:
        return
    run.stop.receive(signum)
    run.stop.request()
    if run.payload is not None:
        then = f"nothing is lost: continue with: {run.resume_command()}"
    else:
        then = "nothing was trained yet"
    line = (
        f"received {signal_name(signum)} before training began: stopping; {then} (exit code "
        f"{run.exit_code()})"
    )
    if run.lock_fd is not None and run.payload is None:  # (its folder is made: the report)
        record_stop(run, signal_name(signum), 0)
    raise RunError(f"stopped by {signal_name(signum)}", run.finish(), line)


def stopped_with_checkpoint(run, iteration: int, path) -> None:
    """The stop's checkpoint (of `iteration`, at `path`) is written: config.json records the
    stop, and one line says how the run goes on (on rank 0, which wrote it)."""
    name = signal_name(run.stop.signal)
    record_stop(run, name, run.global_step)
    run.say(
        f"{name}: checkpoint of iteration {iteration} written to {path}; exiting with code "
        f"{run.exit_code()} (continue with: {run.resume_command()})"
    )


def stop_after_training(run, signum: int) -> None:
    """Ends the process at once (`os._exit`), after one line saying how the run goes on, its
    config.json recording the stop."""
    code = stop_code(signum)
    if run.rank == 0:
        record_stop(run, signal_name(signum), run.global_step)
    output.stream("stdout").flush()  # (os._exit flushes nothing)
    output.say(
        f"received {signal_name(signum)} during the steps after training: stopping now (exit "
        f"code {code}); the training is checkpointed, and resuming the run does these steps "
        f"(model file, evaluation, upload): {run.resume_command()}"
    )
    os._exit(code)


def on_stop_signal(run, signum: int) -> None:
    """The stop signals, never raised where they land (JAX's gc callback would swallow it): in
    training, finish the iteration, write a checkpoint, stop; before it, stop at the next safe
    point; after it, at once. The first decides the exit code; a Ctrl-C, first or not, arms the
    second that stops at once. Processes forked from this one (gymnasium's `--async-envs`
    workers) ignore them: the group gets the signal, and this process stops them."""
    if os.getpid() != run.pid:
        return
    if run.stop.phase is Phase.AFTER_TRAINING:
        stop_after_training(run, signum)
    if signum == signal.SIGINT:
        run.process.stops.replace(signal.SIGINT, run.on_second_ctrl_c)
    again = "; Ctrl-C again stops at once" if signum == signal.SIGINT else ""
    first = run.stop.receive(signum)
    if run.stop.phase is not Phase.TRAINING:
        return
    if first is None:
        wait = f" (about {run.iteration_s:.0f} s)" if run.iteration_s else ""
        run.say(
            f"received {signal_name(signum)}: finishing this iteration{wait}, then writing a "
            f"checkpoint and stopping{again}"
        )
    elif signum == first:
        run.say(f"received {signal_name(signum)} again: already stopping{again}")
    else:
        run.say(
            f"received {signal_name(signum)}: already stopping on {signal_name(first)}, which "
            f"came first (exit code {stop_code(first)}){again}"
        )


def on_second_ctrl_c(run) -> None:
    """Stops at once, without a checkpoint, after saying what is lost; the process ends by the
    signal itself, as it would without a handler."""
    if os.getpid() != run.pid:
        return
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if run.progress is not None:
        run.progress.close()
    if run.checkpoints.newest is None:
        lost = (
            f"the {run.global_step:,} steps trained so far and the iteration under way are "
            "lost: no checkpoint was written yet, so the run cannot be resumed"
        )
    else:
        iteration, step = run.checkpoints.newest
        lost = (
            f"the {run.global_step - step:,} steps trained since the checkpoint of iteration "
            f"{iteration} and the iteration under way are lost (continue from that "
            f"checkpoint with: {run.resume_command()})"
        )
    output.say(f"received Ctrl-C again: stopping now, without a checkpoint; {lost}")
    os.kill(os.getpid(), signal.SIGINT)
