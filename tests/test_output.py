"""Losing stdout or stderr never loses a run (`cleanrl_utils.console.output`): a `| tee` that the
terminal's Ctrl-C ends first, a `| head` that has read enough, a log on a full disk, `2>&-`, a
terminal closed with its ssh session. The stream is lost, said where it can be, and recorded in
the run's config.json; the run trains on, or stops with its checkpoint and its exit code. Real
processes, real pipes, /dev/full (ENOSPC without a full disk) and a real pseudo-terminal hung up."""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import select
import shlex
import signal
import struct
import subprocess
import sys
import termios
import time

import pytest
from scripts_testing import PPO_ATARI_ENVPOOL, REPO_ROOT, run_dirs, script_env

from cleanrl_utils.console.errors import CHECKPOINT_EXIT, INTERRUPTED
from cleanrl_utils.console.output import SafeStream
from cleanrl_utils.files.state_file import list_checkpoints, read_checkpoint

TINY = ["--num-envs", "2", "--num-steps", "16", "--num-minibatches", "2", "--update-epochs", "1"]
LONG = [*TINY, "--total-timesteps", "32000", "--checkpoint-every", "0"]  # stopped long before


def test_a_stream_whose_reader_is_gone_is_lost_not_the_writer():
    """EPIPE, ENOSPC, a closed file, none at all: `write` and `flush` never raise; the stream
    says why it is lost, and what comes after goes to its fallback."""
    read, write = os.pipe()
    os.close(read)  # (`| head` has read enough)
    fallback = SafeStream(io.StringIO(), "stdout")
    gone = SafeStream(open(write, "w", buffering=1), "stderr")  # noqa: SIM115
    gone.fallback = fallback
    gone.write("received SIGTERM: finishing this iteration\n")
    gone.flush()
    assert gone.lost == "broken pipe (EPIPE)" and not gone.isatty()
    gone.write("SIGTERM: checkpoint of iteration 3 written\n")
    assert fallback.getvalue() == (
        "received SIGTERM: finishing this iteration\nSIGTERM: checkpoint of iteration 3 written\n"
    )
    disk = SafeStream(open("/dev/full", "w"), "stdout")  # noqa: SIM115 (a disk that is full)
    disk.write("logging to runs/RUN/\n")
    disk.flush()
    assert disk.lost == "no space left on device (ENOSPC)"
    for stream in (gone, disk):  # (closing flushes what they hold: it fails too)
        with contextlib.suppress(OSError):
            stream.stream.close()
    closed = io.StringIO()
    closed.close()
    for stream in (SafeStream(closed, "stdout"), SafeStream(None, "stderr")):
        stream.write("a line\n")
        stream.flush()
        assert stream.lost == "closed"


GUARDED = """
import os, sys
from cleanrl_utils.console import output
output.guard()
print("logging to runs/RUN/", flush=True)
sys.stderr.write("a message for stderr\\n")  # (checks/args.py wrote tyro's warnings so)
print("run folder: runs/RUN/")
with open(os.devnull) as opened:
    print(f"opened as {opened.fileno()}", file=sys.stderr)
print(f"lost: {output.lost()}", file=sys.stderr)
"""


def guarded(**popen) -> subprocess.CompletedProcess:
    """`GUARDED` run as a process: what a script's first import does with its output."""
    return subprocess.run(
        [sys.executable, "-c", GUARDED],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        timeout=60,
        **popen,
    )


def test_a_stdout_that_head_closed_is_noted_on_stderr_and_the_process_goes_on():
    """`| head`: stdout's reader is gone. Said once on stderr; stdout's lines are dropped
    (also at the interpreter's last flush, which would make the exit code 120)."""
    read, write = os.pipe()
    os.close(read)
    with os.fdopen(write, "w") as stdout:
        done = guarded(stdout=stdout, stderr=subprocess.PIPE, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        "warning: stdout can no longer be written (broken pipe (EPIPE)): what goes there is "
        "dropped from now on; the process goes on",
        "a message for stderr",
        "opened as 3",
        "lost: {'stdout': 'broken pipe (EPIPE)'}",
    ], done.stderr


