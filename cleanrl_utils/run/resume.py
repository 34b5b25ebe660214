"""`--resume`: the checkpoint a run continues from, and the arguments it continues with.

`resume_run` is what `cleanrl_utils.run.Run` asks: the run folder, checkpoint and payload, and
the arguments reconciled with the checkpoint's as a new object (the caller's are not changed).
What it cannot use is a `RunError` (one `error:` line, exit code 2); a run already finished is one
with exit code 0. A run of the launcher's sweep (`cleanrl_utils.files.sweeps`) started without
`--resume` continues its sweep's run of the same exp name, env id and seed (`find_sweep_run`):
rerunning the launcher's command continues the sweep."""

from __future__ import annotations

import copy
import dataclasses
import errno
import fcntl
import os
import sys
import time
from pathlib import Path

import numpy as np

from cleanrl_utils.checks.args import value_problem
from cleanrl_utils.console.errors import RunError
from cleanrl_utils.envs import protocols
from cleanrl_utils.files.config import (
    CARRIED_ARGS,
    DERIVED_ARGS,
    FREE_ARGS,
    read_record,
    slurm_task,
)
from cleanrl_utils.files.run_names import file_name, find_runs, name_problem
from cleanrl_utils.files.state_file import (
    CHECKPOINT_GLOB,
    CorruptCheckpoint,
    PickleCheckpoint,
    list_checkpoints,
    payload_problem,
    read_checkpoint,
)
from cleanrl_utils.files.sweeps import (
    LAUNCHER_VARIABLE,
    launcher_gone,
    launcher_run_sweep,
    recorded_sweep,
)
from cleanrl_utils.run.checkpoints import REWOUND_NAME, finish_rewind
from cleanrl_utils.run.folder_guard import lock_holder

# the steps after training that a run owes when asked for (`cleanrl_utils.after_training`)
AFTER_TRAINING_ARGS = ("save_model", "capture_video", "upload_model")
# how long a run of a sweep waits for the process still writing its run folder to stop
FOLDER_WAIT_S = 300.0
CLAIMS = ".claims"  # runs/.claims/: a sweep's claims on its env ids and seeds (hidden: no run)


def claim_sweep_run(args, runs_dir: Path, sweep: str, timeout_s: float = FOLDER_WAIT_S):
    """Claims `sweep`'s env id and seed of `args` for this process (an `flock` on
    `runs/.claims/{sweep}__{env id}__{seed}.lock`, held until the run gives it back: the
    descriptor, or None when no claim file can be made, where the run folder's own write will say
    why), before the sweep's run is looked for: two launchers of one command at once never
    train a seed twice. A claim held by a run whose launcher is gone (it is writing its
    checkpoint and stopping) is waited for, up to `timeout_s`; one held by a run whose launcher
    lives is that run's: a `RunError` of exit code 0, one line (this process has nothing to do)."""
    path = runs_dir / CLAIMS / f"{sweep}__{file_name(args.env_id)}__{args.seed}.lock"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        return None
    deadline, said = time.monotonic() + timeout_s, False
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    os.close(fd)
                    return None
            pid, _, launcher = os.pread(fd, 200, 0).decode(errors="replace").partition(" ")
            holder = f"process {pid}" if pid.isdigit() else "another process"
            if not launcher_gone(launcher.strip()) or time.monotonic() > deadline:
                line = (
                    f"sweep {sweep}: {args.env_id} seed {args.seed} is run now by {holder} "
                    "(another launcher's): not run twice; that run goes on there"
                )
                raise RunError("claimed", 0, line)
            if not said:
                print(
                    f"sweep {sweep}: {args.env_id} seed {args.seed} is still run by {holder}, "
                    f"whose launcher is gone: waiting for it to write its checkpoint and stop "
                    f"(up to {timeout_s:.0f} s)",
                    file=sys.stderr,
                    flush=True,
                )
                said = True
            time.sleep(0.5)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {os.environ.get(LAUNCHER_VARIABLE, '')}".encode(), 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


def games_seed(seed: int, iteration: int) -> int:
    """The seed of the games a process starts at `iteration`: the run's own seed for a new run,
    and for a resumed run one derived from the seed and the iteration (the emulators cannot be
    saved, so the games restart; a new seed keeps them from replaying the run's first games)."""
    if iteration <= 1:
        return seed
    return int(np.random.SeedSequence([seed, iteration]).generate_state(1)[0] % 2**31)


