"""Hostile input and failing disks (docs/faults.md): nothing escapes the runs folder, nothing is
lost, no traceback.

The quick tests run in this process: the command line (tyro's errors, numbers, names), the names'
round trip through `--resume auto`'s parser, the lock, the report's checksums, and fuzzing with
Hypothesis (a bounded number of examples): mutations of a real checkpoint and a real model file,
each a resume or a model read that either works or says one `error:` line, exit code 2, and leaves
the run folder byte for byte as it was. The slow ones use real processes: two resumes of one
folder, kill -9, and a full disk (a small tmpfs, mounted when the tests run as root).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import importlib
import io
import json
import os
import re
import runpy
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scripts_testing import REPO_ROOT, describe, finish_script, run_dirs, run_script, start_script

from cleanrl_utils.checks.args import SEED_LIMIT, memory_problem, parse_args
from cleanrl_utils.console.errors import DISK_EXIT, entry_point
from cleanrl_utils.files.run_names import (
    ENV_ID,
    EXP_NAME,
    RunName,
    file_env_id,
    find_runs,
    name_problem,
)
from cleanrl_utils.files.scripts import load_script
from cleanrl_utils.files.state_file import list_checkpoints, read_checkpoint, write_checkpoint
from cleanrl_utils.run.folder_guard import (
    lock_holder,
    lock_run_folder,
    release_run_folder,
    run_writer,
)

# The module's fixtures start its runs once: its tests share one xdist worker.
pytestmark = pytest.mark.xdist_group(__name__)

SCRIPT = REPO_ROOT / "cleanrl" / "ppo_atari_envpool.py"
TINY = ["--env-id", "Breakout-v5", "--num-envs", "2", "--num-steps", "16"]
TINY += ["--num-minibatches", "2", "--update-epochs", "2"]
BATCH = 32
FUZZ = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,  # the same examples on every run: CI fails only on what the code does
    database=None,  # (nothing written into the repository)
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
envpool_script = load_script("ppo_atari_envpool")


def tiny(iterations: int, every: int) -> list[str]:
    return [*TINY, "--total-timesteps", str(iterations * BATCH), "--checkpoint-every", str(every)]


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under `folder` (hidden ones too), by its SHA-256."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@contextlib.contextmanager
def own_signal_handlers():
    """`Run.start` installs stop-signal handlers: the test process gets its own back."""
    signals = (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT)
    saved = {signum: signal.getsignal(signum) for signum in signals}
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)


def exits(fn, *args) -> tuple[int | None, str]:
    """Calls `fn(*args)` as a script's entry point would: the exit code it ends with (None when
    it returned) and its stderr."""
    err = io.StringIO()
    code = None
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            with entry_point():
                fn(*args)
        except SystemExit as exc:
            code = exc.code
    return code, err.getvalue()


# -- the command line (classes 1 and 7) ------------------------------------------------------


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--total-timesteps", "1e30"], ["--total-timesteps", "'1e30'", "whole number"]),
        (["--anneal-lr", "false"], ["--anneal-lr", "--no-anneal-lr"]),
        (["--num-env", "3"], ["--num-env", "--num-envs"]),
        (["--learning-rate", "nan"], ["--learning-rate", "nan"]),
        (["--ent-coef", "inf"], ["--ent-coef", "inf"]),
        (["--vf-coef", "-inf"], ["--vf-coef", "-inf"]),
        (["--seed", "-1"], ["--seed", "-1"]),
        (["--seed", str(2**32)], ["--seed", str(2**32)]),
        (["--max-episode-steps", "-5"], ["--max-episode-steps", "-5"]),
        (["--max-episode-steps", "0"], ["--max-episode-steps", "0"]),
        (["--num-steps", str(2**70)], ["--num-steps", "too large"]),
    ],
)
def test_a_bad_command_line_is_one_error_line_and_exit_code_2(argv, words, capsys):
    with pytest.raises(SystemExit) as exit_info, entry_point():
        parse_args(envpool_script.Args, argv)
    assert exit_info.value.code == 2
    out, err = capsys.readouterr()
    line = one_error_line(err)
    for word in words:
        assert word in line, line
    assert out == ""


@pytest.mark.parametrize(
    "module, argv, words",
    [
        ("cleanrl_utils.benchmark.cli", ["--num-seed", "3"], ["--num-seed", "--num-seeds?"]),
        ("cleanrl_utils.tuner.cli", ["--num-trails", "3"], ["--num-trails", "--num-trials?"]),
        ("cleanrl_utils.report.cli", ["--last-m", "5"], ["--last-m", "--last-n?"]),
        ("cleanrl_utils.convert", ["model.pt", "--bogus"], ["--bogus"]),
        ("cleanrl_utils.huggingface.push", ["runs/x", "--hf-entiy", "me"], ["--hf-entiy"]),
    ],
)
def test_the_tools_say_a_bad_flag_in_one_line(module, argv, words, capsys):
    """The launcher, the tuner, the report, the converter and the Hub push read their command
    lines as the scripts do: one `error:` line (with the flag meant), exit code 2, no box."""
    main = importlib.import_module(module).main
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    for word in words:
        assert word in lines[0], (word, lines[0])


def test_help_is_still_tyros(capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse_args(envpool_script.Args, ["--help"])
    assert exit_info.value.code == 0
    assert "--no-anneal-lr" in capsys.readouterr().out


@pytest.mark.parametrize("script", sorted(p.stem for p in (REPO_ROOT / "cleanrl").glob("ppo_*.py")))
def test_every_script_parses_its_command_line_the_same_way(script, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [script, "--total-timesteps", "1e30"])
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_path(str(REPO_ROOT / "cleanrl" / f"{script}.py"), run_name="__main__")
    assert exit_info.value.code == 2
    assert "--total-timesteps: '1e30'" in one_error_line(capsys.readouterr().err)
    assert not list(tmp_path.iterdir())


def test_rollout_buffers_that_cannot_fit_are_refused_with_the_figure(capsys):
    args = envpool_script.Args(num_envs=100_000, num_steps=128, total_timesteps=10**10)
    from cleanrl_utils.checks.args import check_ppo_args

    with pytest.raises(SystemExit) as exit_info, entry_point():
        check_ppo_args(args)
    assert exit_info.value.code == 2
    line = one_error_line(capsys.readouterr().err)
    assert "--num-envs 100000" in line and "GB" in line and "available" in line
    assert memory_problem(8, 128, 10**9) is None  # the defaults: 29 MB
    # 1000 x 128 transitions of 28,264 bytes, and 1000 envs of 229,824 bytes
    assert "about 3.8 GB, more than the 1.0 GB" in memory_problem(1000, 128, 10**9)


@pytest.mark.parametrize(
    "flags, words",
    [
        (["--exp-name", "../outside"], ["--exp-name", "'../outside'"]),
        (["--exp-name", "a/b"], ["--exp-name"]),
        (["--exp-name", ""], ["--exp-name", "''"]),
        (["--exp-name", "x" * 300], ["--exp-name", "100"]),
        (["--exp-name", ".hidden"], ["--exp-name"]),
        (["--env-id", "../../etc"], ["--env-id"]),
        (["--exp-name", "../x", "--resume", "auto"], ["--exp-name"]),
    ],
)
def test_a_name_that_cannot_name_a_run_folder_is_refused_before_anything_is_written(
    flags, words, tmp_path, capsys
):
    from cleanrl_utils.run import Run

    args = parse_args(envpool_script.Args, flags)
    with pytest.raises(SystemExit) as exit_info, entry_point():
        Run(args, str(SCRIPT), runs_dir=str(tmp_path / "runs"), argv=flags)
    assert exit_info.value.code == 2
    line = one_error_line(capsys.readouterr().err)
    assert all(word in line for word in words), line
    assert not list(tmp_path.iterdir())


FLAG_VALUES = {
    "--exp-name": st.text(min_size=0, max_size=120),
    "--env-id": st.sampled_from(["Breakout-v5", "Pong-v5", "../Pong-v5", "Pong__v5", "a/b"]),
    "--seed": st.integers(-(2**40), 2**40).map(str),
    "--learning-rate": st.sampled_from(["nan", "inf", "-inf", "1e-3", "0", "x", "1e400"]),
    "--num-envs": st.integers(-3, 10**6).map(str),
    "--num-steps": st.sampled_from(["16", "0", "1e3", "10000000000"]),
    "--max-episode-steps": st.integers(-(10**3), 10**6).map(str),
    "--total-timesteps": st.sampled_from(["64", "1e30", "-1", "1000000"]),
    "--anneal-lr": st.sampled_from(["", "false", "True"]),
}


@FUZZ
@given(
    flags=st.dictionaries(st.sampled_from(sorted(FLAG_VALUES)), st.just(None), max_size=5).flatmap(
        lambda keys: st.fixed_dictionaries({k: FLAG_VALUES[k] for k in keys})
    )
)
def test_random_command_lines_give_a_run_inside_runs_or_one_error_line(flags, tmp_path):
    """Everything a script does before its first write into the run folder, in-process: parse,
    name the run, check; then where the run's folder would be."""
    from cleanrl_utils.checks.args import check_ppo_args
    from cleanrl_utils.run import Run

    argv = [part for k, v in flags.items() for part in ([k, v] if v != "" else [k])]
    cwd = tmp_path / f"cwd{abs(hash(tuple(argv)))}"
    cwd.mkdir()
    runs = cwd / "runs"

    def prepare():
        with entry_point():  # (the script's `if __name__ == "__main__":` block)
            run = Run(parse_args(envpool_script.Args, argv), str(SCRIPT), str(runs), argv=argv)
            check_ppo_args(run.args)
        return run

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            run = prepare()
        except SystemExit as exc:
            assert exc.code == 2, (argv, err.getvalue())
            one_error_line(err.getvalue())
            run = None
    assert "Traceback" not in err.getvalue()
    assert not list(cwd.iterdir()), argv  # nothing written before the run starts
    if run is not None:
        assert run.dir.resolve().parent == runs.resolve(), argv
        assert RunName.parse(run.dir.name) is not None


