"""`python -m cleanrl_utils.torchrun`, in process: the run's exit code from its processes' codes,
the one line that replaces torchrun's traceback, and the ranks' output through the pipe (their
last words held back to the end, each once). With real ranks: tests/test_multigpu.py."""

from __future__ import annotations

import os
import signal
import socket
import time

from scripts_testing import describe, run_script, script_env

from cleanrl_utils.console.output import SafeStream
from cleanrl_utils.torchrun import LastWords, launch_problem, run_code, signals_to_handle, summary


def test_the_run_exit_code_is_the_ranks_own_not_a_signal_torchrun_sent():
    assert run_code({}) == 0
    assert run_code({0: 2, 1: 2}, first=0) == 2  # bad input on every rank
    assert run_code({0: 2, 1: -15}, first=0) == 2  # torchrun stopped rank 1 after rank 0 failed
    assert run_code({0: 1, 1: -9}, first=1) == 1  # rank 1 killed: rank 0 lost it
    assert run_code({0: 75, 1: 75}, first=1) == 75 and run_code({0: 130}) == 130
    assert run_code({0: -9, 1: -9}, first=0) == 1  # no rank said anything: a failure
    assert run_code({0: 74, 1: 1}, first=0) == 74  # the first to fail says why


def test_the_summary_line_says_how_each_process_ended():
    line = summary({0: 1, 1: -9}, first=1, host="node7")
    assert (
        line
        == "torchrun on node7: rank 1 ended first; rank 0: exit code 1, rank 1: killed by SIGKILL"
    )
    assert summary({3: 2}, first=3, host="h") == "torchrun on h: rank 3: exit code 2"


def through(*writes: bytes) -> tuple[bytes, list[str]]:
    """What LastWords forwards at once and what it holds, for these writes of the ranks."""
    out_read, out_write = os.pipe()
    out = open(out_write, "w", buffering=1)  # noqa: SIM115 (closed below)
    words = LastWords(SafeStream(out, "stderr"))
    for data in writes:
        os.write(words.write_fd, data)
    held = words.finish()
    out.close()
    with os.fdopen(out_read, "rb") as forwarded:
        return forwarded.read(), held


def test_the_ranks_last_words_are_held_to_the_end_each_once_and_the_rest_forwarded():
    resume = b"SIGUSR1: checkpoint of iteration 3 written; exiting with code 75 (continue with: X)"
    forwarded, held = through(
        b"logging to runs/RUN/\n",
        b"\rstep 64/640 (10.0%)",  # a progress bar redraws its line: shown as drawn
        b"\rstep 128/640 (20.0%)\n",
        resume[:20],  # (an unbuffered print writes the line, then the newline)
        resume[20:],
        b"\n",
        b"error: rank 0: lost rank 1 of 2 (...)\n",
        b"error: rank 0: lost rank 1 of 2 (...)\n",
        b"error: rank 1: lost rank 0 of 2 (...)",  # (no newline before the end)
    )
    assert forwarded == b"logging to runs/RUN/\n\rstep 64/640 (10.0%)\rstep 128/640 (20.0%)\n"
    assert held == [
        resume.decode(),
        "error: rank 0: lost rank 1 of 2 (...)",
        "error: rank 1: lost rank 0 of 2 (...)",
    ]


def test_a_bad_flag_of_torchrun_itself_is_one_line_and_exit_2(tmp_path):
    done = run_script(["--nproc-per-node"], tmp_path, module="cleanrl_utils.torchrun")
    assert done.returncode == 2, describe(done)
    assert done.stderr.strip().splitlines() == [
        "error: torchrun: argument --nproc-per-node/--nproc_per_node: expected one argument "
        "(see --help)"
    ], describe(done)