def find_checkpoint(args, runs_dir: Path) -> tuple[Path, Path, dict] | None:
    """The run folder `args.resume` names, the checkpoint file to continue from and its payload:
    the newest readable checkpoint of a run folder (a damaged newest one is reported and the one
    before it used), one file (its folder is the run folder: the run writes beside it, whatever
    folder the file's record names), or with `auto` the newest unfinished run
    (`find_unfinished`). Anything else, a checkpoint of the older (pickle) format or a FIFO
    included, is a `RunError` (one `error:` line, exit code 2). A run of the launcher's sweep
    without `--resume`, or with `auto`: its sweep's run (`find_sweep_run`)."""
    sweep = launcher_run_sweep()
    if sweep is not None and args.resume in (None, "auto"):
        return find_sweep_run(args, runs_dir, sweep)
    if args.resume == "auto":
        return find_unfinished(args, runs_dir)
    path = Path(args.resume)
    finish_rewind(path if path.is_dir() else path.parent)  # (a kill -9 cut it short)
    if path.is_dir():
        folder, files = path, list_checkpoints(path)
        if not files:
            raise RunError(f"--resume {path}: no checkpoint ({CHECKPOINT_GLOB}) in that folder")
    elif path.is_file():
        folder, files = path.parent, [path]
    elif path.exists():
        raise RunError(f"--resume {path}: not a checkpoint file (a FIFO, a device or a socket)")
    else:
        raise RunError(f"--resume {path}: no such run folder or checkpoint file")
    if REWOUND_NAME.fullmatch(folder.resolve().name):  # (resumed there, it would be a new run)
        raise RunError(
            f"--resume {path}: {folder} holds checkpoints a rewind set aside, never resumed from "
            f"where they are; to go on with that line, copy the run folder (cp -a "
            f"{folder.parent} NEW), move {folder.name}/'s checkpoints into NEW and resume NEW"
        )
    found = newest_readable(files)
    if found is None:
        raise RunError(f"--resume {path}: no readable checkpoint (see the warnings above)")
    return (folder, *found)


def find_unfinished(args, runs_dir: Path) -> tuple[Path, Path, dict] | None:
    """`--resume auto`: the newest run of the same exp_name, env_id and seed whose newest
    checkpoint is not of its last iteration, or is but owes its steps after training
    (`after_training_due`), said so on stderr; in a SLURM task, only a run that the same task
    started (a requeued task resumes its own run, never another job's). None, said so, when
    there is none: a new run starts."""
    task = slurm_task()
    finished = []
    for run_dir in find_runs(runs_dir, args.env_id, args.exp_name, args.seed):
        if task is not None and not started_by(run_dir, task):
            continue
        finish_rewind(run_dir)
        found = newest_readable(list_checkpoints(run_dir))
        if found is None:
            continue
        payload = found[1]
        if payload["iteration"] >= payload["args"]["num_iterations"] and not after_training_due(
            run_dir, payload["args"]
        ):
            finished.append(run_dir.name)
            continue
        print(f"--resume auto: the newest unfinished run is {run_dir.name}", file=sys.stderr)
        return (run_dir, *found)
    where = " started by this SLURM task" if task is not None else ""
    done = f" ({len(finished)} finished: {', '.join(finished)})" if finished else ""
    print(
        f"--resume auto: no unfinished run of {args.exp_name} on {args.env_id} with seed "
        f"{args.seed}{where} under {runs_dir}/{done}; starting a new run",
        file=sys.stderr,
    )
    return None


def find_sweep_run(args, runs_dir: Path, sweep: str) -> tuple[Path, Path, dict] | None:
    """The run of `sweep` with this exp name, env id and seed (config.json's `sweep`; SLURM's
    job and task do not count: a rerun of the launcher is another job), once no other process
    writes it (`wait_for_folder`), and its newest readable checkpoint: a stopped run continues,
    a finished one is over (`resume_run` says so, exit code 0). None, said so, when the sweep
    has no such run with a checkpoint: a new run starts."""
    for run_dir in find_runs(runs_dir, args.env_id, args.exp_name, args.seed):
        record, _ = read_record(run_dir / "config.json")
        if recorded_sweep(record) != sweep:
            continue
        wait_for_folder(run_dir)
        finish_rewind(run_dir)
        found = newest_readable(list_checkpoints(run_dir))
        if found is not None:
            print(f"sweep {sweep}: its run {run_dir.name} goes on", file=sys.stderr)
            return (run_dir, *found)
    print(
        f"sweep {sweep}: no run of {args.exp_name} on {args.env_id} with seed {args.seed} "
        f"with a checkpoint under {runs_dir}/ yet; starting a new run",
        file=sys.stderr,
    )
    return None