# -- names round-trip through `--resume auto`'s parser (class 2) ----------------------------


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(
    st.from_regex(EXP_NAME, fullmatch=True),
    st.from_regex(ENV_ID, fullmatch=True),
    st.integers(0, SEED_LIMIT - 1),
    st.integers(0, 2**40),
)
def test_every_allowed_name_is_read_back_from_its_folder_name(exp_name, env_id, seed, start):
    name = RunName(env_id, exp_name, seed, start)
    assert name.problem() is None
    assert RunName.parse(str(name)) == name
    assert RunName.checked(str(name)) == name


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.text(alphabet="ab_-./\\ \n*[]?", max_size=12), st.text(alphabet="aB_-.v5/", max_size=8))
def test_a_name_is_refused_or_read_back(exp_name, env_id):
    """Over an alphabet with separators and glob characters: each name is refused, or a folder
    of it is found again by `--resume auto` (`find_runs`) and parsed back to its parts."""
    if name_problem(exp_name, env_id) is not None:
        return
    assert "/" not in exp_name and not exp_name.startswith(".")
    name = RunName(file_env_id(env_id), exp_name, 3, 1000)
    assert "/" not in str(name) and RunName.parse(str(name)) == name


def test_an_env_id_with_a_namespace_names_one_folder_and_is_found_again(tmp_path):
    """`ALE/Pong-v5` (ALE's spelling, which the ALE vector script takes): its run folder is
    `ALE+Pong-v5__...`, one folder under `runs/`; config.json keeps the id as given, and
    `--resume auto` (`find_runs`) finds the folder by the id as given."""
    from cleanrl_utils.run import Run

    argv = ["--env-id", "ALE/Pong-v5", "--exp-name", "ns"]
    args = parse_args(envpool_script.Args, argv)
    with Run(args, str(SCRIPT), runs_dir=str(tmp_path / "runs"), argv=argv) as run:
        run.start()
        assert run.dir.parent == tmp_path / "runs" and run.name.startswith("ALE+Pong-v5__ns__1__")
        assert json.loads((run.dir / "config.json").read_text())["args"]["env_id"] == "ALE/Pong-v5"
        assert find_runs(tmp_path / "runs", "ALE/Pong-v5", "ns", 1) == [run.dir]
        assert find_runs(tmp_path / "runs", "Pong-v5", "ns", 1) == []  # another id, other runs


