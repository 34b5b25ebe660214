"""Checkpoints, resume and preemption: a long run never loses more than a few iterations.

Each script in `cleanrl/` keeps a few lines of this: `Checkpoints(args, __file__)` right after the
arguments are parsed (it resolves `--resume`, and exits there when the run has already finished),
`checkpoints.restore()` once the agent and optimizer exist, `checkpoints.due(iteration)` and
`checkpoints.save(...)` at the end of each iteration, and one block that starts fresh games at
`checkpoints.fresh_games_at`.

A checkpoint is one file `runs/{run_name}/checkpoint_{iteration:07d}.ckpt`: a magic line, the
SHA-256 of the payload and a pickle of the script's state (network, optimizer, step, RNG states,
episode statistics window, ...), written atomically (temp file, fsync, rename). The newest
`KEEP` are kept; a corrupt or cut-off newest checkpoint is reported and the one before it used.

SIGTERM and SIGUSR1 (what SLURM sends before preemption or the time limit) make the script finish
its iteration, write a checkpoint and exit with `CHECKPOINT_EXIT` (75, EX_TEMPFAIL: "try again"),
which the SLURM templates answer by requeueing the task with `--resume auto`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pickle
import random
import signal
import sys
import time
from pathlib import Path

import numpy as np

from cleanrl_utils.checks import fail
from cleanrl_utils.runs import RunName, atomic_write_bytes, find_runs

CHECKPOINT_EXIT = 75
KEEP = 2
MAGIC = b"CLEANRL-CHECKPOINT-1\n"
CHECKPOINT_GLOB = "checkpoint_*.ckpt"
# Only the resume test sets this: it makes a straight run start fresh games at this iteration
# exactly as a resumed run does, so that the two can be compared weight for weight.
FRESH_GAMES_ENV = "CLEANRL_FRESH_GAMES_AT"
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
DERIVED_ARGS = {"batch_size", "minibatch_size", "num_iterations"}


class CorruptCheckpoint(Exception):
    pass


def checkpoint_path(run_dir: Path, iteration: int) -> Path:
    return Path(run_dir) / f"checkpoint_{iteration:07d}.ckpt"


def list_checkpoints(run_dir: Path) -> list[Path]:
    """The checkpoints of a run, newest (highest iteration) first."""
    return sorted(Path(run_dir).glob(CHECKPOINT_GLOB), reverse=True)


def write_checkpoint(path: Path, payload: dict) -> None:
    data = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
    atomic_write_bytes(path, MAGIC + hashlib.sha256(data).digest() + data)


def read_checkpoint(path: Path) -> dict:
    """The payload of a checkpoint file; `CorruptCheckpoint` saying why when it is not one."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise CorruptCheckpoint(f"cannot read it ({exc.strerror or exc})") from None
    if not raw.startswith(MAGIC):
        raise CorruptCheckpoint("not a cleanrl checkpoint (wrong header)")
    digest, data = raw[len(MAGIC) : len(MAGIC) + 32], raw[len(MAGIC) + 32 :]
    if hashlib.sha256(data).digest() != digest:
        raise CorruptCheckpoint(f"checksum mismatch: truncated or damaged ({len(raw)} bytes)")
    try:
        payload = pickle.loads(data)
    except Exception as exc:  # a valid checksum over data that does not unpickle here
        raise CorruptCheckpoint(f"cannot unpickle it ({type(exc).__name__}: {exc})") from None
    if not isinstance(payload, dict) or "iteration" not in payload:
        raise CorruptCheckpoint("not a cleanrl checkpoint (no iteration)")
    return payload


def games_seed(seed: int, iteration: int) -> int:
    """The seed of the games started at `iteration`: the run's own seed for a new run, and for
    a resumed run one derived from the seed and the iteration (emulators cannot be saved, so the
    games restart; a new seed keeps them from replaying the first iteration's games)."""
    if iteration <= 1:
        return seed
    return int(np.random.SeedSequence([seed, iteration]).generate_state(1)[0] % 2**31)


def rng_state() -> dict:
    """The global RNGs a torch script draws from (actions: torch; minibatches: numpy)."""
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


