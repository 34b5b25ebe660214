"""A training run's stop signals (SIGTERM, SIGUSR1, Ctrl-C), from the handler to the process's end.

- **in training** (`on_stop_signal`): the run finishes its iteration, writes a checkpoint and
  stops (`Run.end_iteration`); a second Ctrl-C stops at once, saying what is lost
  (`on_second_ctrl_c`).

- **before training** (`stop_before_training`): a stop signal received since the script's first
  import (`cleanrl_utils.exits.record_stops`) or by the run's handlers ends the run at its next
  safe point (`Run.__init__`, `start`, `restore`) with a `RunError`: one line and exit code 75
  (SIGTERM, SIGUSR1: the SLURM templates requeue the task, which starts again or resumes) or 130
  (Ctrl-C). This process trained nothing yet: nothing is lost.
- **after training** (`stop_after_training`): during the model file, the evaluation and the
  upload, the training's last checkpoint is on disk and a resumed run does these steps again
  (`cleanrl_utils.resume.after_training_due`), so the process ends at once, from the signal
  handler itself: an exception raised there could land in a library's callback that swallows it
  (JAX's gc callback), and the run would go on.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys

from cleanrl_utils.exits import CHECKPOINT_EXIT, INTERRUPTED, RunError, early_stop, signal_name
from cleanrl_utils.runs import mark_stopped


def stop_before_training(run) -> None:
    """Finishes `run` and raises a `RunError` (its line; exit code 75 or 130) when a stop came
    (to `run`'s handlers, or recorded since the run began: `early_stop`) and `run` is not
    training yet; else nothing."""
    signum = run.stop_signal or early_stop()
    if signum is None or run.training:
        return
    run.stop_signal, run.stop_requested = signum, True
    if run.payload is not None:
        then = f"nothing is lost: continue with: {run.resume_command()}"
    else:
        then = "nothing was trained yet"
    line = (
        f"received {signal_name(signum)} before training began: stopping; {then} (exit code "
        f"{run.exit_code()})"
    )
    if run.lock_fd is not None and run.payload is None:  # (its folder is made: the report)
        mark_stopped(run.dir / "config.json", signal_name(signum), 0)
    raise RunError(f"stopped by {signal_name(signum)}", run.finish(), line)


def stop_after_training(run, signum: int) -> None:
    """Ends the process at once (`os._exit`), after one line saying how the run goes on, its
    config.json recording the stop."""
    code = INTERRUPTED if signum == signal.SIGINT else CHECKPOINT_EXIT
    if run.rank == 0:
        mark_stopped(run.dir / "config.json", signal_name(signum), run.global_step)
    line = (
        f"received {signal_name(signum)} during the steps after training: stopping now (exit "
        f"code {code}); the training is checkpointed, and resuming the run does these steps "
        f"(model file, evaluation, upload): {run.resume_command()}\n"
    )
    with contextlib.suppress(Exception):  # (a write under way in this thread)
        sys.stdout.flush()
    os.write(2, line.encode())
    os._exit(code)


def on_stop_signal(run, signum: int) -> None:
    """SIGTERM, SIGUSR1, Ctrl-C, never raised where they land (JAX's gc callback would swallow
    it): in training, finish the iteration, write a checkpoint, stop; before it, stop at the
    next safe point; after it, at once. A second Ctrl-C stops at once. Processes forked from
    this one (gymnasium's `--async-envs` workers) ignore them: the group gets the signal, and
    this process stops them."""
    if os.getpid() != run.pid:
        return
    if run.after_training:
        stop_after_training(run, signum)
    if signum == signal.SIGINT:
        run.process.stops.replace(signal.SIGINT, run._on_second_ctrl_c)
    if run.stop_signal is None and run.training:
        wait = f" (about {run.iteration_s:.0f} s)" if run.iteration_s else ""
        again = "; Ctrl-C again stops at once" if signum == signal.SIGINT else ""
        run.say(
            f"received {signal_name(signum)}: finishing this iteration{wait}, then writing a "
            f"checkpoint and stopping{again}"
        )
    run.stop_signal = signum


def on_second_ctrl_c(run) -> None:
    """Stops at once, without a checkpoint, after saying what is lost; the process ends by the
    signal itself, as it would without a handler."""
    if os.getpid() != run.pid:
        return
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if run.progress is not None:
        run.progress.close()
    if run.checkpointed is None:
        lost = (
            f"the {run.global_step:,} steps trained so far and the iteration under way are "
            "lost: no checkpoint was written yet, so the run cannot be resumed"
        )
    else:
        iteration, step = run.checkpointed
        lost = (
            f"the {run.global_step - step:,} steps trained since the checkpoint of iteration "
            f"{iteration} and the iteration under way are lost (continue from that "
            f"checkpoint with: {run.resume_command()})"
        )
    print(f"received Ctrl-C again: stopping now, without a checkpoint; {lost}", file=sys.stderr)
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGINT)