def test_resume_auto_finds_runs_of_every_allowed_alphabet(tmp_path):
    """A folder for each kind of character the alphabet allows where it is hard to parse back."""
    names = ["a__b", "x_", "_x", "1__2__3", "a.b-c", "-", "exp__7__9"]
    for i, exp_name in enumerate(names):
        name = RunName("Pong-v5", exp_name, 7, 1000 + i)
        (tmp_path / str(name)).mkdir()
    for i, exp_name in enumerate(names):
        assert [p.name for p in find_runs(tmp_path, "Pong-v5", exp_name, 7)] == [
            str(RunName("Pong-v5", exp_name, 7, 1000 + i))
        ]


# -- the lock (class 4) ----------------------------------------------------------------------


def test_a_second_writer_of_a_run_folder_is_refused_naming_the_first(tmp_path, capsys):
    fd = lock_run_folder(tmp_path / "run")
    try:
        with pytest.raises(SystemExit) as exit_info, entry_point():
            lock_run_folder(tmp_path / "run")  # a second open file: flock refuses it too
        assert exit_info.value.code == 2
        line = one_error_line(capsys.readouterr().err)
        assert f"in use by process {os.getpid()}" in line and str(tmp_path / "run") in line
    finally:
        release_run_folder(fd)
    release_run_folder(lock_run_folder(tmp_path / "run"))  # free again


# -- the report's checksums (class 8) --------------------------------------------------------


