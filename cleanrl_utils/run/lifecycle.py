"""The life of one training run, from its arguments to its exit code.

Every script in `cleanrl/` makes these calls, in this order:

    # the script's entry point: a RunError in the block is its one line and its exit code
    with entry_point(), Run(parse_args(Args), __file__) as run:  # --resume: found
        args = run.args               # the arguments as reconciled (the caller's are not changed)
        ...                           # the sizes derived from them
        writer = run.start()          # runs/{run.name}/: config.json, TensorBoard, W&B, signals
        envs = make_env(..., run.games_seed)
        state = {"agent": agent, ...} # what a checkpoint keeps, one dict for the whole run
        run.restore(state)            # a resumed run: the state as checkpointed, RNGs included
        for iteration in range(run.start_iteration, args.num_iterations + 1):
            ...
            run.lap("rollout")        # time/rollout: the seconds since the previous lap
            ...
            state.update(...)         # (JAX) the values that training replaced, not changed
            run.end_iteration(iteration, global_step, avg_returns, state)  # checkpoint if due
            if run.stop_requested:    # a stop signal came: this iteration's checkpoint is written
                break
        save_and_evaluate(run, ...)   # the steps after training (`cleanrl_utils.after_training`)
    sys.exit(run.exit_code())         # (the script, not Run: 0, 75 after a stop signal, 130 Ctrl-C)

`state` is a dict of what a checkpoint keeps (torch modules and optimizers, deques, JAX pytrees:
see `cleanrl_utils.files.state_file`), built once. `restore` restores it in place: objects are loaded
in place, other values (a JAX `TrainState`, a PRNG key) replaced in the dict, where the script
reads them back; a script whose values are replaced as it trains (JAX's) puts them back with
`state.update(...)` before `end_iteration`, which checks them to be finite at every iteration's
end. Leaving the `with` block (or `finish()`) closes TensorBoard and W&B
and gives back what the run changed in the process (`cleanrl_utils.run.process`: the signal
handlers, `sys.stdout` on ranks other than 0, `sys.excepthook`), so a notebook or a test goes on as
before the run. What the run cannot do (bad input, a checkpoint it cannot use, a stop before
training) is a `RunError` that the script's entry point says in one line and exits with.

The parts, one job each, in this package: `resume` (the checkpoint and the arguments reconciled
with it), `stops` (the stop signals: a checkpoint and 75, or 130 after Ctrl-C), `checkpoints`
(writing them, a rewind, a failing disk), `records` (config.json, TensorBoard, W&B), `folder_guard`
(the folder's lock, a failing disk), `process` (what the run borrows from the process),
`diverged` (a state no longer finite); and `cleanrl_utils.console.progress`. What it says goes through
`output`: a stdout or stderr that is gone loses the line, never the run.
"""

from __future__ import annotations

import copy
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np

import cleanrl_utils.run.checkpoints as checkpoints  # (the parts by module: not the package,
import cleanrl_utils.run.diverged as diverged  # whose `__init__` imports this one)
import cleanrl_utils.run.records as records
import cleanrl_utils.run.stops as stops
from cleanrl_utils.checks.args import steps_note
from cleanrl_utils.checks.hub import upload_problem
from cleanrl_utils.console import output
from cleanrl_utils.console.errors import CHECKPOINT_EXIT, DISK_EXIT, FAILED, INTERRUPTED, RunError
from cleanrl_utils.console.extras import missing_flag_extra
from cleanrl_utils.console.progress import Progress
from cleanrl_utils.console.signals import STOP_SIGNALS, stop_code
from cleanrl_utils.envs import protocols
from cleanrl_utils.envs.video import run_videos_problem
from cleanrl_utils.files.config import mark_finished, mark_output_lost
from cleanrl_utils.files.machine import device_of
from cleanrl_utils.files.run_names import RunName, name_problem
from cleanrl_utils.files.state_file import restored_value, rng_problem, set_rng_state, state_problem
from cleanrl_utils.files.sweeps import launcher_gone, launcher_run_sweep
from cleanrl_utils.run.checkpoints import KEEP
from cleanrl_utils.run.folder_guard import NoWriter, lock_run_folder, release_run_folder, run_writer
from cleanrl_utils.run.process import ProcessState
from cleanrl_utils.run.resume import claim_sweep_run, games_seed, given_flags, resume_run
from cleanrl_utils.run.stops import Phase

