"""The life of one training run, from its arguments to its exit code.

Every script in `cleanrl/` makes these calls, in this order:

    run = Run(args, __file__)     # --resume: finds the checkpoint; flags not given come from it
    ...                           # the sizes derived from the (reconciled) arguments
    writer = run.start()          # runs/{run.name}/: config.json, TensorBoard, W&B, stop signals
    envs = make_env(..., run.games_seed)
    run.restore(state)            # a resumed run: the state as checkpointed, RNGs included
    for iteration in range(run.start_iteration, args.num_iterations + 1):
        ...
        run.lap("rollout")        # time/rollout: the seconds since the previous lap
        ...
        run.end_iteration(iteration, global_step, avg_returns, state)  # progress; checkpoint if due
        if run.stop_requested:    # a stop signal came: this iteration's checkpoint is written
            break
    sys.exit(run.finish())        # TensorBoard and W&B closed; 0, 75 after SIGTERM, 130 after Ctrl-C

`state` is a dict of what a checkpoint keeps (torch modules and optimizers, deques, JAX pytrees:
see `cleanrl_utils.checkpoint`); `end_iteration` also takes a function returning it, read only
when a checkpoint is written. `--resume` is resolved by `cleanrl_utils.resume`: the flags given
on the command line are kept, the others come from the checkpoint. `finish()` puts back the
signal handlers that `start()` replaced (so does leaving a `with Run(...) as run:` block), so a
notebook or a test goes on as before the run.

Checkpoints: every `--checkpoint-every` iterations, after the last one, and after a stop signal:
SIGTERM and SIGUSR1 (what SLURM sends before preemption or the time limit) and Ctrl-C make the run
finish its iteration, write a checkpoint and stop; `finish()` then returns `CHECKPOINT_EXIT` (75,
EX_TEMPFAIL: "try again"), which the SLURM templates answer by requeueing the task with
`--resume auto`, or 130 after Ctrl-C. A second Ctrl-C stops at once; a stop before training or
after it (the model file, evaluation, upload) stops at once too (`cleanrl_utils.stops`), and a
resumed run that is trained but lacks these steps does them. The emulators cannot be saved, so
a resumed run starts new games, seeded with `games_seed(seed, iteration)`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
import time
import uuid
from pathlib import Path

import numpy as np

from cleanrl_utils.checkpoint import (
    checkpoint_path,
    list_checkpoints,
    restored_value,
    rng_problem,
    rng_state,
    saved_value,
    set_rng_state,
    state_problem,
    write_checkpoint,
)
from cleanrl_utils.checks import fail, steps_note, value_problem
from cleanrl_utils.exits import CHECKPOINT_EXIT, STOP_SIGNALS, hold_stops, signal_name
from cleanrl_utils.exits import INTERRUPTED as INTERRUPTED_EXIT
from cleanrl_utils.extras import missing_flag_extra
from cleanrl_utils.faults import (
    NoWriter,
    disk_failure,
    folder_gone,
    kept_after,
    lock_run_folder,
    release_run_folder,
    run_writer,
    trim_partial_record,
)
from cleanrl_utils.progress import Progress
from cleanrl_utils.resume import (
    after_training_due,
    find_checkpoint,
    games_seed,
    given_flags,
    reconcile_args,
)
from cleanrl_utils.runs import (
    RunName,
    atomic_write_bytes,
    hyperparameter_table,
    mark_finished,
    mark_stopped,
    name_problem,
    remove_temp_files,
    resumed_record,
    run_record,
)
from cleanrl_utils.stops import stop_after_training, stop_before_training

KEEP = 2  # checkpoints kept per run, newest first


class Run:
    """One training run: its folder, logs, checkpoints, progress and stop signals."""

    def __init__(
        self,
        args,
        script_file: str,
        runs_dir: str = "runs",
        argv: list[str] | None = None,
        dist=None,
    ):
        """Resolves `--resume` (exits with one `error:` line when it cannot, and with 0 when the
        run has already finished): the arguments neither given on the command line `argv`
        (default: `sys.argv[1:]`) nor set in code take the checkpoint's values. Creates nothing
        on disk. `dist`: a run on many processes (`cleanrl_utils.distributed.Distributed`):
        rank 0 alone writes, the ranks agree on when to stop, and a checkpoint holds every
        rank's RNGs."""
        hold_stops()  # (a stop since the script's first import ends the run at its next safe point)
        self.args = args
        self.given = given_flags(args, sys.argv[1:] if argv is None else argv)
        self.dist = dist
        self.rank = dist.rank if dist is not None else 0
        self.world_size = dist.world_size if dist is not None else 1
        self.script_file = script_file
        self.script = Path(script_file).stem
        self.runs_dir = Path(runs_dir)
        self.payload: dict | None = None
        self._check_names()  # (before `--resume auto` looks for runs by these names)
        if args.resume is not None:
            self._read_checkpoint()
        if self.payload is None:
            self.name = str(RunName.new(args.env_id, args.exp_name, args.seed, self.runs_dir))
            self.dir = self.runs_dir / self.name
        self.lock_fd: int | None = None
        done = self.payload["iteration"] if self.payload else 0
        self.start_iteration = done + 1
        self.global_step = self.payload["global_step"] if self.payload else 0
        # (iteration, global step) of the newest checkpoint: what a second Ctrl-C falls back to
        self.checkpointed = (done, self.global_step) if self.payload else None
        self.games_seed = games_seed(args.seed, self.start_iteration)
        self.start_time = time.time()
        self.pid = os.getpid()
        self.stop_signal: int | None = None
        self.stop_requested = False
        self.training = False  # between the first and the last iteration of this process
        self.after_training = False  # the model file, evaluation, upload: a stop ends it at once
        self.iteration_s = 0.0  # how long the last iteration took
        self.laps: dict[str, float] = {}
        self._lap_start = time.time()
        self.writer = None
        self.progress = None
        self.previous_handlers: dict = {}  # what `start` replaced and `finish` puts back
        self.finished = False
        if problem := missing_flag_extra(args):  # (--capture-video's packages: before any work)
            fail(problem)
        if getattr(args, "upload_model", False):  # what an upload needs: before any work
            from cleanrl_utils.after_training import check_upload

            check_upload(args)
        stop_before_training(self)

    # -- resuming ---------------------------------------------------------------------------

    def _check_names(self) -> None:
        """The names that become the run folder's: one `error:` line when they cannot."""
        if problem := name_problem(self.args.exp_name, self.args.env_id):
            fail(problem)

    def _read_checkpoint(self) -> None:
        found = find_checkpoint(self.args, self.runs_dir)
        if found is None:
            return
        # the folder named (or holding the file named) is the run's, whatever the checkpoint's
        # record says: a copied folder is a run of its own, named after its folder
        self.dir, file, self.payload = found
        self.name = self.dir.resolve().name
        fields = {f.name: f for f in dataclasses.fields(self.args)}
        for name, value in self.payload["args"].items():
            problem = name in fields and value_problem(name, value, fields[name].type)
            if problem:
                fail(f"--resume: {file}: its arguments do not fit {self.script}.py: {problem}")
        self.runs_dir = self.dir.parent
        reconcile_args(self.args, self.payload, self.script, file, self.given)
        if self.payload.get("world_size", 1) != self.world_size:
            fail(
                f"--resume: {file} was written by a run on {self.payload.get('world_size', 1)} "
                f"process(es), this one has {self.world_size}: resume it with as many (each "
                "process's envs and random numbers are part of the run)"
            )
        self._check_names()  # (as reconciled with the checkpoint's)
        done, total = self.payload["iteration"], self.payload["args"]["num_iterations"]
        steps = f"{self.payload['global_step']:,} steps"
        if done >= total and not after_training_due(self.dir, vars(self.args)):
            print(
                f"run {self.name} has already finished ({done} iterations, {steps}): nothing to do"
            )
            raise SystemExit(0)
        left = "the steps after training" if done >= total else f"iteration {done} of {total}"
        print(f"resuming {self.name} from {file} ({left}, {steps})")

    # -- starting ---------------------------------------------------------------------------

    def start(self):
        """Creates runs/{name}/ with config.json (the arguments, command line and code version;
        a resumption is appended), starts W&B with `--track` (a resumed run continues its W&B
        run), installs the stop-signal handlers and returns the TensorBoard writer. A resumed
        run's writer discards what the stopped process logged after its checkpoint. The folder
        is locked first (one process per run folder, `cleanrl_utils.faults`); a resumed run
        writes into it only once `restore` has checked the checkpoint."""
        args = self.args
        stop_before_training(self)
        if self.rank != 0:  # rank 0 alone writes
            for signum in STOP_SIGNALS:
                self.previous_handlers[signum] = signal.signal(signum, self._on_stop_signal)
            self.writer = NoWriter()
            return self.writer
        self.lock_fd = lock_run_folder(self.dir)  # one process per run folder
        self._record = record = run_record(args, self.name)
        config_path = self.dir / "config.json"
        if self.payload is not None and config_path.exists():
            record = self._record = resumed_record(config_path, record)
        if getattr(args, "track", False):
            import wandb

            record.setdefault("wandb_id", uuid.uuid4().hex[:12])  # resumptions reuse it
            wandb.init(
                project=args.wandb_project_name,
                entity=args.wandb_entity,
                sync_tensorboard=True,
                config={**dataclasses.asdict(args), "git": record["git"]},
                name=self.name,
                id=record["wandb_id"],
                resume="allow",
                save_code=True,
            )
        purge_step = self.global_step + 1 if self.payload is not None else None
        # a resume writes nothing into the folder before `restore` has checked the checkpoint
        self.writer = run_writer(self.dir, purge_step, opened=False)
        if self.payload is None:
            self._open()
        for signum in STOP_SIGNALS:
            self.previous_handlers[signum] = signal.signal(signum, self._on_stop_signal)
        if note := steps_note(args.total_timesteps, args.num_envs, args.num_steps):
            print(f"note: {note}")  # (the iterations are whole batches)
        print(f"logging to {self.dir}/ (see it with: tensorboard --logdir {self.runs_dir})")
        return self.writer

    def _open(self) -> None:
        """Writes into the run folder: config.json, the event file (its first records); removes
        the temporary files of writes that a crash or a full disk cut short."""
        for tmp in remove_temp_files(self.dir):
            print(f"removed {tmp}, left by a write that did not finish", file=sys.stderr)
        try:
            config = json.dumps(self._record, indent=2).encode()
            atomic_write_bytes(self.dir / "config.json", config)
            self.writer.open()
            if self.payload is None:
                self.writer.add_text("hyperparameters", hyperparameter_table(self.args))
                git = self._record["git"]
                self.writer.add_text("git_commit", f"{git['commit']} (dirty: {git['dirty']})")
        except OSError as exc:
            self._disk_failed("config.json and the TensorBoard event file", exc)

    def restore(self, state: dict) -> dict:
        """A resumed run: every entry of `state` as checkpointed (objects loaded in place, other
        values replaced in the dict), the global RNGs as they were, and the step counter and
        training time where they stopped; each is checked against `state` (names, shapes,
        dtypes) before anything changes, in memory or in the run folder. A new run: nothing
        changes. Returns `state`."""
        stop_before_training(self)
        self.start_time = time.time()
        if self.payload is not None:
            saved = self.payload["state"]
            rngs = self.payload.get("ranks_rng", [self.payload["rng"]])
            rng = rngs[self.rank] if isinstance(rngs, list) and self.rank < len(rngs) else None
            problem = state_problem(state, saved) or rng_problem(rng)
            if problem:
                fail(f"--resume: {problem} ({self.script}.py cannot use it)")
            if self.rank == 0:
                self._open()
            for name, value in state.items():
                state[name] = restored_value(value, saved[name])
            set_rng_state(rng)
            # (checkpoints written before the run lifecycle moved here keep it in the state)
            elapsed = self.payload.get("elapsed", saved.get("elapsed", 0.0))
            self.start_time -= elapsed
        if self.start_iteration > self.args.num_iterations:  # trained: the steps after it left
            self.after_training = True
            return state
        total_steps = self.args.num_iterations * self.args.batch_size
        stream = None if self.rank == 0 else open(os.devnull, "w")  # noqa: SIM115
        self.progress = Progress(total_steps, start_step=self.global_step, stream=stream)
        self.training = True
        self._lap_start = time.time()
        return state

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

    def end_iteration(self, iteration: int, global_step: int, avg_returns, state) -> None:
        """Logs the laps, shows the progress (steps, steps per second, the mean of `avg_returns`)
        and writes a checkpoint of `state` (a dict, or a function returning one) when one is due:
        every `--checkpoint-every` iterations, after the last, and after a stop signal, which
        also sets `stop_requested`."""
        for phase, seconds in self.laps.items():
            self.writer.add_scalar(f"time/{phase}", seconds, global_step)
        self.iteration_s = time.time() - self._lap_start + self.laps_s
        if self.dist is not None:  # every rank stops after the same iteration
            self.stop_signal = self.dist.agreed_stop(self.stop_signal)
        self.stop_requested = self.stop_signal is not None
        last = iteration == self.args.num_iterations
        every = self.args.checkpoint_every
        self.global_step = global_step
        sps = global_step / (time.time() - self.start_time)
        self.progress.update(global_step, sps, np.mean(avg_returns) if avg_returns else None)
        due = last or self.stop_requested or (every > 0 and iteration % every == 0)
        tensorboard_failed = self.world_size == 1 and self.writer.error is not None
        if last or self.stop_requested:
            self.progress.close()  # (the bar stays above what follows: the last line is ours)
        if due or tensorboard_failed:  # (a checkpoint keeps what is in memory)
            self._save(iteration, global_step, state() if callable(state) else state)
        if last or self.stop_requested:
            self.training = False
            self.after_training = not self.stop_requested
        self._lap_start = time.time()

    def _say(self, message: str) -> None:
        """A message on stderr, on a line of its own (not glued to the progress bar)."""
        if self.progress is not None and self.training:
            self.progress.write(message)
        else:
            print(message, file=sys.stderr, flush=True)

    def _on_stop_signal(self, signum, frame) -> None:
        """SIGTERM, SIGUSR1, Ctrl-C, never raised where they land (JAX's gc callback would swallow
        it): in training, finish the iteration, write a checkpoint, stop; before it, stop at the
        next safe point; after it, at once (`cleanrl_utils.stops`). A second Ctrl-C stops at once.
        Processes forked from this one (gymnasium's `--async-envs` workers) ignore them: the
        group gets the signal, and this process stops them."""
        if os.getpid() != self.pid:
            return
        if self.after_training:
            stop_after_training(self, signum)
        name = signal_name(signum)
        if signum == signal.SIGINT:
            signal.signal(signal.SIGINT, self._on_second_ctrl_c)
        if self.stop_signal is None and self.training:
            wait = f" (about {self.iteration_s:.0f} s)" if self.iteration_s else ""
            again = "; Ctrl-C again stops at once" if signum == signal.SIGINT else ""
            self._say(
                f"received {name}: finishing this iteration{wait}, then writing a checkpoint and "
                f"stopping{again}"
            )
        self.stop_signal = signum

    def _on_second_ctrl_c(self, signum, frame) -> None:
        """Stops at once, without a checkpoint, after saying what is lost; the process ends by
        the signal itself, as it would without a handler."""
        if os.getpid() != self.pid:
            return
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if self.progress is not None:
            self.progress.close()
        if self.checkpointed is None:
            lost = (
                f"the {self.global_step:,} steps trained so far and the iteration under way are "
                "lost: no checkpoint was written yet, so the run cannot be resumed"
            )
        else:
            iteration, step = self.checkpointed
            lost = (
                f"the {self.global_step - step:,} steps trained since the checkpoint of iteration "
                f"{iteration} and the iteration under way are lost (continue from that "
                f"checkpoint with: {self.resume_command()})"
            )
        print(f"received Ctrl-C again: stopping now, without a checkpoint; {lost}", file=sys.stderr)
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGINT)

    def resume_command(self) -> str:
        launcher = "python" if self.world_size == 1 else "python -m cleanrl_utils.torchrun ..."
        return f"{launcher} {sys.argv[0]} --resume {self.dir}"

    def _save(self, iteration: int, global_step: int, state: dict) -> Path:
        """Writes the checkpoint of `iteration` (after flushing TensorBoard, so that it holds
        every scalar up to it) and drops all but the newest `KEEP`. A write that fails ends the
        run (`_disk_failed`); when it is TensorBoard's, the checkpoint is still tried first."""
        ranks_rng = self.dist.gather(rng_state()) if self.dist is not None else None
        if self.rank != 0:
            self.checkpointed = (iteration, global_step)  # (rank 0 writes it)
            return None
        self.writer.flush()
        failed = self.writer.error  # (TensorBoard's: the checkpoint is still worth a try)
        payload = {
            "script": self.script,
            "run_name": self.name,
            "iteration": iteration,
            "global_step": global_step,
            "args": dataclasses.asdict(self.args),
            "rng": rng_state(),
            "state": {name: saved_value(value) for name, value in state.items()},
            "elapsed": time.time() - self.start_time,
            "time": time.time(),
        }
        if self.world_size > 1:
            payload |= {"world_size": self.world_size, "ranks_rng": ranks_rng}
        path = checkpoint_path(self.dir, iteration)
        try:
            folder_gone(self.dir, self.lock_fd)  # (a write would make a new, empty one)
            write_checkpoint(path, payload)
        except OSError as exc:
            what = (
                "the TensorBoard event file"
                if failed
                else f"the checkpoint of iteration {iteration}"
            )
            self._disk_failed(what, failed or exc)
        if failed:
            self._disk_failed("the TensorBoard event file", failed)
        self.checkpointed = (iteration, global_step)
        for old in list_checkpoints(self.dir)[KEEP:]:
            old.unlink(missing_ok=True)
        if self.stop_requested:
            mark_stopped(self.dir / "config.json", signal_name(self.stop_signal), global_step)
            self._say(
                f"{signal_name(self.stop_signal)}: checkpoint of iteration {iteration} written to {path}; exiting with "
                f"code {self.exit_code()} (continue with: {self.resume_command()})"
            )
        return path

    def _disk_failed(self, what: str, exc: OSError) -> None:
        """A write into the run folder failed (a full disk): the event file cut back to its last
        whole record, then one line naming the folder, the cause and what is kept, and exit
        code `DISK_EXIT` (cleanrl_utils.faults)."""
        if self.writer is not None and self.writer.event_file is not None:
            trim_partial_record(self.writer.event_file)
        kept = kept_after(self.dir, exc, list_checkpoints(self.dir), self.resume_command())
        if self.progress is not None:
            self.progress.close()
        self.finished = True  # (nothing more to close: `finish` would fail the same way)
        disk_failure(self.dir, what, exc, kept)

    # -- the end ----------------------------------------------------------------------------

    def exit_code(self) -> int:
        """0; after a stop signal (its checkpoint is written) `CHECKPOINT_EXIT`, or
        `INTERRUPTED_EXIT` for Ctrl-C."""
        if not self.stop_requested:
            return 0
        return INTERRUPTED_EXIT if self.stop_signal == signal.SIGINT else CHECKPOINT_EXIT

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc_info) -> None:
        """Leaving a `with Run(...) as run:` block finishes the run, if it has not finished."""
        self.finish()

    def finish(self) -> int:
        """Closes TensorBoard and W&B, says where the run's files are, and puts back the signal
        handlers that `start` replaced (a notebook or a test carries on as before the run).
        Returns the exit code."""
        code = self.exit_code()
        for signum, handler in self.previous_handlers.items():
            signal.signal(signum, handler)
        self.previous_handlers = {}
        if self.world_size > 1:
            # torchrun stops the other ranks with SIGTERM once one exits with a code other than
            # 0; this rank's run is over, and Python's exit would let SIGTERM kill it (-15)
            for signum in (signal.SIGTERM, signal.SIGUSR1):
                signal.signal(signum, signal.SIG_IGN)
        if self.writer is None or self.finished:  # (never started, or finished already)
            return code
        self.finished = True
        if self.dist is not None:
            self.dist.close()
        if code == 0 and self.rank == 0:
            print(f"run folder: {self.dir}/ (TensorBoard events, config.json, checkpoints)")
        if self.progress is not None:
            self.progress.close()
        self.writer.close()
        if self.writer.error is not None:
            self._disk_failed("the TensorBoard event file", self.writer.error)
        if code == 0 and self.after_training and self.rank == 0:
            mark_finished(self.dir / "config.json", self.global_step)  # a resume: nothing to do
        release_run_folder(self.lock_fd)
        self.lock_fd = None
        wandb = sys.modules.get("wandb")
        if wandb is not None and wandb.run is not None:
            if code == CHECKPOINT_EXIT:
                wandb.mark_preempting()
            wandb.finish(exit_code=code)
        return code