def test_records_failing_their_checksum_are_dropped_and_counted(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from torch.utils.tensorboard import SummaryWriter

    from cleanrl_utils.report.events import read_event_file

    writer = SummaryWriter(str(tmp_path))
    for step in range(1, 6):
        writer.add_scalar("charts/episodic_return", float(step), step * 100)
    writer.close()
    (file,) = tmp_path.glob("events.out.tfevents.*")
    raw = bytearray(file.read_bytes())
    # the third return's float (1e6 once damaged, as in the issue): its record's CRC fails
    at = raw.index(b"\x15" + struct.pack("<f", 3.0)) + 1  # (simple_value: field 2, a float)
    raw[at : at + 4] = struct.pack("<f", 1e6)
    file.write_bytes(bytes(raw))
    data = read_event_file(file, ("charts/episodic_return",))
    assert [v for _, _, v in data.scalars["charts/episodic_return"]] == [1.0, 2.0, 4.0, 5.0]
    assert data.bad_records == 1 and data.problem is None
    accumulator = EventAccumulator(str(tmp_path))  # TensorBoard's reader drops it too
    accumulator.Reload()  # (and stops reading the file there)
    assert [e.value for e in accumulator.Scalars("charts/episodic_return")][:2] == [1, 2]
    assert 1e6 not in [e.value for e in accumulator.Scalars("charts/episodic_return")]
    # a damaged length: the records after it cannot be framed, and are not read
    offsets, pos = [], 0
    while pos < len(raw):
        offsets.append(pos)
        pos += 12 + struct.unpack_from("<Q", raw, pos)[0] + 4
    raw[offsets[-2] + 9] ^= 0x10  # the length's CRC of the last record but one
    file.write_bytes(bytes(raw))
    data = read_event_file(file, ("charts/episodic_return",))
    assert data.problem == f"corrupt record at byte {offsets[-2]} (its length fails its checksum)"
    assert data.records == len(offsets) - 2 - 1  # (the record dropped above is not counted)


def test_records_are_read_whatever_their_wall_time(tmp_path):
    """Another tool's valid records, with wall times of its own (1000 + i, or none at all), are
    read: a file is corrupt only where its framing or checksums say so."""
    from torch.utils.tensorboard import SummaryWriter

    from cleanrl_utils.report.events import read_event_file

    writer = SummaryWriter(str(tmp_path))
    for i in range(5):
        writer.add_scalar("charts/episodic_return", float(i), 100 * i, walltime=1000 + i)
    writer.add_scalar("charts/episodic_return", 9.0, 600, walltime=0)  # (0 is not written)
    writer.close()
    (file,) = tmp_path.glob("events.out.tfevents.*")
    data = read_event_file(file, ("charts/episodic_return",))
    assert data.problem is None and data.bad_records == 0
    assert data.scalars["charts/episodic_return"] == [
        *[(100 * i, 1000.0 + i, float(i)) for i in range(5)],
        (600, 0.0, 9.0),
    ]
    assert data.first_wall == 1000.0 and data.records == 7  # (the file's version record first)


@pytest.mark.parametrize("length", [0, 1, 8, 4095, 4096, 4097, 3 * 4096 + 5])
def test_checksums_are_tensorboards_across_chunks(length):
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c as expected

    from cleanrl_utils.report.events import masked_crc32c

    data = np.random.default_rng(length).integers(0, 256, 20_000, dtype=np.uint8)
    starts = np.array([0, 7, 20_000 - length], dtype=np.int64)
    got = masked_crc32c(data, starts, np.full(3, length, dtype=np.int64))
    assert got.tolist() == [expected(data[s : s + length].tobytes()) for s in starts]


def test_a_record_of_megabytes_is_read_in_seconds(tmp_path):
    """A long text summary took 3 s a megabyte (a NumPy step per byte): 40 MB, minutes."""
    from torch.utils.tensorboard import SummaryWriter

    from cleanrl_utils.report.events import read_event_file

    writer = SummaryWriter(str(tmp_path))
    writer.add_scalar("charts/episodic_return", 1.0, 100)
    writer.add_text("notes", "x" * 8_000_000, 100)
    writer.add_scalar("charts/episodic_return", 2.0, 200)
    writer.close()
    (file,) = tmp_path.glob("events.out.tfevents.*")
    started = time.perf_counter()
    data = read_event_file(file, ("charts/episodic_return",))
    assert time.perf_counter() - started < 5
    assert [v for _, _, v in data.scalars["charts/episodic_return"]] == [1.0, 2.0]
    assert data.problem is None and data.bad_records == 0


def test_the_report_notes_dropped_records(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    from cleanrl_utils.report import load_run

    run_dir = tmp_path / "Pong-v5__ppo_atari_envpool__1__1000"
    writer = SummaryWriter(str(run_dir))
    for step in range(1, 6):
        writer.add_scalar("charts/episodic_return", float(step), step * 100)
        writer.add_scalar("charts/SPS", 1000.0, step * 100)
    writer.close()
    (file,) = run_dir.glob("events.out.tfevents.*")
    raw = bytearray(file.read_bytes())
    at = raw.index(b"\x15" + struct.pack("<f", 4.0)) + 1  # (simple_value: field 2, a float)
    raw[at : at + 4] = struct.pack("<f", 1e6)
    file.write_bytes(bytes(raw))
    run = load_run(run_dir, running_minutes=10, now=time.time())
    assert list(run.returns) == [1.0, 2.0, 3.0, 5.0]
    assert any("1 record failed the checksum, dropped" in p for p in run.problems), run.problems


# -- a training that diverges ---------------------------------------------------------------


@pytest.mark.slow
def test_a_run_that_diverges_stops_in_one_line_keeping_its_last_finite_checkpoint(tmp_path):
    """JAX trains on with NaN parameters (it raises nothing): the run stops at the end of the
    iteration that made them, naming it, exit code 1; its checkpoints hold finite values only,
    and the newest is the iteration before."""
    script = REPO_ROOT / "cleanrl" / "ppo_atari_envpool_xla_jax.py"
    flags = ["--num-envs", "8", "--num-steps", "6", "--update-epochs", "1"]
    flags += ["--num-minibatches", "1", "--total-timesteps", "240", "--checkpoint-every", "1"]
    done = run_script([*flags, "--learning-rate", "1e6"], tmp_path, script=script)
    assert done.returncode == 1, describe(done)
    last = done.stderr.strip().splitlines()[-1]
    assert "Traceback" not in done.stderr, describe(done)
    assert re.match(r"error: iteration (\d+): the training diverged: agent_state holds NaN", last)
    iteration = int(re.match(r"error: iteration (\d+)", last)[1])
    (run_dir,) = run_dirs(tmp_path)
    checkpoints = list_checkpoints(run_dir)
    assert iteration > 1 and checkpoints[0].name == f"checkpoint_{iteration - 1:07d}.ckpt"
    newest = checkpoints[0].relative_to(tmp_path)  # (as the run names it: from the cwd)
    assert f"the newest checkpoint, of iteration {iteration - 1} ({newest}), holds" in last

    def arrays(tree):
        if isinstance(tree, np.ndarray):
            yield tree
        elif isinstance(tree, (list, tuple)):
            yield from (a for item in tree for a in arrays(item))
        elif isinstance(tree, dict):
            yield from (a for item in tree.values() for a in arrays(item))

    for checkpoint in checkpoints:
        state = read_checkpoint(checkpoint)["state"]
        floats = [a for a in arrays(state) if np.issubdtype(a.dtype, np.floating)]
        assert floats and all(np.isfinite(a).all() for a in floats), checkpoint


# -- a real run's checkpoint and model file, mutated (classes 5 and 6) -----------------------


@pytest.fixture(scope="module", autouse=True)
def real_run_started(request, tmp_path_factory):
    """`real_run`'s process, started with the module's first test when a selected test needs
    it, so that the command-line tests before those overlap it."""
    module_items = [
        i for i in request.session.items if getattr(i, "module", None) is request.module
    ]
    if not any(
        "real_run" in item.fixturenames or item.originalname == TWO_RESUMES_TEST
        for item in module_items
    ):
        yield None
        return
    cwd = tmp_path_factory.mktemp("real")
    args = [*tiny(4, 2), "--save-model", "--eval-episodes", "1", "--max-episode-steps", "200"]
    proc = start_script(args, cwd, script=SCRIPT)
    yield cwd, proc
    if proc.poll() is None:  # (the tests that needed it did not wait for it)
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def real_run(real_run_started):
    """A real 4-iteration run of the EnvPool script, checkpoints at iterations 2 and 4, and
    its model file (--save-model, 1 evaluation game)."""
    return finished_real_run(real_run_started)


REAL_RUN_DONE = threading.Lock()


def finished_real_run(real_run_started) -> Path:
    """`real_run`'s folder once its process has ended, for the tests and for a test body in a
    background thread alike (the process is waited for once)."""
    cwd, proc = real_run_started
    with REAL_RUN_DONE:
        if not hasattr(proc, "done"):
            proc.done = finish_script(proc)
    assert proc.done.returncode == 0, describe(proc.done)
    (run_dir,) = run_dirs(cwd)
    return run_dir


def unfinished_copy(real_run: Path, target: Path) -> Path:
    """The run folder as it was after its checkpoint of iteration 2 (the later one and the
    model file left out)."""
    run_dir = target / "runs" / real_run.name
    run_dir.mkdir(parents=True)
    for file in real_run.iterdir():
        if file.name not in ("checkpoint_0000004.ckpt",) and file.suffix != ".cleanrl_model":
            shutil.copy2(file, run_dir / file.name)
    return run_dir


@pytest.fixture(scope="module")
def checkpoint_payload(real_run):
    """The decoded checkpoint of iteration 2, read once (mutations copy only what they change)."""
    return read_checkpoint(real_run / "checkpoint_0000002.ckpt")


def resume_in_process(run_dir: Path) -> tuple[int | None, str]:
    """What the script does up to its first write of a resumed run: parse, resume, check,
    start, build its objects, restore; the exit code (None: it would train) and stderr."""
    from cleanrl_utils.checks.args import check_ppo_args
    from cleanrl_utils.run import Run

    script = envpool_script
    runs = []

    def resume():
        argv = ["--resume", str(run_dir)]
        run = Run(parse_args(script.Args, argv), str(SCRIPT), str(run_dir.parent), argv=argv)
        args = run.args
        runs.append(run)
        check_ppo_args(args)
        args.batch_size = args.num_envs * args.num_steps
        args.minibatch_size = args.batch_size // args.num_minibatches
        args.num_iterations = args.total_timesteps // args.batch_size
        run.start()
        from types import SimpleNamespace

        import gymnasium as gym
        import torch

        agent = script.Agent(SimpleNamespace(single_action_space=gym.spaces.Discrete(4)))
        optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
        from collections import deque

        run.restore({"agent": agent, "optimizer": optimizer, "avg_returns": deque(maxlen=20)})

    with own_signal_handlers():
        code, err = exits(resume)
    for run in runs:  # (a process would end here and the kernel close all this)
        if run.writer is not None:
            run.writer.close()
        release_run_folder(run.lock_fd)
    return code, err


def paths_of(tree, prefix=()):
    """Every (path, leaf) of a decoded checkpoint's nested dicts, lists and tuples."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from paths_of(value, (*prefix, key))
    elif isinstance(tree, (list, tuple)) and len(tree) < 8:
        for i, value in enumerate(tree):
            yield from paths_of(value, (*prefix, i))
    else:
        yield prefix, tree


def replaced(tree, path, value):
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(tree, tuple):
        return tuple(replaced(v, rest, value) if i == head else v for i, v in enumerate(tree))
    tree = copy.copy(tree)
    tree[head] = replaced(tree[head], rest, value)
    return tree


def mutations(leaf):
    """What a hostile edit puts where `leaf` was: another type, another shape or dtype, a
    number out of range."""
    import torch

    options = [None, "x", -1, 10**30, float("nan"), [1, 2], {"k": 1}, True]
    if isinstance(leaf, (np.ndarray, torch.Tensor)):
        array = np.asarray(leaf)
        options += [
            array.astype(np.float64),
            array.reshape(-1)[: max(array.size - 1, 0)],
            np.zeros((*array.shape, 2), array.dtype),
            array.astype(np.int32),
        ]
    return options


@pytest.mark.slow
def test_the_checks_pass_an_untouched_checkpoint(real_run, tmp_path):
    """(Else the fuzzing below would pass with checks that refuse everything.)"""
    run_dir = unfinished_copy(real_run, tmp_path)
    assert resume_in_process(run_dir) == (None, "")
    assert len(list(run_dir.glob("events.out.tfevents.*"))) == 2  # the resumed run's, opened


@pytest.mark.slow
@settings(FUZZ, max_examples=12)
@given(data=st.data())
def test_a_mutated_checkpoint_resumes_or_fails_in_one_line_leaving_the_folder_unchanged(
    real_run, checkpoint_payload, tmp_path_factory, data
):
    target = tmp_path_factory.mktemp("mutated")
    run_dir = unfinished_copy(real_run, target)
    checkpoint = run_dir / "checkpoint_0000002.ckpt"
    payload = checkpoint_payload  # (`replaced` copies the dicts on the way to what it changes)
    leaves = list(paths_of(payload))
    path, leaf = data.draw(st.sampled_from(leaves), label="path")
    mutation = data.draw(st.sampled_from(mutations(leaf)), label="mutation")
    if data.draw(st.booleans(), label="delete instead") and len(path) > 1:
        parent = payload
        for key in path[:-1]:
            parent = parent[key]
        if isinstance(parent, dict):
            parent = {k: v for k, v in parent.items() if k != path[-1]}
            payload = replaced(payload, path[:-1], parent)
    else:
        payload = replaced(payload, path, mutation)
    write_checkpoint(checkpoint, payload)  # a valid checksum over the edited payload
    before = snapshot(run_dir)
    code, err = resume_in_process(run_dir)
    assert "Traceback" not in err
    if code is None:
        return  # a harmless edit: the run would train on
    assert code in (0, 2), err
    if code == 2:
        assert [line for line in err.splitlines() if line.startswith("error:")], err
        assert len([line for line in err.splitlines() if line.startswith("error:")]) == 1, err
    assert snapshot(run_dir) == before  # byte for byte, file by file


@pytest.mark.slow
@settings(max_examples=15, deadline=None, derandomize=True, database=None)
@given(at=st.integers(0, 10**9), bit=st.integers(0, 7))
def test_a_bit_flipped_checkpoint_is_refused_leaving_the_folder_unchanged(
    real_run, tmp_path_factory, at, bit
):
    run_dir = unfinished_copy(real_run, tmp_path_factory.mktemp("flipped"))
    checkpoint = run_dir / "checkpoint_0000002.ckpt"
    raw = bytearray(checkpoint.read_bytes())
    raw[at % len(raw)] ^= 1 << bit
    checkpoint.write_bytes(bytes(raw))
    before = snapshot(run_dir)
    code, err = resume_in_process(run_dir)
    assert code == 2 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1].startswith("error: --resume"), err
    assert snapshot(run_dir) == before


@pytest.mark.slow
def test_a_checkpoint_with_a_tensor_of_another_shape_fails_before_the_folder_changes(
    real_run, tmp_path
):
    """The issue's case, in a real process: a valid checksum, one tensor of another shape."""
    run_dir = unfinished_copy(real_run, tmp_path)
    checkpoint = run_dir / "checkpoint_0000002.ckpt"
    payload = read_checkpoint(checkpoint)
    weights = payload["state"]["agent"]
    weights["critic.weight"] = weights["critic.weight"][:, :100]
    write_checkpoint(checkpoint, payload)
    before = snapshot(run_dir)
    done = run_script(["--resume", str(run_dir)], tmp_path, script=SCRIPT)
    assert done.returncode == 2, describe(done)
    line = one_error_line(done.stderr)
    assert "critic.weight" in line and "[1, 100]" in line and "[1, 512]" in line, line
    assert snapshot(run_dir) == before


def model_file(real_run: Path) -> Path:
    (model,) = real_run.glob("*.cleanrl_model")
    return model


def with_metadata(raw: bytes, edit) -> bytes:
    """The safetensors file with its `cleanrl` metadata's arguments edited by `edit(args)`."""
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + length])
    info = json.loads(header["__metadata__"]["cleanrl"])
    edit(info)
    header["__metadata__"]["cleanrl"] = json.dumps(info)
    encoded = json.dumps(header).encode()
    encoded += b" " * (-len(encoded) % 8)
    return struct.pack("<Q", len(encoded)) + encoded + raw[8 + length :]


