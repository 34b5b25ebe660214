"""A training run stopped outside its iterations, where finishing the iteration and writing a
checkpoint (`Run`'s own stop) does not apply:

- **before training** (`stop_before_training`): a stop signal received since the script's first
  import (`cleanrl_utils.exits.record_stops`) or by the run's handlers ends the process at the
  run's next safe point (`Run.__init__`, `start`, `restore`), with one line and exit code 75
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

from cleanrl_utils.exits import CHECKPOINT_EXIT, INTERRUPTED, early_stop, signal_name
from cleanrl_utils.runs import mark_stopped


def stop_before_training(run) -> None:
    """Ends the process (`SystemExit`) with one line when a stop came (to `run`'s handlers, or
    recorded since the run began: `early_stop`) and `run` is not training yet; else nothing."""
    signum = run.stop_signal or early_stop()
    if signum is None or run.training:
        return
    run.stop_signal, run.stop_requested = signum, True
    if run.payload is not None:
        then = f"nothing is lost: continue with: {run.resume_command()}"
    else:
        then = "nothing was trained yet"
    print(
        f"received {signal_name(signum)} before training began: stopping; {then} (exit code "
        f"{run.exit_code()})",
        file=sys.stderr,
        flush=True,
    )
    if run.lock_fd is not None and run.payload is None:  # (its folder is made: the report)
        mark_stopped(run.dir / "config.json", signal_name(signum), 0)
    raise SystemExit(run.finish())


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
