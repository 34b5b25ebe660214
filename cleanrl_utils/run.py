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
    sys.exit(run.finish())        # TensorBoard and W&B closed; 0, or 75 after a stop signal

`state` is a dict of what a checkpoint keeps: objects with `state_dict()`/`load_state_dict()`
(torch modules and optimizers) are saved and loaded in place, deques likewise, anything else
(JAX pytrees, arrays, numbers) is saved as it is and restored into the dict (a flax struct, such
as a `TrainState`, through `flax.serialization`, the dict's current value serving as template).
`end_iteration` also takes a function returning that dict, read only when a checkpoint is written.

Checkpoints: every `--checkpoint-every` iterations, after the last one, and after a stop signal:
SIGTERM and SIGUSR1 (what SLURM sends before preemption or the time limit) make the run finish
its iteration, write a checkpoint and stop; `finish()` then returns `CHECKPOINT_EXIT` (75,
EX_TEMPFAIL: "try again"), which the SLURM templates answer by requeueing the task with
`--resume auto`. The emulators cannot be saved, so a resumed run starts new games, seeded with
`games_seed(seed, iteration)`.
"""

from __future__ import annotations

import dataclasses
import json
import random
import signal
import sys
import time
import uuid
from collections import deque
from pathlib import Path

import numpy as np

from cleanrl_utils.checkpoint import (
    CHECKPOINT_GLOB,
    CorruptCheckpoint,
    checkpoint_path,
    list_checkpoints,
    read_checkpoint,
    write_checkpoint,
)
from cleanrl_utils.checks import fail
from cleanrl_utils.progress import Progress
from cleanrl_utils.runs import (
    RunName,
    atomic_write_bytes,
    find_runs,
    hyperparameter_table,
    resumed_record,
    run_record,
)

CHECKPOINT_EXIT = 75
KEEP = 2  # checkpoints kept per run, newest first
# Arguments that may change between a run and its resumption: they do not change what is learned.
FREE_ARGS = {
    "track",
    "wandb_project_name",
    "wandb_entity",
    "capture_video",
    "save_model",
    "eval_episodes",
    "checkpoint_every",
    "resume",
    "cuda",
    "compile",
    "cudagraphs",
    "async_envs",
}
# Arguments derived from the others once they are reconciled with the checkpoint.
DERIVED_ARGS = {"batch_size", "minibatch_size", "num_iterations"}
STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)


def games_seed(seed: int, iteration: int) -> int:
    """The seed of the games a process starts at `iteration`: the run's own seed for a new run,
    and for a resumed run one derived from the seed and the iteration (the emulators cannot be
    saved, so the games restart; a new seed keeps them from replaying the run's first games)."""
    if iteration <= 1:
        return seed
    return int(np.random.SeedSequence([seed, iteration]).generate_state(1)[0] % 2**31)


def rng_state() -> dict:
    """The global RNGs a script draws from (python, numpy; torch and CUDA where imported)."""
    state = {"python": random.getstate(), "numpy": np.random.get_state()}
    if "torch" in sys.modules:
        import torch

        state["torch"] = torch.get_rng_state()
        if torch.cuda.is_available():
            state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    if "torch" in state:
        import torch

        torch.set_rng_state(state["torch"])
        if "cuda" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda"])


def is_jax_tree(value) -> bool:
    """A JAX array, or a pytree holding some (a flax `TrainState`, a PRNG key)."""
    jax = sys.modules.get("jax")
    if jax is None:
        return False
    return any(isinstance(leaf, jax.Array) for leaf in jax.tree_util.tree_leaves(value))


def saved_value(value):
    """What a checkpoint stores of one entry of the script's state."""
    if hasattr(value, "state_dict"):  # torch modules and optimizers
        return value.state_dict()
    if isinstance(value, deque):
        return list(value)
    if is_jax_tree(value):  # as NumPy arrays, in flax's state-dict form
        import flax.serialization
        import jax

        return flax.serialization.to_state_dict(jax.device_get(value))
    return value


def restored_value(current, saved):
    """One entry of the script's state as checkpointed: loaded into `current` where it is an
    object, else built on `current` as template."""
    if hasattr(current, "load_state_dict"):
        current.load_state_dict(saved)
        return current
    if isinstance(current, deque):
        current.clear()
        current.extend(saved)
        return current
    if is_jax_tree(current):
        import flax.serialization

        return flax.serialization.from_state_dict(current, saved)
    return saved


class Run:
    """One training run: its folder, logs, checkpoints, progress and stop signals."""

    def __init__(self, args, script_file: str, runs_dir: str = "runs"):
        """Resolves `--resume` (exits with one `error:` line when it cannot, and with 0 when the
        run has already finished): the arguments left at their defaults take the checkpoint's
        values. Creates nothing on disk."""
        self.args = args
        self.script_file = script_file
        self.script = Path(script_file).stem
        self.runs_dir = Path(runs_dir)
        self.payload: dict | None = None
        if args.resume is not None:
            self._read_checkpoint(args.resume)
        if self.payload is None:
            self.name = str(RunName.new(args.env_id, args.exp_name, args.seed))
        self.dir = self.runs_dir / self.name
        done = self.payload["iteration"] if self.payload else 0
        self.start_iteration = done + 1
        self.global_step = self.payload["global_step"] if self.payload else 0
        self.games_seed = games_seed(args.seed, self.start_iteration)
        self.start_time = time.time()
        self.stop_signal: int | None = None
        self.stop_requested = False
        self.laps: dict[str, float] = {}
        self._lap_start = time.time()
        self.writer = None
        self.progress = None

    # -- resuming ---------------------------------------------------------------------------

    def _read_checkpoint(self, resume: str) -> None:
        args = self.args
        if resume == "auto":
            with_checkpoint = [
                path
                for path in find_runs(self.runs_dir, args.env_id, args.exp_name, args.seed)
                if list_checkpoints(path)
            ]
            if not with_checkpoint:
                print(
                    f"--resume auto: no checkpoint of {args.exp_name} on {args.env_id} with seed "
                    f"{args.seed} under {self.runs_dir}/; starting a new run",
                    file=sys.stderr,
                )
                return
            files = list_checkpoints(with_checkpoint[0])
        elif Path(resume).is_file():
            files = [Path(resume)]
        elif Path(resume).is_dir():
            files = list_checkpoints(Path(resume))
            if not files:
                fail(f"--resume {resume}: no checkpoint ({CHECKPOINT_GLOB}) in that folder")
        else:
            fail(f"--resume {resume}: no such run folder or checkpoint file")
        for i, file in enumerate(files):
            try:
                self.payload = read_checkpoint(file)
            except CorruptCheckpoint as exc:
                usable = "; trying the one before it" if i + 1 < len(files) else ""
                print(f"warning: checkpoint {file} is corrupt: {exc}{usable}", file=sys.stderr)
                continue
            break
        else:
            fail(f"--resume {resume}: no readable checkpoint (see the warnings above)")
        self.name = self.payload["run_name"]
        self.runs_dir = Path(file).resolve().parent.parent
        self._reconcile_args(file)
        done, total = self.payload["iteration"], self.payload["args"]["num_iterations"]
        steps = f"{self.payload['global_step']:,} steps"
        if done >= total:
            print(
                f"run {self.name} has already finished ({done} iterations, {steps}): nothing to do"
            )
            raise SystemExit(0)
        print(f"resuming {self.name} from {file} (iteration {done} of {total}, {steps})")

    def _reconcile_args(self, file: Path) -> None:
        """Arguments left at their defaults take the checkpoint's values; a contradicting one,
        or a checkpoint of another script, is an error."""
        saved_script, saved_args = self.payload.get("script"), self.payload.get("args", {})
        if saved_script != self.script:
            fail(f"--resume: {file} was written by {saved_script}.py, not {self.script}.py")
        defaults = {f.name: f.default for f in dataclasses.fields(self.args)}
        for name, saved in saved_args.items():
            if name in FREE_ARGS or name in DERIVED_ARGS or name not in defaults:
                continue
            given = getattr(self.args, name)
            if given == saved:
                continue
            if given == defaults[name]:
                setattr(self.args, name, saved)
                continue
            flag = "--" + name.replace("_", "-")
            fail(
                f"--resume: the checkpoint was made with {flag} {saved!r}, this command gives "
                f"{given!r} (drop {flag} or start a new run)"
            )
        missing = [n for n in defaults if n not in saved_args and n not in FREE_ARGS]
        if missing:
            fail(f"--resume: the checkpoint has no value for {', '.join(missing)}")

    # -- starting ---------------------------------------------------------------------------

    def start(self):
        """Creates runs/{name}/ with config.json (the arguments, command line and code version;
        a resumption is appended), starts W&B with `--track` (a resumed run continues its W&B
        run), installs the stop-signal handlers and returns the TensorBoard writer. A resumed
        run's writer discards what the stopped process logged after its checkpoint."""
        from torch.utils.tensorboard import SummaryWriter

        args = self.args
        record = run_record(args, self.name)
        config_path = self.dir / "config.json"
        if self.payload is not None and config_path.exists():
            record = resumed_record(config_path, record)
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
        self.writer = SummaryWriter(str(self.dir), purge_step=purge_step)
        if self.payload is None:
            self.writer.add_text("hyperparameters", hyperparameter_table(args))
            git = record["git"]
            self.writer.add_text("git_commit", f"{git['commit']} (dirty: {git['dirty']})")
        atomic_write_bytes(config_path, json.dumps(record, indent=2).encode())
        for signum in STOP_SIGNALS:
            signal.signal(signum, self._on_stop_signal)
        return self.writer

    def restore(self, state: dict) -> dict:
        """A resumed run: every entry of `state` as checkpointed (objects loaded in place, other
        values replaced in the dict), the global RNGs as they were, and the step counter and
        training time where they stopped. A new run: nothing changes. Returns `state`."""
        self.start_time = time.time()
        if self.payload is not None:
            saved = self.payload["state"]
            for name, value in state.items():
                if name not in saved:
                    fail(f"--resume: the checkpoint has no {name!r} (saved: {', '.join(saved)})")
                state[name] = restored_value(value, saved[name])
            set_rng_state(self.payload["rng"])
            # (checkpoints written before the run lifecycle moved here keep it in the state)
            elapsed = self.payload.get("elapsed", saved.get("elapsed", 0.0))
            self.start_time -= elapsed
        total_steps = self.args.num_iterations * self.args.batch_size
        self.progress = Progress(total_steps, start_step=self.global_step)
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

    def end_iteration(self, iteration: int, global_step: int, avg_returns, state) -> None:
        """Logs the laps, shows the progress (steps, steps per second, the mean of `avg_returns`)
        and writes a checkpoint of `state` (a dict, or a function returning one) when one is due:
        every `--checkpoint-every` iterations, after the last, and after a stop signal, which
        also sets `stop_requested`."""
        for phase, seconds in self.laps.items():
            self.writer.add_scalar(f"time/{phase}", seconds, global_step)
        self.stop_requested = self.stop_signal is not None
        last = iteration == self.args.num_iterations
        every = self.args.checkpoint_every
        sps = global_step / (time.time() - self.start_time)
        self.progress.update(global_step, sps, np.mean(avg_returns) if avg_returns else None)
        if last or self.stop_requested:
            self.progress.close()
        if last or self.stop_requested or (every > 0 and iteration % every == 0):
            self._save(iteration, global_step, state() if callable(state) else state)
        self._lap_start = time.time()

    def _on_stop_signal(self, signum, frame) -> None:
        if self.stop_signal is None:
            print(
                f"received {signal.Signals(signum).name}: finishing this iteration, then "
                "writing a checkpoint and exiting",
                file=sys.stderr,
                flush=True,
            )
        self.stop_signal = signum

    def _save(self, iteration: int, global_step: int, state: dict) -> Path:
        """Writes the checkpoint of `iteration` (after flushing TensorBoard, so that it holds
        every scalar up to it) and drops all but the newest `KEEP`."""
        self.writer.flush()
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
        path = checkpoint_path(self.dir, iteration)
        write_checkpoint(path, payload)
        for old in list_checkpoints(self.dir)[KEEP:]:
            old.unlink(missing_ok=True)
        if self.stop_requested:
            print(
                f"{signal.Signals(self.stop_signal).name}: checkpoint of iteration {iteration} "
                f"written to {path}; exiting with code {CHECKPOINT_EXIT} "
                f"(continue with --resume {self.dir})",
                file=sys.stderr,
                flush=True,
            )
        return path

    # -- the end ----------------------------------------------------------------------------

    def finish(self) -> int:
        """Closes TensorBoard and W&B. Returns the exit code: 0, or `CHECKPOINT_EXIT` when a stop
        signal ended the run early (its checkpoint is written)."""
        code = CHECKPOINT_EXIT if self.stop_requested else 0
        if self.progress is not None:
            self.progress.close()
        self.writer.close()
        wandb = sys.modules.get("wandb")
        if wandb is not None and wandb.run is not None:
            if code:
                wandb.mark_preempting()
            wandb.finish(exit_code=code)
        return code