def load_in_process(path: Path) -> tuple[int | None, str]:
    """What the evaluator and `enjoy` do before playing: read the file, check its script and
    arguments, build the agent with its weights."""
    from cleanrl_utils.evals import torch_agent
    from cleanrl_utils.files.model_file import model_script, read_model

    def load():
        model = read_model(path)
        torch_agent(model, model_script(model))

    return exits(load)


@pytest.mark.slow
def test_a_non_numeric_time_limit_in_a_model_file_is_one_error_line(real_run, tmp_path):
    path = tmp_path / "model.cleanrl_model"
    path.write_bytes(model_file(real_run).read_bytes())
    assert load_in_process(path) == (None, "")
    for key, value, words in [
        ("max_episode_steps", "soon", ["--max-episode-steps", "'soon'"]),
        ("max_episode_steps", -1, ["--max-episode-steps", "-1"]),
        ("seed", 2**40, ["--seed"]),
        ("env_id", "../Breakout-v5", ["--env-id"]),
        ("exp_name", "a/b", ["--exp-name"]),
        ("learning_rate", float("nan"), ["--learning-rate", "nan"]),
    ]:
        edit = {key: value}
        path.write_bytes(
            with_metadata(model_file(real_run).read_bytes(), lambda i: i["args"].update(edit))  # noqa: B023
        )
        code, err = load_in_process(path)
        assert code == 2, (key, value, err)
        line = one_error_line(err)
        assert str(path) in line and all(w in line for w in words), line


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=5,
)


