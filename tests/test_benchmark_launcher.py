"""The benchmark launcher (`python -m cleanrl_utils.benchmark`) without a SLURM cluster.

Local pool tests start the launcher as users do, with tiny `python -c` runs; template tests
render into a temporary folder and submit to a fake `sbatch` that records its calls.
tests/test_slurm.py runs real smoke-size training runs through the launcher on a real cluster.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from logs_testing import read_scalars

from cleanrl_utils import benchmark
from cleanrl_utils.console import errors

REPO = Path(__file__).resolve().parent.parent
GPU_TEMPLATE = REPO / "benchmark" / "cleanrl_1gpu.slurm_template"
CPU_TEMPLATE = REPO / "benchmark" / "cleanrl_cpu.slurm_template"


def python_command(code: str) -> str:
    """A `--command` that runs `code`; the launcher appends `--env-id ENV --seed N`, so the code
    sees them as sys.argv[-3] (env id) and sys.argv[-1] (seed)."""
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}"


def launch(*args: str, cwd: Path, env: dict | None = None, timeout: float = 30):
    return subprocess.run(
        [sys.executable, "-m", "cleanrl_utils.benchmark", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def write_script(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


@pytest.fixture
def fake_sbatch(tmp_path, monkeypatch):
    """A `sbatch` on the PATH that records each call (arguments, WANDB_TAGS) and prints job 42."""
    calls = tmp_path / "sbatch_calls.txt"
    write_script(
        tmp_path / "bin" / "sbatch",
        f'#!/bin/sh\necho "$* WANDB_TAGS=$WANDB_TAGS" >> {calls}\necho "42;testcluster"\n',
    )
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.chdir(tmp_path)
    return calls


# ---------------------------------------------------------------------------------------------
# Local pool


def test_each_run_logs_to_a_file_named_after_its_env_and_seed(tmp_path):
    # (ALE's own spelling of an id has a `/`: the log's name spells it `+`)
    code = "import sys; print('ran with', *sys.argv[1:])"
    result = launch(
        "--env-ids", "Pong-v5", "ALE/Breakout-v5", "--num-seeds", "2", "--workers", "2",
        "--log-dir", "logs", "--command", python_command(code), "--no-auto-tag",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    logs = sorted(p.name for p in (tmp_path / "logs").iterdir())
    assert logs == [
        "ALE+Breakout-v5__seed1.log",
        "ALE+Breakout-v5__seed2.log",
        "Pong-v5__seed1.log",
        "Pong-v5__seed2.log",
    ]
    for env_id in ("Pong-v5", "ALE/Breakout-v5"):
        for seed in (1, 2):
            log = (tmp_path / "logs" / benchmark.log_name(env_id, seed)).read_text()
            assert log == f"ran with --env-id {env_id} --seed {seed}\n"
            assert f"[start]  {env_id} seed {seed}" in result.stdout
            assert f"[done]   {env_id} seed {seed}" in result.stdout
            # seconds as cleanrl_utils.console.progress.format_seconds writes them: `1.2s`
            done = rf"\[done\]   {re.escape(env_id)} seed {seed} in \d+\.\ds  \("
            assert re.search(done, result.stdout), result.stdout
    assert "4 of 4 runs succeeded" in result.stdout
    assert re.search(r"ok      Pong-v5 seed 1: exit code 0, after \d+\.\ds  log: ", result.stdout)


def test_failed_run_is_reported_with_exit_code_and_log_tail_after_the_others_finish(tmp_path):
    # seed 1 fails at once; seeds 2 and 3 take a while and leave a file behind when they finish
    code = (
        "import sys, time, pathlib\n"
        "seed = sys.argv[-1]\n"
        "if seed == '1':\n"
        "    print('first line'); print('something went wrong', file=sys.stderr); sys.exit(3)\n"
        "time.sleep(1.0)\n"
        "pathlib.Path(f'finished_{seed}').touch()\n"
    )
    result = launch(
        "--env-ids", "Pong-v5", "--num-seeds", "3", "--workers", "2", "--log-dir", "logs",
        "--command", python_command(code), "--no-auto-tag",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    assert (tmp_path / "finished_2").exists() and (tmp_path / "finished_3").exists()
    failure = re.search(
        r"\[FAILED\] Pong-v5 seed 1: exit code 3.*\n((?:    \|.*\n)+)", result.stdout
    )
    assert failure, result.stdout
    assert failure.group(1) == "    | first line\n    | something went wrong\n"
    # the failure is reported when it happens, before the runs still going have finished
    assert result.stdout.index("[FAILED]") < result.stdout.index("[done]   Pong-v5 seed 2")
    assert "2 of 3 runs succeeded" in result.stdout
    assert re.search(
        r"FAILED  Pong-v5 seed 1: exit code 3.*log: logs/Pong-v5__seed1.log", result.stdout
    )
    assert "report of this sweep: python -m cleanrl_utils.report" in result.stdout  # 2 did


def test_a_program_that_does_not_exist_is_a_failed_run(tmp_path):
    result = launch(
        "--env-ids", "Pong-v5", "--num-seeds", "1", "--workers", "1",
        "--command", "no-such-program --flag", "--no-auto-tag", "--log-dir", "logs",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 1
    assert "[FAILED] Pong-v5 seed 1: exit code 127" in result.stdout
    assert "No such file or directory: 'no-such-program'" in result.stdout
    # no run succeeded: no report command to print, only that there is nothing to report
    assert "report of this sweep" not in result.stdout
    assert "no run of this sweep has finished: nothing to report yet" in result.stdout


def test_workers_zero_only_prints_the_commands(tmp_path):
    code = "import pathlib; pathlib.Path('ran').touch()"
    command = python_command(code)
    result = launch(
        "--env-ids", "Pong-v5", "Breakout-v5", "--num-seeds", "2", "--start-seed", "5",
        "--workers", "0", "--command", command, "--no-auto-tag",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    expected = [
        f"{command} --env-id {env_id} --seed {seed}"
        for env_id in ("Pong-v5", "Breakout-v5")
        for seed in (5, 6)
    ]
    printed = result.stdout.split("======= commands to run:\n")[1].splitlines()[:4]
    assert printed == expected
    assert list(tmp_path.iterdir()) == []  # nothing ran, no log folder


@pytest.mark.parametrize(
    "flags, expected",
    [
        (["--workers", "2"], max(1, benchmark.usable_cpus() // 2)),
        (["--workers", "1", "--threads-per-run", "3"], 3),
    ],
)
def test_each_run_gets_a_limited_number_of_threads(tmp_path, flags, expected):
    names = benchmark.THREAD_VARIABLES
    code = f"import os; print(*(os.environ.get(n) for n in {names!r}))"
    env = {**os.environ, "OMP_NUM_THREADS": "64"}  # the launcher's own setting is not inherited
    result = launch(
        "--env-ids", "Pong-v5", "--num-seeds", "1", *flags, "--log-dir", "logs",
        "--command", python_command(code), "--no-auto-tag",
        cwd=tmp_path, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    log = (tmp_path / "logs" / "Pong-v5__seed1.log").read_text()
    assert log.split() == [str(expected)] * len(names)
    assert f"threads per run: {expected}" in result.stdout


def process_is_gone(pid: int) -> bool:
    """Gone or a zombie (killed, waiting for a parent that may not reap it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def all_gone(pids, timeout: float = 5.0) -> bool:
    """Whether every pid is gone within `timeout` s: a SIGKILLed group's members die (become
    zombies) a moment after its leader has been reaped, not at the same instant."""
    deadline = time.monotonic() + timeout
    while not all(process_is_gone(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def run_with_a_child(ignore_sigterm: bool = False) -> str:
    """A run that starts a child process of its own, writes both pids to `pids_{seed}`, then
    sleeps; with `ignore_sigterm` both ignore SIGTERM."""
    return (
        "import os, signal, subprocess, sys, time\n"
        f"if {ignore_sigterm}:\n"
        "    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # inherited by the child\n"
        f"child = subprocess.Popen([{sys.executable!r}, '-c', 'import time; time.sleep(60)'])\n"
        "with open(f'pids_{sys.argv[-1]}.tmp', 'w') as f:\n"
        "    f.write(f'{os.getpid()} {child.pid}')\n"
        "os.rename(f'pids_{sys.argv[-1]}.tmp', f'pids_{sys.argv[-1]}')\n"
        "time.sleep(60)\n"
    )


def wait_for_pids(path: Path, process: subprocess.Popen | None = None) -> list[int]:
    deadline = time.monotonic() + 20
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} not written"
        assert process is None or process.poll() is None, process.stdout.read()
        time.sleep(0.1)
    return [int(pid) for pid in path.read_text().split()]


def test_ctrl_c_stops_every_run_and_its_children_and_names_the_unfinished_runs(tmp_path):
    code = run_with_a_child()
    launcher = subprocess.Popen(
        [
            sys.executable, "-m", "cleanrl_utils.benchmark", "--env-ids", "Pong-v5",
            "--num-seeds", "3", "--workers", "2", "--log-dir", "logs",
            "--command", python_command(code), "--no-auto-tag",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    try:
        pids = [
            pid for seed in (1, 2) for pid in wait_for_pids(tmp_path / f"pids_{seed}", launcher)
        ]
        launcher.send_signal(signal.SIGINT)
        output, _ = launcher.communicate(timeout=benchmark.STOP_GRACE_S + 10)
    finally:  # on a failed assertion, still stop the runs through the launcher
        if launcher.poll() is None:
            launcher.send_signal(signal.SIGINT)
            launcher.wait(timeout=benchmark.STOP_GRACE_S + 10)
    assert launcher.returncode == errors.INTERRUPTED, output
    assert all_gone(pids), output
    assert "interrupted: stopping 2 running runs" in output
    assert "3 runs did not finish:" in output
    for line in ("Pong-v5 seed 1 (stopped)", "Pong-v5 seed 2 (stopped)", "Pong-v5 seed 3 (not started)"):  # fmt: skip
        assert f"  {line}" in output
    assert not (tmp_path / "logs" / "Pong-v5__seed3.log").exists()


def test_a_run_that_ignores_sigterm_is_killed_with_its_children(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    command = python_command(run_with_a_child(ignore_sigterm=True)) + " --env-id Pong-v5 --seed 1"
    job = benchmark.Job("Pong-v5", 1, command)
    running = benchmark.start_job(job, tmp_path / "run.log", dict(os.environ))
    try:
        pids = wait_for_pids(tmp_path / "pids_1")
    finally:
        benchmark.stop_jobs([running], grace_s=0.5)
    assert running.process.returncode == -signal.SIGKILL
    assert all_gone(pids)


def test_run_pool_returns_each_commands_exit_code_in_order(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = "import os, sys; print(os.environ['OMP_NUM_THREADS']); sys.exit(int(sys.argv[1]))"
    commands = [f"{python_command(code)} {n}" for n in (0, 3, 0)] + ["no-such-program"]
    pool = benchmark.run_pool(commands, workers=2, log_dir="logs", threads_per_run=3)
    assert pool.exit_codes == [0, 3, 0, 127]
    assert not pool.interrupted and pool.exit_code == 1
    assert [(tmp_path / "logs" / f"run{i}.log").read_text() for i in (1, 2, 3)] == ["3\n"] * 3
    with pytest.raises(ValueError, match="the same log: run1.log"):
        benchmark.run_pool(["true", benchmark.Job.named("true", "a", "run1.log")], 1, "logs")


def test_run_pool_stops_its_runs_on_ctrl_c_and_returns_their_exit_codes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # like the training scripts, each run answers SIGTERM with a checkpoint and exit code 75
    code = (
        "import pathlib, signal, sys, time\n"
        "seed = sys.argv[-1]\n"
        "def stop(signum, frame):\n"
        "    pathlib.Path(f'checkpoint_{seed}').touch(); sys.exit(75)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        "pathlib.Path(f'started_{seed}').touch()\n"
        "time.sleep(60)\n"
    )
    jobs = [benchmark.Job("Pong-v5", s, f"{python_command(code)} --seed {s}") for s in (1, 2, 3)]

    def ctrl_c_once_two_runs_started():
        deadline = time.monotonic() + 20
        while not all((tmp_path / f"started_{s}").exists() for s in (1, 2)):
            if time.monotonic() > deadline:
                break  # the assertions below say what went wrong
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)  # reaches the main thread, where the pool runs

    before = signal.getsignal(signal.SIGINT)
    threading.Thread(target=ctrl_c_once_two_runs_started, daemon=True).start()
    pool = benchmark.run_pool(jobs, workers=2, log_dir="logs")
    assert pool.interrupted and pool.exit_code == errors.INTERRUPTED
    assert pool.exit_codes == [75, 75, None]
    assert sorted(p.name for p in tmp_path.glob("checkpoint_*")) == ["checkpoint_1", "checkpoint_2"]
    assert signal.getsignal(signal.SIGINT) is before  # the caller's Ctrl-C handler is back


def folder_writer(run_dir: Path) -> int | None:
    """The PID of the process that holds `run_dir`'s lock (a run training in it), None if none."""
    from cleanrl_utils.run.folder_guard import lock_holder

    holder = lock_holder(os.stat(run_dir).st_ino)
    return int(holder) if holder.isdigit() else None


def test_a_launcher_killed_outright_leaves_no_run_training_and_its_command_continues_the_sweep(
    tmp_path,
):
    """`kill -9` of the launcher: its running run finds it gone at the end of its iteration,
    writes a checkpoint and stops (config.json records the stop); the same command again skips
    the finished run, continues the stopped one in its folder and starts the one never started,
    each seed's run once, every step logged once, and ends with the report of this sweep."""
    (tmp_path / "slow").touch()  # (tests/sweep_run.py: an iteration takes 0.1 s while it exists)
    command = [
        sys.executable, "-m", "cleanrl_utils.benchmark", "--env-ids", "Breakout-v5",
        "--num-seeds", "3", "--workers", "1", "--log-dir", "logs", "--no-auto-tag",
        "--command", f"{shlex.quote(sys.executable)} {REPO / 'tests' / 'sweep_run.py'}",
    ]  # fmt: skip
    seed_2_log = tmp_path / "logs" / "Breakout-v5__seed2.log"
    launcher = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, text=True)
    orphan = None
    try:
        deadline = time.monotonic() + 60
        while "logging to" not in (seed_2_log.read_text() if seed_2_log.exists() else ""):
            assert time.monotonic() < deadline and launcher.poll() is None, "seed 2 never started"
            time.sleep(0.05)
        (run_2,) = tmp_path.glob("runs/*__2__*")
        orphan = folder_writer(run_2)
        launcher.kill()  # kill -9: it can stop nothing
        launcher.communicate()
        deadline = time.monotonic() + 15
        while folder_writer(run_2) is not None:  # the run ends by itself: its launcher is gone
            assert time.monotonic() < deadline, "the run trains on without its launcher"
            time.sleep(0.05)
        orphan = None
    finally:
        if orphan is not None:
            os.kill(orphan, signal.SIGKILL)
    stopped = json.loads((run_2 / "config.json").read_text())
    assert stopped["stopped"]["signal"] == "SIGTERM" and stopped["finished"] is None
    assert "is gone: writing a checkpoint and stopping" in seed_2_log.read_text()
    assert "exiting with code 75" in seed_2_log.read_text()
    sweep = stopped["sweep"]
    assert sweep.startswith("sweep_run-")

    (tmp_path / "slow").unlink()
    again = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stdout + again.stderr
    (run_1,) = tmp_path.glob("runs/*__1__*")
    assert f"[skip]   Breakout-v5 seed 1: finished in runs/{run_1.name}/" in again.stdout
    assert "2 of 2 runs succeeded" in again.stdout
    assert again.stdout.splitlines()[-1] == (
        f"report of this sweep: python -m cleanrl_utils.report runs --sweep {sweep}"
    )
    log = seed_2_log.read_text()  # (both lives of the run, the first one's kept)
    assert log.index("is gone: writing a checkpoint") < log.index(f"sweep {sweep}: its run")
    assert f"sweep {sweep}: its run {run_2.name} goes on" in log
    runs = sorted(tmp_path.glob("runs/[!.]*"))  # (not the claims of its seeds: `.claims/`)
    assert [r.name.split("__")[2] for r in runs] == ["1", "2", "3"]  # each seed once
    for run in runs:
        config = json.loads((run / "config.json").read_text())
        assert config["sweep"] == sweep and config["finished"], run
    steps = [step for step, _ in read_scalars(run_2, files=2)["charts/SPS"]]
    assert steps == list(range(8, 8 * 400 + 1, 8))  # every iteration once, across the stop


def test_a_sweep_whose_runs_were_made_with_other_flags_is_refused_not_skipped(
    tmp_path, monkeypatch, capsys
):
    """`--sweep S` whose finished run was made with `--learning-rate 0.00025`, given a command
    with `--learning-rate 1e-3`: one error line naming the flag and the run, exit code 2, nothing
    run (it said "every run of this sweep has finished", exit 0, though no run with the new
    flags exists); the same values spelled otherwise (`2.5e-4`, `--no-anneal-lr`, flags the
    launcher gives or a resume may change) are the sweep's run: skipped as finished."""
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "runs" / "Pong-v5__x__1__1700000000"
    run.mkdir(parents=True)
    recorded = {"exp_name": "x", "env_id": "Pong-v5", "seed": 1, "learning_rate": 0.00025,
                "anneal_lr": False, "cuda": True, "num_minibatches": 4}  # fmt: skip
    config = {"sweep": "S", "args": recorded, "finished": {"global_step": 8, "time": 1.0}}
    (run / "config.json").write_text(json.dumps(config))
    base = ["--sweep", "S", "--env-ids", "Pong-v5", "--num-seeds", "1", "--workers", "1"]
    command = "python x.py --exp-name x --learning-rate 1e-3 --num-minibatches=4"
    with pytest.raises(SystemExit) as exit_info:
        benchmark.main([*base, "--no-auto-tag", "--log-dir", "logs", "--command", command])
    out = capsys.readouterr()
    assert exit_info.value.code == errors.USAGE_ERROR, out
    assert out.err == (
        f"error: sweep S: its run runs/{run.name} was made with other arguments than this "
        "command gives: --learning-rate 0.001 (the run: 0.00025). A sweep is one experiment: "
        "give this command another --sweep (or none: one derived from the command)\n"
    )
    assert "[skip]" not in out.out and not (tmp_path / "logs").exists()

    same = "python x.py --learning-rate 2.5e-4 --no-anneal-lr --no-cuda --seed 9 --env-id Pong-v5"
    assert benchmark.main([*base, "--no-auto-tag", "--log-dir", "logs", "--command", same]) == 0
    out = capsys.readouterr()
    assert f"[skip]   Pong-v5 seed 1: finished in runs/{run.name}/" in out.out, out


def test_two_launchers_of_one_command_at_once_train_each_seed_once(tmp_path):
    """Two launchers of the same command at once (one sweep): the second one's run of the seed
    the first is training says so in one line and ends with exit code 0 (the first one's run
    goes on); one run folder for the seed. (It was: a second run of the seed, trained beside the
    first, in one sweep: only a folder with a checkpoint was found.)"""
    (tmp_path / "slow").touch()  # (tests/sweep_run.py: seed 2 takes 40 s while it exists)
    command = [
        sys.executable, "-m", "cleanrl_utils.benchmark", "--env-ids", "Breakout-v5",
        "--start-seed", "2", "--num-seeds", "1", "--workers", "1", "--no-auto-tag",
        "--command", f"{shlex.quote(sys.executable)} {REPO / 'tests' / 'sweep_run.py'}",
    ]  # fmt: skip
    first_log = tmp_path / "first" / "Breakout-v5__seed2.log"
    first = subprocess.Popen(
        [*command, "--log-dir", "first"], cwd=tmp_path, stdout=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 60
        while "logging to" not in (first_log.read_text() if first_log.exists() else ""):
            assert time.monotonic() < deadline and first.poll() is None, "seed 2 never started"
            time.sleep(0.05)
        (run,) = tmp_path.glob("runs/*__2__*")
        second = subprocess.run(
            [*command, "--log-dir", "second"],
            cwd=tmp_path, capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        assert first.poll() is None and folder_writer(run) is not None
    finally:
        first.send_signal(signal.SIGTERM)  # (its run: a checkpoint, then exit code 75)
        first.wait(timeout=60)
    assert second.returncode == 0, second.stdout + second.stderr
    log = (tmp_path / "second" / "Breakout-v5__seed2.log").read_text()
    sweep = json.loads((run / "config.json").read_text())["sweep"]
    assert log.strip().splitlines() == [
        f"sweep {sweep}: Breakout-v5 seed 2 is run now by process {first_holder(run)} (another "
        "launcher's): not run twice; that run goes on there"
    ], log
    assert list(tmp_path.glob("runs/*__2__*")) == [run]


def first_holder(run: Path) -> str:
    """The PID the sweep's claim file of `run`'s env id and seed names."""
    (claim,) = (run.parent / ".claims").glob("*__Breakout-v5__2.lock")
    return claim.read_text().split()[0]


# ---------------------------------------------------------------------------------------------
# Autotag


def test_autotag_adds_the_git_tag_to_the_wandb_tags_already_set(tmp_path):
    write_script(tmp_path / "bin" / "git", "#!/bin/sh\necho v1.2-3-gabc1234\n")
    env = {
        **os.environ,
        "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "WANDB_TAGS": "mine",
    }
    code = "import os; print(os.environ['WANDB_TAGS'])"
    result = launch(
        "--env-ids", "Pong-v5", "--num-seeds", "1", "--workers", "1", "--log-dir", "logs",
        "--command", python_command(code),
        cwd=tmp_path, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "autotag: WANDB_TAGS=mine,v1.2-3-gabc1234" in result.stdout
    assert (tmp_path / "logs" / "Pong-v5__seed1.log").read_text() == "mine,v1.2-3-gabc1234\n"


def test_runs_go_ahead_without_git(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {**os.environ, "PATH": str(empty)}  # no git (and the command needs nothing else)
    env.pop("WANDB_TAGS", None)
    code = "import os; print(os.environ.get('WANDB_TAGS'))"
    result = launch(
        "--env-ids", "Pong-v5", "--num-seeds", "1", "--workers", "1", "--log-dir", "logs",
        "--command", python_command(code),
        cwd=tmp_path, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "autotag: no git tag found" in result.stdout
    assert (tmp_path / "logs" / "Pong-v5__seed1.log").read_text() == "None\n"


def test_autotag_does_not_wait_on_a_hanging_git(tmp_path, monkeypatch):
    write_script(tmp_path / "bin" / "git", f"#!/bin/sh\nexec {shutil.which('sleep')} 30\n")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    start = time.monotonic()
    assert benchmark.autotag(cwd=str(tmp_path), timeout_s=0.5) is None
    assert 0.5 <= time.monotonic() - start < 5


# ---------------------------------------------------------------------------------------------
# SLURM templates


def render(template: Path, *flags: str) -> str:
    """Render `template` with --workers 0 (nothing submitted); returns the .slurm file's text."""
    assert benchmark.main(["--slurm-template-path", str(template), "--no-auto-tag", *flags]) == 0
    (path,) = Path("slurm").glob("*.slurm")
    return path.read_text()


def test_every_placeholder_is_rendered(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    names = list(benchmark.template_values(benchmark.Args(), benchmark.make_jobs(benchmark.Args())))
    template = tmp_path / "all.slurm_template"
    template.write_text("".join(f"{name}=[{{{{{name}}}}}]\n" for name in names))
    text = render(
        template,
        "--env-ids", "Pong-v5", "Breakout-v5", "--num-seeds", "2", "--start-seed", "5",
        "--command", "python train.py --track", "--slurm-gpus-per-task", "2",
        "--slurm-ntasks", "2", "--slurm-total-cpus", "10", "--slurm-nodes", "3",
    )  # fmt: skip
    assert text == (
        "array=[0-3]\n"  # no `%` limit with --workers 0: sbatch rejects `%0`
        "env_ids=[(Pong-v5 Breakout-v5)]\n"
        "seeds=[(5 6)]\n"
        "len_seeds=[2]\n"
        "command=[python train.py --track]\n"
        "gpus_per_task=[2]\n"
        "cpus_per_gpu=[3]\n"  # ceil(10 / (2 * 2))
        "cpus_per_task=[5]\n"  # ceil(10 / 2)
        "ntasks=[2]\n"
        "nodes=[#SBATCH --nodes=3]\n"
        "thread_limits=[export OMP_NUM_THREADS=5 MKL_NUM_THREADS=5 OPENBLAS_NUM_THREADS=5 "
        "PJRT_NPROC=5]\n"
        # the script, and a digest of the command, env ids and seeds: the same for the same
        # command (a new version of the launcher must find the runs an older one started)
        "sweep=[train-37b390c3]\n"
    )


@pytest.mark.parametrize("template", [GPU_TEMPLATE, CPU_TEMPLATE], ids=["gpu", "cpu"])
def test_shipped_templates_give_each_array_task_its_env_and_seed(tmp_path, monkeypatch, template):
    monkeypatch.chdir(tmp_path)
    args = ["--env-ids", "Pong-v5", "Breakout-v5", "BeamRider-v5", "--num-seeds", "2"]
    command = "python cleanrl/ppo_atari_envpool.py --track"
    text = render(
        template, *args, "--command", command,
        "--slurm-gpus-per-task", "1", "--slurm-total-cpus", "4", "--slurm-nodes", "1",
    )  # fmt: skip
    assert "{{" not in text and "}}" not in text
    assert "#SBATCH --array=0-5\n" in text and "#SBATCH --nodes=1\n" in text
    # run the script as each array task would, with an `srun` that prints what it would run
    write_script(tmp_path / "bin" / "srun", '#!/bin/sh\necho "srun $*"\n')
    script = next(Path("slurm").glob("*.slurm"))
    jobs = benchmark.make_jobs(benchmark.Args(env_ids=args[1:4], num_seeds=2, command=command))
    for task, job in enumerate(jobs):
        env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"}
        env["SLURM_ARRAY_TASK_ID"] = str(task)
        out = subprocess.run(["bash", script], env=env, capture_output=True, text=True, check=True)
        assert f"srun {job.command}\n" in out.stdout


def test_submitting_prints_the_job_id_and_how_to_watch_it(fake_sbatch, capsys):
    code = benchmark.main(
        [
            "--slurm-template-path", str(CPU_TEMPLATE), "--env-ids", "Pong-v5", "--num-seeds", "3",
            "--workers", "2", "--slurm-total-cpus", "2", "--no-auto-tag",
        ]
    )  # fmt: skip
    assert code == 0
    (path,) = Path("slurm").glob("*.slurm")
    assert "#SBATCH --array=0-2%2\n" in path.read_text()
    assert fake_sbatch.read_text().split()[:2] == ["--parsable", str(path)]
    assert Path("slurm/logs").is_dir()  # the templates' --output folder, which sbatch needs
    out = capsys.readouterr().out
    assert "submitted job 42: 3 array tasks, at most 2 at a time" in out
    assert "squeue --jobs 42" in out and "scancel 42" in out
    assert "slurm/logs/cleanrl_42_*.out" in out


def expect_usage_error(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exit_info:
        benchmark.main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    return err


def test_unknown_placeholder_is_an_error_before_anything_is_submitted(fake_sbatch, capsys):
    template = Path("typo.slurm_template")
    template.write_text("#SBATCH --gpus-per-task={{gpus}}\n#SBATCH --array={{array}}\n")
    err = expect_usage_error(
        ["--slurm-template-path", str(template), "--workers", "2", "--no-auto-tag"], capsys
    )
    assert "unknown placeholder(s) {{gpus}}" in err and "{{gpus_per_task}}" in err
    assert not fake_sbatch.exists()
    assert not Path("slurm").exists()


def test_missing_template_is_an_error(fake_sbatch, capsys):
    err = expect_usage_error(
        ["--slurm-template-path", "nowhere.slurm_template", "--workers", "2"], capsys
    )
    assert "cannot read the SLURM template nowhere.slurm_template" in err
    assert not fake_sbatch.exists()


def test_placeholder_whose_flag_is_missing_is_an_error(fake_sbatch, capsys):
    err = expect_usage_error(
        ["--slurm-template-path", str(GPU_TEMPLATE), "--slurm-total-cpus", "4", "--workers", "1"],
        capsys,
    )
    assert "uses {{gpus_per_task}}: pass --slurm-gpus-per-task" in err
    assert not fake_sbatch.exists()


def path_without_sbatch(tmp_path: Path) -> str:
    """A PATH with `python` (this interpreter) and nothing else: no SLURM client."""
    write_script(tmp_path / "bin" / "python", f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    return str(tmp_path / "bin")


def test_without_slurm_it_says_so_and_prints_the_local_command_of_the_same_sweep(tmp_path):
    cwd = tmp_path / "work"
    cwd.mkdir()
    env = {**os.environ, "PATH": path_without_sbatch(tmp_path)}
    code = "import pathlib, sys; pathlib.Path(f'ran_{sys.argv[-3]}_{sys.argv[-1]}').touch()"
    result = launch(
        "--slurm-template-path", str(CPU_TEMPLATE), "--slurm-total-cpus", "4",
        "--env-ids", "Pong-v5", "Breakout-v5", "--num-seeds", "2", "--start-seed", "5",
        "--workers", "2", "--command", python_command(code), "--no-auto-tag",
        cwd=cwd, env=env,
    )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    error, command, *rest = result.stderr.splitlines()
    assert error == (
        "error: no SLURM here (sbatch is not on the PATH), nothing submitted; to run the same 4 "
        "runs on this machine (set --workers to the runs it can hold at once):"
    )
    assert rest == [] and command.startswith("  python -m cleanrl_utils.benchmark ")
    assert "--slurm" not in command
    assert list(cwd.iterdir()) == []  # no slurm/ folder, no rendered file
    # the printed command, as a user pastes it into a shell, runs the same four runs here
    local = subprocess.run(
        [shutil.which("bash"), "-c", command], cwd=cwd, env=env, capture_output=True, text=True
    )
    assert local.returncode == 0, local.stdout + local.stderr
    assert "4 of 4 runs succeeded" in local.stdout
    ran = sorted(p.name for p in cwd.iterdir() if p.name.startswith("ran_"))
    assert ran == [f"ran_{e}_{s}" for e in ("Breakout-v5", "Pong-v5") for s in (5, 6)]


def test_ppo_sh_without_slurm_stops_at_once_and_leaves_nothing(tmp_path):
    (tmp_path / "benchmark").symlink_to(REPO / "benchmark")
    env = {**os.environ, "PATH": path_without_sbatch(tmp_path)}
    result = subprocess.run(
        [shutil.which("bash"), "benchmark/ppo.sh"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    error, command = result.stderr.splitlines()
    assert error.startswith("error: no SLURM here (sbatch is not on the PATH)")
    assert command == (
        "  python -m cleanrl_utils.benchmark --env-ids PongNoFrameskip-v4 "
        "BeamRiderNoFrameskip-v4 BreakoutNoFrameskip-v4 "
        "--command 'python cleanrl/ppo_atari.py --track --capture_video' --num-seeds 3 --workers 9"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["benchmark", "bin"]  # no slurm/


def test_help_names_the_command_as_it_is_typed(tmp_path):
    result = launch("--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: python -m cleanrl_utils.benchmark [-h]"), result.stdout


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--num-seeds", "0"], "--num-seeds must be positive, got 0"),
        (["--workers", "-1"], "--workers must not be negative, got -1"),
        (["--env-ids", "Pong-v5", "Pong-v5"], "--env-ids lists Pong-v5 more than once"),
        (["--command", "python 'unclosed"], "cannot be parsed"),
        (["--slurm-total-cpus", "0"], "--slurm-total-cpus must be positive, got 0"),
        (["--env-ids", "../escaped"], "--env-ids: '../escaped' can never be an env id"),
        (["--env-ids", "/tmp/x"], "--env-ids: '/tmp/x' can never be an env id"),
        (["--env-ids", "atari7"], "unknown game set 'atari7' (the sets: atari5, atari3-val,"),
    ],
)
def test_bad_input_is_one_error_line_and_exit_code_2(tmp_path, monkeypatch, capsys, flags, message):
    monkeypatch.chdir(tmp_path)
    assert message in expect_usage_error(["--workers", "1", *flags, "--no-auto-tag"], capsys)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "script, style",
    [("cleanrl/ppo_atari_envpool.py", "{}-v5"), ("cleanrl/ppo_atari_lstm.py", "{}NoFrameskip-v4")],
)
def test_a_game_set_runs_its_games_in_the_scripts_id_style(
    tmp_path, monkeypatch, capsys, script, style
):
    # in-process, printing only: a set mixed with a plain id, the expansion printed on one line
    monkeypatch.chdir(tmp_path)
    command = f"python {script} --total-timesteps 10"
    argv = ["--env-ids", "Pong-v5", "atari5", "--num-seeds", "1", "--workers", "0"]
    assert benchmark.main([*argv, "--command", command, "--no-auto-tag"]) == 0
    out = capsys.readouterr().out
    games = ["BattleZone", "DoubleDunk", "NameThisGame", "Phoenix", "Qbert"]
    ids = [style.format(game) for game in games]
    assert f"--env-ids atari5: {' '.join(ids)}\n" in out
    printed = out.split("======= commands to run:\n")[1].splitlines()[:6]
    assert printed == [f"{command} --env-id {e} --seed 1" for e in ["Pong-v5", *ids]]
    assert list(tmp_path.iterdir()) == []


def test_log_names_spell_every_id_as_one_file_of_its_own():
    ids = ["ALE/Breakout-v5", "ALE+Breakout-v5", "ALE%2FBreakout-v5", "..", ".hidden", "a/b/c"]
    names = [benchmark.log_name(env_id, 1) for env_id in ids]
    assert names[0] == "ALE+Breakout-v5__seed1.log" and len(set(names)) == len(names)
    assert all("/" not in n and not n.startswith(".") for n in names)


@pytest.mark.parametrize("where", ["a file", "a folder under a file"])
def test_a_log_dir_that_cannot_take_files_is_one_line_and_exit_code_74(
    tmp_path, monkeypatch, capsys, where
):
    monkeypatch.chdir(tmp_path)
    Path("taken").write_text("not a folder")
    log_dir = "taken" if where == "a file" else "taken/logs"
    with pytest.raises(SystemExit) as exit_info:
        benchmark.main(
            ["--workers", "1", "--log-dir", log_dir, "--command", "true", "--no-auto-tag"]
        )
    out = capsys.readouterr()
    assert exit_info.value.code == 74 and out.out == "", out
    assert (
        out.err
        == f"error: --log-dir {log_dir}: cannot write there: taken is a file, not a folder\n"
    )


def test_ppo_sh_submits_one_array_per_script(tmp_path, fake_sbatch):
    # run benchmark/ppo.sh as written, from a folder that looks like the repository root
    (tmp_path / "benchmark").symlink_to(REPO / "benchmark")
    write_script(tmp_path / "bin" / "git", "#!/bin/sh\necho v9.9\n")
    write_script(tmp_path / "bin" / "python", f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    subprocess.run(["bash", "benchmark/ppo.sh"], check=True, capture_output=True, timeout=60)
    calls = fake_sbatch.read_text().splitlines()
    assert len(calls) == 6
    assert all(call.endswith("WANDB_TAGS=v9.9") for call in calls)
    arrays, commands = [], []
    for call in calls:
        text = Path(call.split()[1]).read_text()
        arrays.append(re.search(r"--array=(\S+)", text).group(1))
        commands.append(re.search(r"^srun python (\S+)", text, re.MULTILINE).group(1))
    assert arrays == ["0-8%9", "0-8%9", "0-8%9", "0-170%9", "0-8%9", "0-8%9"]  # 3 or 57 x 3
    assert commands == [
        "cleanrl/ppo_atari.py",
        "cleanrl/ppo_atari_lstm.py",
        "cleanrl/ppo_atari_envpool.py",
        "cleanrl/ppo_atari_envpool_xla_jax.py",
        "cleanrl/ppo_atari_envpool_xla_jax_scan.py",
        "cleanrl/ppo_atari_ale_vector.py",
    ]


@pytest.mark.parametrize(
    "command, processes",
    [
        ("python cleanrl/ppo_atari_envpool.py", 1),
        ("torchrun --standalone --nproc_per_node=2 cleanrl/ppo_atari_envpool_multigpu.py", 2),
        ("/opt/venv/bin/torchrun --nproc-per-node 4 cleanrl/ppo_atari_multigpu.py", 4),
        ("python -m torch.distributed.run --nproc_per_node 3 x.py", 3),
        ("python -m cleanrl_utils.torchrun --standalone --nproc-per-node=2 x.py", 2),
        ("python x.py --nproc-per-node 3", 1),  # a flag of the script, not of torchrun
    ],
)
def test_a_commands_processes_are_torchruns_nproc_per_node(command, processes):
    assert benchmark.Job.named(command, "a", "a.log").processes == processes


def test_the_pool_counts_a_torchrun_runs_processes_against_workers(tmp_path, monkeypatch):
    """In a pool of 3 workers, a 2-process run and a 1-process run start together (2 + 1 <= 3);
    the next 2-process run waits for the first (2 + 2 > 3). The pool keeps the jobs' order. Each
    process writes when it started and ended."""
    monkeypatch.chdir(tmp_path)
    torchrun = Path(sys.executable).with_name("torchrun")
    spans = tmp_path / "spans"
    rank = (
        "import sys, time; t = time.time(); time.sleep(1.5)\n"
        f"open({str(spans)!r}, 'a').write(f'{{sys.argv[1]}} {{t}} {{time.time()}}\\n')"
    )

    def job(name, nproc):
        command = f"{shlex.quote(sys.executable)} -c {shlex.quote(rank)} {name}"
        if nproc > 1:
            command = f"{torchrun} --standalone --nproc-per-node {nproc} --no-python {command}"
        return benchmark.Job.named(command, name, f"{name}.log")

    pool = benchmark.run_pool([job("a", 2), job("c", 1), job("b", 2)], workers=3, log_dir="logs")
    assert pool.exit_codes == [0, 0, 0]
    by_run: dict[str, list[tuple[float, float]]] = {}
    for line in spans.read_text().splitlines():
        name, start, end = line.split()
        by_run.setdefault(name, []).append((float(start), float(end)))
    assert sorted((name, len(s)) for name, s in by_run.items()) == [("a", 2), ("b", 2), ("c", 1)]
    a_end = max(end for _, end in by_run["a"])
    assert min(start for start, _ in by_run["b"]) >= a_end  # b waited for a's two processes
    assert by_run["c"][0][0] < a_end  # c ran beside a (2 + 1 <= 3)