def wait_for_folder(run_dir: Path, timeout_s: float = FOLDER_WAIT_S) -> None:
    """Waits (up to `timeout_s`) while another process holds `run_dir`'s lock: the run's earlier
    process, whose launcher is gone, finishes its iteration and writes its checkpoint first.
    After the wait, a holder that is still there refuses the run when it starts (the lock)."""
    try:
        fd = os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        deadline, said = time.monotonic() + timeout_s, False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # (given back at once: closed)
                return
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    return
            if time.monotonic() > deadline:
                return
            if not said:
                holder = lock_holder(os.fstat(fd).st_ino)
                print(
                    f"{run_dir} is still written by process {holder}: waiting for it to write "
                    f"its checkpoint and stop (up to {timeout_s:.0f} s)",
                    file=sys.stderr,
                    flush=True,
                )
                said = True
            time.sleep(0.5)
    finally:
        os.close(fd)


def after_training_due(run_dir: Path, args: dict) -> bool:
    """Whether a run whose training is done still owes the steps after training that `args`
    asks for (the model file, the evaluation, the upload): its config.json does not record them
    done (a stop came first). A record that cannot be read owes them; a run of a version that
    kept no such record (no `finished` in config.json) does not."""
    if not any(args.get(name) for name in AFTER_TRAINING_ARGS):
        return False
    record, _ = read_record(Path(run_dir) / "config.json")
    return record is None or ("finished" in record and not record["finished"])


def started_by(run_dir: Path, task: dict) -> bool:
    """Whether config.json says the run was started by this SLURM task (an array task keeps its
    array job and task id when it is requeued). A config.json that cannot be read says no, with
    a warning naming it: the task passes the run over instead of failing on it."""
    record, problem = read_record(run_dir / "config.json")
    if record is None:
        if problem != "missing":
            print(
                f"warning: --resume auto: {run_dir}/config.json is {problem}: cannot tell which "
                "SLURM task started that run; passed over",
                file=sys.stderr,
            )
        return False
    started = record.get("slurm")
    started = started if isinstance(started, dict) else {}
    keys = ["array_job_id", "array_task_id"] if "array_job_id" in task else ["job_id"]
    return all(started.get(key) == task.get(key) for key in keys)


def newest_readable(files: list[Path]) -> tuple[Path, dict] | None:
    """The first of `files` (newest first) that reads as a checkpoint, and its payload; each
    damaged one on the way is reported on stderr."""
    for i, file in enumerate(files):
        try:
            payload = read_checkpoint(file)
            problem = payload_problem(payload)
            if problem:  # (a valid checksum over what no run wrote)
                raise CorruptCheckpoint(f"not a run's checkpoint: {problem}")
            return file, payload
        except PickleCheckpoint as exc:
            raise RunError(f"--resume: {exc}") from None
        except CorruptCheckpoint as exc:
            usable = "; trying the one before it" if i + 1 < len(files) else ""
            print(f"warning: checkpoint {file} is corrupt: {exc}{usable}", file=sys.stderr)
    return None


def given_flags(args, argv: list[str]) -> set[str]:
    """The fields of `args` that the command line `argv` names, as tyro accepts them: `--flag value`,
    `--flag=value`, a boolean's `--flag` and `--no-flag`, with dashes or underscores."""
    names = {f.name.replace("_", "-"): f.name for f in dataclasses.fields(args) if f.init}
    given = set()
    for token in argv:
        if not token.startswith("--"):
            continue  # a value (tyro takes no abbreviations, nor short forms of these flags)
        flag = token[2:].partition("=")[0].replace("_", "-")
        if flag not in names and flag.startswith("no-"):
            flag = flag[len("no-") :]
        if flag in names:
            given.add(names[flag])
    return given