__all__ = ["KEEP", "STOP_SIGNALS", "Run", "RunError"]


class Run:
    """One training run: its folder, logs, checkpoints, progress and stop signals."""

    def __init__(self, args, script_file: str, runs_dir="runs", argv=None, dist=None):
        """Resolves `--resume` (the arguments neither given on the command line `argv`, default
        `sys.argv[1:]`, nor set in code take the checkpoint's values: `self.args`, a new object;
        `args` is not changed). Creates nothing on disk. Raises a `RunError` when the run cannot
        start, or has already finished (code 0). `dist`: a run on many processes
        (`cleanrl_utils.distributed.torch_ranks.Distributed`, or the class, built here from `args` first):
        rank 0 alone writes and prints, the ranks agree on when to stop, and a checkpoint holds
        every rank's RNGs."""
        self.dist = dist = dist(args) if isinstance(dist, type) else dist
        self.rank = dist.rank if dist is not None else 0
        self.world_size = dist.world_size if dist is not None else 1
        self.script_file, self.script = script_file, Path(script_file).stem
        self.runs_dir = Path(runs_dir)
        self.process = ProcessState()  # what the run changes in the process, given back at the end
        self.pid = os.getpid()
        self.stop = stops.StopState()  # the first stop signal, whether the run stops, its phase
        self.payload = self.lock_fd = self.writer = self.progress = None
        self.state = None  # what a checkpoint keeps, as `restore` and `end_iteration` last had it
        if self.rank != 0:  # (their informational lines would repeat rank 0's)
            self.process.silence_stdout()
        try:
            self._resolve(args, sys.argv[1:] if argv is None else argv)
        except BaseException:
            self.process.give_back()
            raise
        self.iteration_s, self.laps = 0.0, {}  # the last iteration's seconds; this one's laps
        self.iteration = self.start_iteration - 1  # the last iteration ended
        self.start_time = self._lap_start = time.time()

    def _resolve(self, args, argv: list[str]) -> None:
        if problem := name_problem(args.exp_name, args.env_id):  # (before `--resume auto` looks)
            raise RunError(problem)
        resumed, given = None, given_flags(args, argv)
        sweep = launcher_run_sweep()
        if sweep is not None and args.resume in (None, "auto") and self.rank == 0:
            self.process.hold_claim(claim_sweep_run(args, self.runs_dir, sweep))
        if args.resume is not None or sweep is not None:  # (a sweep's run goes on)
            resumed = resume_run(args, self.script, self.runs_dir, given, self.world_size)
        if resumed is None:
            self.args = copy.copy(args)
            self.name = str(RunName.new(args.env_id, args.exp_name, args.seed, self.runs_dir))
            self.dir = self.runs_dir / self.name
        else:
            self.args, self.payload = resumed.args, resumed.payload
            self.dir, self.name, self.runs_dir = resumed.dir, resumed.name, resumed.dir.parent
        # --protocol machado: its five settings (checked against the args as reconciled)
        self.args = protocols.resolved(self.args, given)
        self.protocol = protocols.settings(self.args)  # what the script's make_env takes
        done = self.payload["iteration"] if self.payload else 0
        self.start_iteration = done + 1
        self.global_step = self.payload["global_step"] if self.payload else 0
        # how many are kept, and the newest: what a second Ctrl-C falls back to
        self.checkpoints = checkpoints.Checkpoints(
            (done, self.global_step) if self.payload else None
        )
        self.games_seed = games_seed(self.args.seed, self.start_iteration)
        if problem := missing_flag_extra(self.args) or upload_problem(self.args):  # before work
            raise RunError(problem)
        if problem := run_videos_problem(self.args, self.name):  # (`videos` a file)
            raise RunError(problem, DISK_EXIT)
        stops.stop_before_training(self)

    # -- starting ---------------------------------------------------------------------------

    def start(self):
        """Creates runs/{name}/ with config.json (the arguments, command line and code version;
        a resumption is appended), starts W&B with `--track` (a resumed run continues its W&B
        run), installs the stop-signal handlers and returns the TensorBoard writer. A resumed
        run's writer discards what the stopped process logged after its checkpoint. The folder
        is locked first (one process per run folder, `cleanrl_utils.run.folder_guard`); a resumed run
        writes into it only once `restore` has checked the checkpoint."""
        args = self.args
        stops.stop_before_training(self)
        if self.rank != 0:  # rank 0 alone writes
            self.process.catch_stops(self.on_stop_signal)
            self.writer = NoWriter()
            return self.writer
        self.lock_fd = lock_run_folder(self.dir)  # one process per run folder
        self._record = records.config_record(args, self.name, self.dir, self.payload is not None)
        records.start_wandb(args, self.name, self._record)  # with --track
        purge_step = self.global_step + 1 if self.payload is not None else None
        # a resume writes nothing into the folder before `restore` has checked the checkpoint
        self.writer = run_writer(self.dir, purge_step, opened=False)
        if self.payload is None:
            self._open()
        self.process.catch_stops(self.on_stop_signal)
        if note := steps_note(args.total_timesteps, args.num_envs, args.num_steps):
            output.say(f"note: {note}", stdout=True)  # (the iterations are whole batches)
        output.say(
            f"logging to {self.dir}/ (see it with: tensorboard --logdir {self.runs_dir})",
            stdout=True,
        )
        return self.writer

    def _open(self) -> None:
        try:
            if self.payload is not None:  # from an older checkpoint than the newest: a rewind
                checkpoints.rewind(self, self._record)
            records.open_folder(
                self.dir, self.writer, self._record, self.args, self.payload is None
            )
        except OSError as exc:
            checkpoints.disk_failed(self, "config.json and the TensorBoard event file", exc)

    def _write_record(self) -> None:
        try:
            records.write_record(self.dir, self._record)
        except OSError as exc:
            checkpoints.disk_failed(self, "config.json", exc)

    def restore(self, state: dict) -> None:
        """A resumed run: every entry of `state` as checkpointed, in place (objects loaded in
        place, other values, such as JAX pytrees, replaced in the dict), the global RNGs as they
        were, and the step counter and training time where they stopped; each is checked against
        `state` (names, shapes, dtypes) before anything changes, in memory or in the run folder
        (a `RunError` when it does not fit). A new run: nothing changes."""
        stops.stop_before_training(self)
        self.start_time = time.time()
        self.state = state
        if self.rank == 0:  # config.json: the device the script put the agent on
            records.record_device(self._record, device_of(state), self.payload is not None)
            if self.payload is None:  # (a resumed run's is written below, once checked)
                self._write_record()
        if self.payload is not None:
            saved = self.payload["state"]
            rngs = self.payload.get("ranks_rng", [self.payload["rng"]])
            rng = rngs[self.rank] if isinstance(rngs, list) and self.rank < len(rngs) else None
            if problem := state_problem(state, saved) or rng_problem(rng):
                raise RunError(f"--resume: {problem} ({self.script}.py cannot use it)")
            if self.rank == 0:
                self._open()
            for name, value in state.items():
                state[name] = restored_value(value, saved[name])
            set_rng_state(rng)
            # (checkpoints written before the run lifecycle moved here keep it in the state)
            self.start_time -= self.payload.get("elapsed", saved.get("elapsed", 0.0))
        if self.start_iteration > self.args.num_iterations:  # trained: the steps after it left
            self.stop.enter(Phase.AFTER_TRAINING)
            return
        total_steps = self.args.num_iterations * self.args.batch_size
        stream = None if self.rank == 0 else open(os.devnull, "w")  # noqa: SIM115
        self.progress = Progress(total_steps, start_step=self.global_step, stream=stream)
        self.stop.enter(Phase.TRAINING)
        self._lap_start = time.time()

    # -- each iteration ---------------------------------------------------------------------

    def lap(self, phase: str, *outputs) -> None:
        """Records the seconds since the previous lap (or since the previous iteration ended) as
        `time/{phase}`, once `outputs` are computed (JAX and CUDA compute asynchronously)."""
        if outputs and "jax" in sys.modules:
            sys.modules["jax"].block_until_ready(outputs)
        if "torch" in sys.modules and sys.modules["torch"].cuda.is_initialized():
            sys.modules["torch"].cuda.synchronize()
        now = time.time()
        self.laps[phase] = now - self._lap_start
        self._lap_start = now

    @property
    def laps_s(self) -> float:
        """The seconds this iteration's laps have timed so far (after the last lap: its rollout,
        advantages and update, without the logging around them)."""
        return sum(self.laps.values())

    def end_iteration(self, iteration: int, global_step: int, avg_returns, state: dict) -> None:
        """Logs the laps, shows the progress (steps, steps per second, the mean of `avg_returns`),
        checks the values of `state` (the dict given to `restore`, kept current) to be finite and
        writes a checkpoint of it when one is due:
        every `--checkpoint-every` iterations, after the last, and after a stop signal, which
        also sets `stop_requested`. A stop signal that comes while a checkpoint is written makes
        that checkpoint the stop's (on one process, or after the last iteration: the ranks of a
        run on many stop together, after the next agreement)."""
        if not isinstance(state, dict):  # (a function, the older form, or one of its values)
            raise TypeError(
                f"end_iteration takes the dict given to restore, not a {type(state).__name__}: "
                "values replaced as the run trains go back into it with state.update(...)"
            )
        for phase, seconds in self.laps.items():
            self.writer.add_scalar(f"time/{phase}", seconds, global_step)
        self._check_finite(iteration, state)
        self.iteration = iteration
        self.iteration_s = time.time() - self._lap_start + self.laps_s
        if self.stop.signal is None and (launcher := launcher_gone()) is not None:
            self.say(
                f"the launcher that started this run (pid {launcher}) is gone: writing a "
                "checkpoint and stopping, as on SIGTERM (its command, run again, continues it)"
            )
            self.stop.receive(signal.SIGTERM)  # (what its pool would have sent)
        if self.dist is not None:  # every rank stops after the same iteration
            self.stop.agree(self.dist.agreed_stop(self.stop.signal))
        else:
            self.stop.request()
        last = iteration == self.args.num_iterations
        every = self.args.checkpoint_every
        self.global_step = global_step
        sps = global_step / (time.time() - self.start_time)
        self.progress.update(global_step, sps, np.mean(avg_returns) if avg_returns else None)
        due = last or self.stop_requested or (every > 0 and iteration % every == 0)
        saved = due or (self.world_size == 1 and self.writer.error is not None)
        if last or self.stop_requested:
            self.progress.close()  # (the bar stays above what follows: the last line is ours)
        path = None
        if saved:  # (TensorBoard's failure too: a checkpoint keeps what is in memory)
            path = checkpoints.save(self, iteration, global_step, state)
        if last or self.stop_requested:
            # from here on a stop ends the process at once (`stops.stop_after_training`)...
            self.stop.enter(Phase.STOPPING if self.stop_requested else Phase.AFTER_TRAINING)
        if saved and not self.stop_requested and self.stop.signal is not None:
            if last or self.world_size == 1:  # ...and one that came during the checkpoint
                self.stop.request()
                self.stop.enter(Phase.STOPPING)
                self.progress.close()
        if self.stop_requested and path is not None:
            stops.stopped_with_checkpoint(self, iteration, path)
        self._lap_start = time.time()

    def _check_finite(self, iteration: int, state: dict, crash: Exception | None = None) -> dict:
        """`state`, when it holds only finite values; else the run is closed (TensorBoard, with
        the losses that diverged, is flushed) and ends in one line naming the iteration and the
        newest checkpoint, the last finite one (`cleanrl_utils.run.diverged`), exit code 1."""
        self.state = state
        if names := diverged.not_finite(state):
            self._close(FAILED)
            raise RunError(diverged.diverged_line(self, iteration, names), FAILED) from crash
        return state

    def say(self, message: str) -> None:
        """A message on stderr, on a line of its own (not glued to the progress bar); a stderr
        that is gone drops it (`output`)."""
        if self.progress is not None and self.stop.phase is Phase.TRAINING:
            self.progress.write(message)
        else:
            output.say(message)

    def on_stop_signal(self, signum, frame) -> None:
        """The handler of the stop signals while the run holds them (`stops.on_stop_signal`)."""
        stops.on_stop_signal(self, signum)

    def on_second_ctrl_c(self, signum, frame) -> None:
        """The handler of Ctrl-C once one came: it stops at once (`stops.on_second_ctrl_c`)."""
        stops.on_second_ctrl_c(self)

    def take_name(self, name: str) -> None:
        """The ranks of a new run on many processes take rank 0's name (and folder) for it."""
        self.name, self.dir = name, self.runs_dir / name

    @property
    def stop_signal(self) -> int | None:
        """The first stop signal received, which decides the exit code (None: none came)."""
        return self.stop.signal

    @property
    def stop_requested(self) -> bool:
        """Whether the run stops: after this iteration's checkpoint (written), or before
        training began."""
        return self.stop.requested

    @property
    def after_training(self) -> bool:
        """Whether the run trained to its end and does the steps after training now."""
        return self.stop.phase is Phase.AFTER_TRAINING

    @property
    def finished(self) -> bool:
        return self.stop.phase is Phase.FINISHED

    def resume_command(self) -> str:
        launcher = "python -m cleanrl_utils.torchrun ..."  # (a JAX run's processes: its own)
        launcher = "python" if self.world_size == 1 else getattr(self.dist, "launcher", launcher)
        return f"{launcher} {sys.argv[0]} --resume {self.dir}"

    # -- the end ----------------------------------------------------------------------------

    def exit_code(self) -> int:
        """0; after a stop signal (its checkpoint is written) `CHECKPOINT_EXIT`, or
        `INTERRUPTED` for Ctrl-C: the first signal's (`signals.stop_code`)."""
        return stop_code(self.stop.signal) if self.stop_requested else 0

    def __enter__(self) -> Run:
        return self

    def __exit__(self, exc_type, exc, traceback) -> None:
        """Leaving the block finishes the run; left by an exception (a `RunError`, a failed
        write, a crash), it only gives back what the run changed in the process. A crash in
        training of values no longer finite (torch's `Categorical` refuses NaN logits), in the
        state or in what the crash names, is said as what it is: `_check_finite`'s line."""
        if exc_type is None:
            self.finish()
            return
        try:
            training = self.stop.phase is Phase.TRAINING
            if training and isinstance(exc, Exception) and not isinstance(exc, RunError):
                self._check_crash(self.iteration + 1, exc)
        finally:
            self.process.give_back()

    def _check_crash(self, iteration: int, crash: Exception) -> None:
        """A crash inside `iteration`: the run ends in the diverged line when its state holds
        NaN or infinite values, or when the crash says it met some (`diverged.crash_values`:
        parameters finite but huge, as in the first iteration of a huge learning rate, overflow
        in the next forward pass); any other crash is left as it is."""
        if self.state is not None:
            self._check_finite(iteration, self.state, crash)
        if (values := diverged.crash_values(crash)) is not None:
            self._close(FAILED)
            raise RunError(diverged.diverged_line(self, iteration, [values]), FAILED) from crash

    def finish(self) -> int:
        """Closes TensorBoard and W&B, says where the run's files are, and gives back what the
        run changed in the process (the signal handlers, stdout, the excepthook: a notebook or a
        test carries on as before the run). Returns the exit code; a second call changes
        nothing."""
        code = self.exit_code()
        try:
            self._close(code)
        finally:
            self.process.give_back()
        return code

    def _close(self, code: int) -> None:
        if self.writer is None or self.stop.phase is Phase.FINISHED:  # (never started, or closed)
            return
        after_training = self.stop.phase is Phase.AFTER_TRAINING
        self.stop.enter(Phase.FINISHED)
        if self.dist is not None:
            self.dist.close(wait=code in (0, CHECKPOINT_EXIT, INTERRUPTED))  # (in step)
        if code == 0 and self.rank == 0:
            output.say(
                f"run folder: {self.dir}/ (TensorBoard events, config.json, checkpoints)",
                stdout=True,
            )
        if self.progress is not None:
            self.progress.close()
        self.writer.close()
        if self.writer.error is not None:
            checkpoints.disk_failed(self, "the TensorBoard event file", self.writer.error)
        if code == 0 and after_training and self.rank == 0:
            mark_finished(self.dir / "config.json", self.global_step)  # a resume: nothing to do
        if self.lock_fd is not None:  # (rank 0's folder, made)
            mark_output_lost(self.dir / "config.json", output.lost())
        release_run_folder(self.lock_fd)
        self.lock_fd = None
        records.finish_wandb(code)