@pytest.mark.slow
@FUZZ
@given(
    st.sampled_from(
        ["env_id", "seed", "max_episode_steps", "exp_name", "num_envs", "gamma", "script"]
    ),
    JSON_VALUES,
)
def test_a_model_file_with_random_metadata_loads_or_fails_in_one_line(
    real_run, tmp_path_factory, key, value
):
    path = tmp_path_factory.mktemp("model") / "model.cleanrl_model"

    def edit(info):
        if key == "script":
            info["script"] = value
        else:
            info["args"][key] = value

    path.write_bytes(with_metadata(model_file(real_run).read_bytes(), edit))
    code, err = load_in_process(path)
    assert "Traceback" not in err
    if code is not None:
        assert code == 2
        one_error_line(err)


# -- real processes: two resumes, kill -9, temp files, a full disk (classes 3 and 4) ---------


def wait_for(predicate, timeout: float = 300, every: float = 0.02) -> None:
    end = time.time() + timeout
    while not predicate():
        assert time.time() < end, "timed out"
        time.sleep(every)


TWO_RESUMES_TEST = "test_two_resumes_of_one_folder_one_is_refused_and_kill_9_leaves_no_stale_lock"


@pytest.mark.slow
def test_two_resumes_of_one_folder_one_is_refused_and_kill_9_leaves_no_stale_lock(
    real_run_started, tmp_path
):
    run_dir = unfinished_copy(finished_real_run(real_run_started), tmp_path)
    first = start_script(["--resume", str(run_dir)], tmp_path, script=SCRIPT)
    try:
        inode = run_dir.stat().st_ino
        wait_for(lambda: first.poll() is not None or lock_holder(inode) == str(first.pid))
        first.send_signal(signal.SIGSTOP)  # it holds the lock, and holds still
        second = run_script(["--resume", str(run_dir)], tmp_path, script=SCRIPT)
        assert second.returncode == 2, describe(second)
        line = one_error_line(second.stderr)
        assert f"in use by process {first.pid}" in line and str(run_dir) in line
        first.kill()  # kill -9, lock held, maybe mid-write
    finally:
        first.kill()
        finish_script(first)
    # a write cut short by kill -9 leaves its temporary file (atomic_write_bytes's name for it)
    leftover = run_dir / ".checkpoint_0000004.ckpt.k9dead.tmp"
    leftover.write_bytes((run_dir / "checkpoint_0000002.ckpt").read_bytes()[:4096])
    third = run_script(["--resume", str(run_dir)], tmp_path, script=SCRIPT)
    assert third.returncode == 0, describe(third)
    assert f"removed {leftover}" in third.stderr
    assert not list(run_dir.glob(".*.tmp"))
    assert read_checkpoint(run_dir / "checkpoint_0000004.ckpt")["iteration"] == 4