def reconcile_args(args, payload: dict, script: str, file: Path, given: set[str]):
    """`args` reconciled with the checkpoint's, as a new object (`args` is not changed): the
    arguments `given` (on the command line) or not at their defaults (set in code) must agree
    with the checkpoint's; the others take its values (the derived sizes are derived again
    afterwards). A contradicting one, or a checkpoint of another script, is a `RunError`."""
    saved_script, saved_args = payload.get("script"), payload.get("args", {})
    if saved_script != script:
        raise RunError(f"--resume: {file} was written by {saved_script}.py, not {script}.py")
    defaults = {f.name: f.default for f in dataclasses.fields(args)}
    taken = {}
    for name, saved in saved_args.items():
        if name in DERIVED_ARGS or name not in defaults or name == "protocol":
            continue
        value = getattr(args, name)
        if name in FREE_ARGS:
            if name in CARRIED_ARGS and name not in given and value == defaults[name]:
                taken[name] = saved
            continue
        if value == saved:
            continue
        if name not in given and value == defaults[name]:
            taken[name] = saved
            continue
        flag = "--" + name.replace("_", "-")
        raise RunError(
            f"--resume: the checkpoint was made with {flag} {saved!r}, this command gives "
            f"{value!r} (drop {flag} or start a new run)"
        )
    if "protocol" in defaults and "protocol" in saved_args:
        taken |= protocol_taken(args, saved_args, given, defaults["protocol"])
    for name in defaults:
        if name in given or name in FREE_ARGS or name in DERIVED_ARGS:
            continue
        if name not in saved_args:
            flag = "--" + name.replace("_", "-")
            print(
                f"warning: the checkpoint has no {flag} (a flag added since it was written); "
                f"the run goes on with {getattr(args, name)!r}: give {flag} to choose",
                file=sys.stderr,
            )
    reconciled = copy.copy(args)
    for name, value in taken.items():
        setattr(reconciled, name, value)
    return reconciled


def protocol_taken(args, saved_args: dict, given: set[str], default) -> dict:
    """`--protocol` reconciled with the checkpoint's: its five settings are the run's, not its
    name (a run made with Machado's settings given one by one has no name recorded, and is
    resumed with `--protocol machado`). Not given: the checkpoint's name (`{"protocol": ...}`);
    given, it must mean the checkpoint's settings, else a `RunError` naming the first that
    differs. A name that is no protocol's is `protocols.protocol_problem`'s to say."""
    name = args.protocol
    if "protocol" not in given and name == default:
        return {"protocol": saved_args["protocol"]}
    if name not in protocols.NAMES:
        return {}
    for setting, value in protocols.named(name, args).items():
        if setting not in saved_args:
            continue
        saved = saved_args[setting]
        if saved != value or isinstance(saved, bool) != isinstance(value, bool):
            raise RunError(
                f"--resume: the checkpoint was made with {protocols.flag(setting, saved)}, this "
                f"command gives --protocol {name}, which means {protocols.flag(setting, value)} "
                "(drop --protocol or start a new run)"
            )
    return {}


@dataclasses.dataclass(frozen=True)
class Resumed:
    """A run continued from a checkpoint: its folder (the run's, whatever the checkpoint's record
    says: a copied folder is a run of its own, named after its folder), the checkpoint file, what
    it holds, and the arguments reconciled with it."""

    dir: Path
    file: Path
    payload: dict
    args: object

    @property
    def name(self) -> str:
        return self.dir.resolve().name


def resume_run(args, script: str, runs_dir: Path, given: set[str], world_size: int = 1):
    """`--resume` of `args` (None when it starts a new run: `auto` found none): the checkpoint
    found (`find_checkpoint`), checked against `script`'s arguments and the processes of this
    run, and the arguments reconciled with it (`reconcile_args`). A `RunError` when it cannot be
    used, and one with exit code 0 when the run has already finished."""
    found = find_checkpoint(args, runs_dir)
    if found is None:
        return None
    folder, file, payload = found
    fields = {f.name: f for f in dataclasses.fields(args)}
    for name, value in payload["args"].items():
        problem = name in fields and value_problem(name, value, fields[name].type)
        if problem:
            raise RunError(f"--resume: {file}: its arguments do not fit {script}.py: {problem}")
    resumed = Resumed(folder, file, payload, reconcile_args(args, payload, script, file, given))
    if payload.get("world_size", 1) != world_size:
        raise RunError(
            f"--resume: {file} was written by a run on {payload.get('world_size', 1)} "
            f"process(es), this one has {world_size}: resume it with as many (each "
            "process's envs and random numbers are part of the run)"
        )
    if problem := name_problem(resumed.args.exp_name, resumed.args.env_id):  # (as reconciled)
        raise RunError(problem)
    done, total = payload["iteration"], payload["args"]["num_iterations"]
    steps = f"{payload['global_step']:,} steps"
    if done >= total and not after_training_due(folder, vars(resumed.args)):
        line = (
            f"run {resumed.name} has already finished ({done} iterations, {steps}): nothing to do"
        )
        raise RunError("already finished", 0, line)
    left = "the steps after training" if done >= total else f"iteration {done} of {total}"
    print(f"resuming {resumed.name} from {file} ({left}, {steps})")
    return resumed