def test_a_count_of_processes_or_nodes_that_cannot_be_is_one_line_and_exit_2(tmp_path):
    """`--nproc-per-node=0` was `error: torchrun on HOST: AssertionError: AssertionError`, exit 1
    (`=abc`, `--nnodes abc`: a ValueError naming no flag)."""
    from torch.distributed.run import parse_args

    def problem(*flags: str) -> str | None:
        return launch_problem(parse_args([*flags, "script.py"]))

    for nproc in ("0", "abc", "-1"):
        assert problem(f"--nproc-per-node={nproc}").startswith(
            f"--nproc-per-node {nproc}: give a number of processes of 1 or more"
        )
    for nnodes in ("abc", "0", "2:1", "1:2:3"):
        assert problem(f"--nnodes={nnodes}").startswith(f"--nnodes {nnodes}: give a number")
    assert problem("--max-restarts=-1") == "--max-restarts -1: give 0 or more"
    for fine in (["--nproc-per-node=2"], ["--nproc-per-node=auto", "--nnodes=1:4"]):
        assert problem(*fine) is None
    done = run_script(["--nproc_per_node=0", "x.py"], tmp_path, module="cleanrl_utils.torchrun")
    assert done.returncode == 2, describe(done)
    assert done.stderr.strip().splitlines() == [
        "error: torchrun: --nproc-per-node 0: give a number of processes of 1 or more, or one "
        "per device: auto, cpu, gpu, xpu (see --help)"
    ], describe(done)


def test_under_nohup_torchrun_leaves_sighup_ignored_and_otherwise_forwards_it():
    """A closed terminal's SIGHUP goes on to the ranks, which stop with a checkpoint (75); under
    `nohup` torchrun does not handle it, and the ranks inherit it ignored: the run trains on."""
    before = signal.getsignal(signal.SIGHUP)
    try:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        assert signals_to_handle() == "SIGTERM,SIGINT,SIGQUIT,SIGUSR1"
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        assert "SIGHUP" in signals_to_handle().split(",")
    finally:
        signal.signal(signal.SIGHUP, before)


def test_a_master_port_another_program_holds_is_one_line_and_exit_2(tmp_path):
    """It was `error: torchrun on HOST: DistNetworkError: ...EADDRINUSE...`, exit 1 (the docs:
    a port in use is bad input, 2); no process starts."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        flags = ["--nnodes=1", "--nproc-per-node=1", "--master-addr=127.0.0.1"]
        done = run_script(
            [*flags, f"--master-port={port}", "x.py"], tmp_path, module="cleanrl_utils.torchrun"
        )
    assert done.returncode == 2, describe(done)
    assert done.stderr.strip().splitlines()[-1] == (
        f"error: torchrun: the port of 127.0.0.1:{port} is in use by another program: give "
        "another --master-port (--standalone picks a free one)"
    ), describe(done)
    assert "Traceback" not in done.stderr


def test_a_node_whose_master_never_comes_waits_cleanrl_dist_timeout_s_then_one_line_exit_2(
    tmp_path,
):
    """Node 1 of 2 started alone, its master never started: torchrun's rendezvous waits
    `CLEANRL_DIST_TIMEOUT_S` (1 s here), then one line naming where it waited, exit code 2, no
    C++ stack (it waited torchrun's own 600 s, past 15 minutes with its retries, whatever the
    variable said, then a 44-frame C++ stack and exit 1). The c10d rendezvous alike."""
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]  # (nothing listens there)
    static = ["--node-rank=1", "--master-addr=127.0.0.1", f"--master-port={port}"]
    c10d = ["--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}"]
    for flags, where in ((static, "the master"), (c10d, "the rendezvous at")):
        started = time.monotonic()
        done = run_script(
            ["--nnodes=2", "--nproc-per-node=1", *flags, "x.py"], tmp_path,
            module="cleanrl_utils.torchrun", env=script_env(tmp_path, CLEANRL_DIST_TIMEOUT_S="1"),
            fresh=True,  # (as users start it: torch not loaded yet, its C++ log level still to set)
        )  # fmt: skip
        assert time.monotonic() - started < 60, describe(done)
        assert done.returncode == 2, describe(done)
        assert done.stderr.strip().splitlines() == [
            f"error: torchrun: {where} 127.0.0.1:{port} did not meet this node's within 1 s "
            "(CLEANRL_DIST_TIMEOUT_S): start every node with the same --master-addr, "
            "--master-port (or --rdzv-endpoint) and --nnodes, or wait longer"
        ], describe(done)