@pytest.fixture
def small_disk(tmp_path):
    """A tmpfs of 30 MiB (one checkpoint of the tiny runs: 20 MB) mounted for the test."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a full disk is a tmpfs mounted by the test: needs root (and mount)")
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=30m", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def assert_whole_records(event_file: Path) -> None:
    from cleanrl_utils.report.events import read_event_file

    data = read_event_file(event_file, ("charts/SPS",))
    assert data.problem is None and data.bad_records == 0 and data.records > 0


@pytest.mark.slow
def test_a_full_disk_at_a_checkpoint_is_one_line_and_keeps_the_previous_one(small_disk):
    done = run_script(tiny(4, 2), small_disk, script=SCRIPT)
    assert done.returncode == DISK_EXIT, describe(done)
    (run_dir,) = run_dirs(small_disk)
    line = one_error_line("\n".join(x for x in done.stderr.splitlines() if x.startswith("error")))
    assert [x for x in done.stderr.splitlines() if "Traceback" in x] == []
    assert f"run folder runs/{run_dir.name}/" in line and "checkpoint of iteration 4" in line
    assert "No space left on device" in line or "ENOSPC" in line, line
    assert "checkpoint_0000002.ckpt, is intact" in line and "--resume" in line
    assert read_checkpoint(run_dir / "checkpoint_0000002.ckpt")["iteration"] == 2
    assert [p.name for p in list_checkpoints(run_dir)] == ["checkpoint_0000002.ckpt"]
    assert not list(run_dir.glob(".*.tmp"))
    (event_file,) = run_dir.glob("events.out.tfevents.*")
    assert_whole_records(event_file)


def test_torch_event_writer_still_has_what_the_guard_wraps(tmp_path):
    # faults.guard_event_records reads private attributes of torch's event writer: a torch that
    # renames them fails here (AttributeError), and one that stops writing through the wrapped
    # record writer fails on the error that /dev/full gives not being kept
    from cleanrl_utils.report.events import read_event_file

    writer = run_writer(tmp_path, None, opened=True)
    writer.add_scalar("charts/SPS", 1.0, 1)
    writer.flush()
    assert writer.error is None and writer.event_file.parent == tmp_path
    data = read_event_file(writer.event_file, ("charts/SPS",))
    assert data.problem is None and [(s, v) for s, _, v in data.scalars["charts/SPS"]] == [(1, 1.0)]
    records = writer.guard.records
    with open("/dev/full", "wb", buffering=0) as full:
        writer.guard.records = full
        writer.add_scalar("charts/SPS", 2.0, 2)
        writer.flush()
        assert isinstance(writer.error, OSError)
    writer.guard.records = records
    writer.close()


@pytest.mark.slow
def test_a_full_disk_under_tensorboard_is_one_line_and_cuts_the_event_file_to_whole_records(
    small_disk,
):
    # checkpoints at iterations 10 and 20: the 10 iterations between log more than a page
    # (~600 bytes each), so flushing them needs a new page of the tmpfs, which it has not
    proc = start_script(tiny(20, 10), small_disk, script=SCRIPT)
    try:
        wait_for(
            lambda: proc.poll() is not None or list(small_disk.glob("runs/*/checkpoint_*.ckpt"))
        )
        proc.send_signal(signal.SIGSTOP)  # in iteration 11: fill the disk to its last byte
        with contextlib.suppress(OSError), open(small_disk / "filler", "wb", buffering=0) as f:
            while True:
                f.write(b"\0" * 4096)
    finally:
        proc.send_signal(signal.SIGCONT)
        done = finish_script(proc)
    assert done.returncode == DISK_EXIT, describe(done)
    (run_dir,) = run_dirs(small_disk)
    errors = [x for x in done.stderr.splitlines() if x.startswith("error")]
    assert len(errors) == 1 and "Traceback" not in done.stderr, describe(done)
    assert "TensorBoard event file" in errors[0] and f"folder runs/{run_dir.name}/" in errors[0]
    assert "checkpoint_0000010.ckpt, is intact" in errors[0]
    assert read_checkpoint(run_dir / "checkpoint_0000010.ckpt")["iteration"] == 10
    assert not list(run_dir.glob(".*.tmp"))
    (event_file,) = run_dir.glob("events.out.tfevents.*")
    assert_whole_records(event_file)