def test_a_closed_stderr_sends_its_lines_to_stdout_and_keeps_its_descriptor():
    """`2>&-`: Python starts with `sys.stderr` None (a write to it failed: exit 1, silently).
    Descriptor 2 is os.devnull, so no file the process opens takes it and gets its messages;
    stderr's lines come to stdout, after one note."""
    done = subprocess.run(
        ["sh", "-c", f'exec "{sys.executable}" -c "$0" 2>&-', GUARDED],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and done.stderr == "", done
    assert done.stdout.splitlines() == [
        "warning: stderr can no longer be written (closed at the start (EBADF)): what goes "
        "there comes to stdout from now on",
        "logging to runs/RUN/",
        "a message for stderr",
        "run folder: runs/RUN/",
        "opened as 3",
        "lost: {'stderr': 'closed at the start (EBADF)'}",
    ], done.stdout


def run_record(cwd) -> tuple[dict, list]:
    """The config.json and the checkpoints of the one run under `cwd`."""
    (run_dir,) = run_dirs(cwd)
    return json.loads((run_dir / "config.json").read_text()), list_checkpoints(run_dir)


def read_until(fd: int, text: bytes, proc: subprocess.Popen, timeout: float = 300) -> bytes:
    """What `fd` gives until `text` has come (the process must not end first)."""
    received, deadline = b"", time.monotonic() + timeout
    while text not in received:
        assert proc.poll() is None, received.decode(errors="replace")[-3000:]
        assert time.monotonic() < deadline, f"no {text!r} after {timeout} s"
        if select.select([fd], [], [], 0.5)[0]:
            received += os.read(fd, 1 << 16)
    return received


TOOLS = ["benchmark", "report", "evals", "tuner"]  # (`python -m cleanrl_utils.NAME`)


@pytest.mark.parametrize("tool", TOOLS)
def test_a_tools_lost_output_is_said_where_it_can_be_never_a_traceback(tmp_path, tool):
    """Each tool as users start it: its `--help` on a full disk (stdout /dev/full) exits 0 with
    the loss noted on stderr; a bad flag with stderr closed (`2>&-`) says its `error:` line on
    stdout, exit code 2 (it was a traceback, exit 1, or exit 1 with no line at all). The
    launcher's commands through a `| head` that has read one line: it goes on, exit code 0."""
    module = f"cleanrl_utils.{tool}"
    env = {**script_env(tmp_path), "PYTHONPATH": str(REPO_ROOT)}
    with open("/dev/full", "w") as full:
        helped = subprocess.run(
            [sys.executable, "-m", module, "--help"], cwd=tmp_path, env=env, stdout=full,
            stderr=subprocess.PIPE, text=True, timeout=60,
        )  # fmt: skip
    assert helped.returncode == 0, helped.stderr
    assert helped.stderr == (
        "warning: stdout can no longer be written (no space left on device (ENOSPC)): what "
        "goes there is dropped from now on; the process goes on\n"
    )
    quoted = shlex.join([sys.executable, "-m", module, "--no-such-flag"])
    closed = subprocess.run(
        ["sh", "-c", f"exec {quoted} 2>&-"], cwd=tmp_path, env=env, capture_output=True,
        text=True, timeout=60,
    )  # fmt: skip
    assert closed.returncode == 2, closed.stdout
    lines = closed.stdout.splitlines()
    assert lines[0].startswith("warning: stderr can no longer be written (closed at the start")
    assert len(lines) == 2 and lines[1].startswith("error: "), closed.stdout
    if tool == "benchmark":
        read, write = os.pipe()
        os.close(read)  # (`| head` has read enough)
        with os.fdopen(write, "w") as head:
            piped = subprocess.run(
                [sys.executable, "-m", module, "--no-auto-tag", "--num-seeds", "100"],
                cwd=tmp_path, env=env, stdout=head, stderr=subprocess.PIPE, text=True,
                timeout=60,
            )  # fmt: skip
        assert piped.returncode == 0 and "Traceback" not in piped.stderr, piped.stderr
        assert "stdout can no longer be written (broken pipe (EPIPE))" in piped.stderr


@pytest.mark.slow
def test_ctrl_c_through_a_tee_that_it_ended_first_still_checkpoints_and_exits_130(tmp_path):
    """`python SCRIPT ... 2>&1 | tee log`, then Ctrl-C: the terminal's SIGINT ends `tee` too,
    and every line of the stop meets a broken pipe. The stop goes on: its checkpoint, exit
    code 130, and config.json says it stopped and that its output was lost."""
    proc = subprocess.Popen(
        [sys.executable, str(PPO_ATARI_ENVPOOL), *LONG],
        cwd=tmp_path,
        env=script_env(tmp_path),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        read_until(proc.stdout.fileno(), b"step ", proc)  # (iteration 1 is done)
        proc.stdout.close()  # tee ends with the Ctrl-C...
        proc.send_signal(signal.SIGINT)  # ...that the run gets too
        assert proc.wait(timeout=120) == INTERRUPTED
    finally:
        proc.kill()
    config, checkpoints = run_record(tmp_path)
    (checkpoint,) = checkpoints
    assert config["stopped"]["signal"] == "Ctrl-C"
    assert config["stopped"]["global_step"] == read_checkpoint(checkpoint)["global_step"] > 0
    lost = {"stdout": "broken pipe (EPIPE)", "stderr": "broken pipe (EPIPE)"}
    assert {k: v for k, v in config["output_lost"].items() if k != "time"} == lost


@pytest.mark.slow
def test_a_run_with_stdout_on_a_full_disk_and_stderr_closed_trains_to_its_end(tmp_path):
    """`> /dev/full 2>&-`: every line fails (ENOSPC) or has nowhere to go. The run trains to its
    end and exits 0, and its files say what happened (it exited 1 at once, silently)."""
    args = [*TINY, "--total-timesteps", "64"]
    done = subprocess.run(
        ["sh", "-c", 'exec "$0" "$@" >/dev/full 2>&-', sys.executable, PPO_ATARI_ENVPOOL, *args],
        cwd=tmp_path,
        env=script_env(tmp_path),
        stdin=subprocess.DEVNULL,
        timeout=300,
    )
    assert done.returncode == 0
    config, checkpoints = run_record(tmp_path)
    assert config["finished"]["global_step"] == 64 and len(checkpoints) == 1
    assert {k: v for k, v in config["output_lost"].items() if k != "time"} == {
        "stderr": "closed at the start (EBADF)",
        "stdout": "no space left on device (ENOSPC)",
    }


def terminal_session() -> None:
    """In the child: a session of its own whose controlling terminal is its stdin (a closed
    terminal then sends it SIGHUP), and SIGHUP as a terminal delivers it (not ignored, as under
    a `nohup` test session)."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


@pytest.mark.slow
def test_a_closed_terminal_stops_the_run_with_a_checkpoint_and_75(tmp_path):
    """An ssh session closed (SIGHUP; every write to the terminal then fails with EIO): the run
    finishes its iteration, writes its checkpoint and exits 75, resumable; its config.json
    records the stop and the lost output (it was killed by SIGHUP, with no checkpoint)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, str(PPO_ATARI_ENVPOOL), *LONG],
        cwd=tmp_path,
        env=script_env(tmp_path, COLUMNS="120"),
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
        preexec_fn=terminal_session,
    )
    os.close(slave)
    try:
        read_until(master, b"32/32000", proc)  # the bar, after iteration 1
        os.close(master)  # the terminal is gone
        assert proc.wait(timeout=120) == CHECKPOINT_EXIT
    finally:
        proc.kill()
    config, checkpoints = run_record(tmp_path)
    (checkpoint,) = checkpoints
    assert config["stopped"]["signal"] == "SIGHUP"
    assert config["stopped"]["global_step"] == read_checkpoint(checkpoint)["global_step"] > 0
    lost = {"stdout": "input/output error (EIO)", "stderr": "input/output error (EIO)"}
    assert {k: v for k, v in config["output_lost"].items() if k != "time"} == lost