class Checkpoints:
    """Where a run's checkpoints go, when to write them, and what the run resumes from.

    Created right after the arguments are parsed (and the derived sizes computed): with
    `--resume` it finds the checkpoint, checks that it comes from this script and compatible
    arguments (arguments left at their defaults take the checkpoint's values), and exits with
    code 0 when that run has already finished. It also installs the SIGTERM/SIGUSR1 handlers.
    """

    def __init__(self, args, script_file: str, runs_dir: str = "runs"):
        self.args = args
        self.script = Path(script_file).stem
        self.runs_dir = Path(runs_dir)
        self.payload: dict | None = None
        self.stop_signal: int | None = None
        if args.checkpoint_every < 0:
            fail(f"--checkpoint-every must be 0 (off) or positive, got {args.checkpoint_every}")
        if args.resume is None:
            self.run_name = str(RunName.new(args.env_id, args.exp_name, args.seed))
        else:
            self._find_resume_point(args.resume)
        self.run_dir = self.runs_dir / self.run_name
        self.iteration = self.payload["iteration"] if self.payload else 0
        if self.payload:
            self.fresh_games_at = self.iteration + 1
        else:
            self.fresh_games_at = int(os.environ.get(FRESH_GAMES_ENV, "0")) or None
        for signum in (signal.SIGTERM, signal.SIGUSR1):
            signal.signal(signum, self._on_signal)

    # -- resuming ---------------------------------------------------------------------------

    def _find_resume_point(self, resume: str) -> None:
        args = self.args
        if resume == "auto":
            candidates = find_runs(self.runs_dir, args.env_id, args.exp_name, args.seed)
            with_checkpoint = [path for path in candidates if list_checkpoints(path)]
            if not with_checkpoint:
                print(
                    f"--resume auto: no checkpoint of {args.exp_name} on {args.env_id} with seed "
                    f"{args.seed} under {self.runs_dir}/; starting a new run",
                    file=sys.stderr,
                )
                self.run_name = str(RunName.new(args.env_id, args.exp_name, args.seed))
                return
            files = list_checkpoints(with_checkpoint[0])
        else:
            path = Path(resume)
            if path.is_file():
                files = [path]
            elif path.is_dir():
                files = list_checkpoints(path)
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
            self.checkpoint_file = file
            break
        else:
            fail(f"--resume {resume}: no readable checkpoint (see the warnings above)")
        self.run_name = self.payload["run_name"]
        self.runs_dir = Path(self.checkpoint_file).resolve().parent.parent
        self._check_compatible()
        if self.payload["iteration"] >= args.num_iterations:
            print(
                f"run {self.run_name} has already finished ({self.payload['iteration']} "
                f"iterations, {self.payload['global_step']:,} steps): nothing to do"
            )
            raise SystemExit(0)
        print(
            f"resuming {self.run_name} from {self.checkpoint_file} (iteration "
            f"{self.payload['iteration']} of {args.num_iterations}, "
            f"{self.payload['global_step']:,} steps)"
        )

    def _check_compatible(self) -> None:
        saved_script, saved_args = self.payload.get("script"), self.payload.get("args", {})
        if saved_script != self.script:
            fail(
                f"--resume: {self.checkpoint_file} was written by {saved_script}.py, "
                f"not {self.script}.py"
            )
        defaults = {f.name: f.default for f in dataclasses.fields(self.args)}
        for name, saved in saved_args.items():
            if name in FREE_ARGS or name in DERIVED_ARGS or not hasattr(self.args, name):
                continue
            given = getattr(self.args, name)
            if given == saved:
                continue
            if given == defaults.get(name):  # left at its default: take the checkpoint's value
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
        for name in DERIVED_ARGS:
            if name in saved_args:
                setattr(self.args, name, saved_args[name])

    def restore(self) -> dict | None:
        """The script state saved in the checkpoint (None for a new run); the global RNGs are
        set back as they were when it was written."""
        if self.payload is None:
            return None
        set_rng_state(self.payload["rng"])
        return self.payload["state"]

    @property
    def global_step(self) -> int:
        return self.payload["global_step"] if self.payload else 0

    @property
    def purge_step(self) -> int | None:
        """TensorBoard drops what a killed run logged after its checkpoint from this step on."""
        return self.global_step + 1 if self.payload else None

    def games_seed(self, iteration: int) -> int:
        return games_seed(self.args.seed, iteration)

    # -- saving -----------------------------------------------------------------------------

    def _on_signal(self, signum, frame) -> None:
        if self.stop_signal is None:
            print(
                f"received {signal.Signals(signum).name}: finishing this iteration, then "
                "writing a checkpoint and exiting",
                file=sys.stderr,
                flush=True,
            )
        self.stop_signal = signum

    def due(self, iteration: int) -> bool:
        """Every `--checkpoint-every` iterations, at the last one, and after a stop signal."""
        return (
            self.stop_signal is not None
            or iteration == self.args.num_iterations
            or (self.args.checkpoint_every > 0 and iteration % self.args.checkpoint_every == 0)
        )

    def save(self, iteration: int, global_step: int, state: dict, writer=None) -> Path:
        """Write the checkpoint of `iteration` (after flushing `writer`, so that TensorBoard
        holds every scalar up to it), drop the older ones, and exit with `CHECKPOINT_EXIT` if a
        stop signal came."""
        if writer is not None:
            writer.flush()
        payload = {
            "script": self.script,
            "run_name": self.run_name,
            "iteration": iteration,
            "global_step": global_step,
            "args": dataclasses.asdict(self.args),
            "rng": rng_state(),
            "state": state,
            "time": time.time(),
        }
        path = checkpoint_path(self.run_dir, iteration)
        write_checkpoint(path, payload)
        for old in list_checkpoints(self.run_dir)[KEEP:]:
            old.unlink(missing_ok=True)
        if self.stop_signal is not None:
            name = signal.Signals(self.stop_signal).name
            print(
                f"{name}: checkpoint of iteration {iteration} written to {path}; exiting with "
                f"code {CHECKPOINT_EXIT} (continue with --resume {self.run_dir})",
                file=sys.stderr,
                flush=True,
            )
            if writer is not None:
                writer.close()
            if "wandb" in sys.modules and sys.modules["wandb"].run is not None:
                sys.modules["wandb"].mark_preempting()
                sys.modules["wandb"].finish(exit_code=CHECKPOINT_EXIT)
            raise SystemExit(CHECKPOINT_EXIT)
        return path


def resume_record(config_path: Path, record: dict) -> dict:
    """config.json of a resumed run: the original record, plus one entry per resumption."""
    try:
        original = json.loads(Path(config_path).read_text())
    except (OSError, ValueError):
        return record
    resumes = original.setdefault("resumes", [])
    resumes.append({k: record[k] for k in ("command", "git", "start_time") if k in record})
    return original
