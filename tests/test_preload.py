"""A script started from the preloaded interpreter (tests/preload_testing.py) sees what a new
interpreter gives it: the same argv, `__main__`, path, folder, environment, streams, signal
handlers and exit; each case runs both ways and compares."""

from __future__ import annotations

import json
import signal
import sys
import time

import preload_testing
import pytest
from scripts_testing import PPO_ATARI_ENVPOOL, finish_script, script_env, start_script

SHOW = """\
import json, os, signal, sys
what = {
    "argv": sys.argv, "name": __name__, "file": __file__, "path0": sys.path[0],
    "cwd": os.getcwd(), "variable": os.environ.get("PRELOAD_TEST"), "stdin": sys.stdin.read(),
    "handlers": [str(signal.getsignal(s)) for s in (signal.SIGINT, signal.SIGTERM)],
    "main": sorted(k for k in vars(sys.modules["__main__"]) if not k.startswith("__")),
}
print(json.dumps(what))
print("to stderr", file=sys.stderr)
how = sys.argv[1]
if how == "exit":
    sys.exit(3)
if how == "raise":
    raise ValueError("raised")
if how == "interrupt":
    raise KeyboardInterrupt
if how == "wait":
    import time
    time.sleep(60)
"""


def both_ways(monkeypatch, start):
    """What `start()` gives from a new interpreter, then from the preloaded one."""
    results = []
    for enabled in (False, True):
        monkeypatch.setattr(preload_testing, "ENABLED", enabled)
        proc = start()
        assert isinstance(proc, preload_testing.PreloadedProcess) == enabled
        results.append(proc)
    return results


@pytest.mark.parametrize(
    ("how", "code"), [("end", 0), ("exit", 3), ("raise", 1), ("interrupt", -signal.SIGINT)]
)
def test_a_script_sees_a_new_interpreter(monkeypatch, tmp_path, how, code):
    script = tmp_path / "show.py"
    script.write_text(SHOW + "what.pop('main')\n")
    env = script_env(tmp_path, PRELOAD_TEST="set")
    fresh, preloaded = (
        finish_script(proc)
        for proc in both_ways(
            monkeypatch, lambda: start_script([how], tmp_path, script=script, env=env)
        )
    )
    assert fresh.returncode == preloaded.returncode == code, (fresh, preloaded)
    assert fresh.stdout == preloaded.stdout
    shown = json.loads(fresh.stdout.splitlines()[0])
    assert shown["argv"] == [str(script), how] and shown["name"] == "__main__"
    assert shown["cwd"] == str(tmp_path) and shown["variable"] == "set"
    assert shown["handlers"][0] == str(signal.default_int_handler)
    assert fresh.stderr.startswith("to stderr") and preloaded.stderr.startswith("to stderr")
    if how == "raise":
        assert fresh.stderr.splitlines()[-1] == preloaded.stderr.splitlines()[-1]
        assert preloaded.stderr.splitlines()[-1] == "ValueError: raised"


def test_a_module_sees_a_new_interpreter(monkeypatch, tmp_path):
    (tmp_path / "shown.py").write_text(SHOW)
    fresh, preloaded = (
        finish_script(proc)
        for proc in both_ways(monkeypatch, lambda: start_script(["end"], tmp_path, module="shown"))
    )
    assert fresh.returncode == preloaded.returncode == 0, (fresh, preloaded)
    assert fresh.stdout == preloaded.stdout
    shown = json.loads(fresh.stdout)
    assert shown["argv"] == [str(tmp_path / "shown.py"), "end"]
    # (its own names only, none of the server's)
    assert shown["path0"] == str(tmp_path) and shown["main"] == ["json", "os", "signal", "sys"]


# what `cleanrl_utils.entry` sets up, shown by a program that imports it first, as the scripts do
ENTRY = """\
import os, signal, sys
import cleanrl_utils.entry
handler = signal.getsignal(signal.SIGTERM)
print(type(sys.stdout).__name__, type(sys.stderr).__name__)
print(getattr(handler, "name", None) or f"{handler.__module__}.{handler.__qualname__}")
print([os.path.relpath(a) if a.endswith(".py") else a for a in sys.orig_argv[1:]])
"""


def test_a_script_gets_the_entry_of_a_program(monkeypatch, tmp_path):
    """The output guard and the recorded stops of a script run as a program
    (`entry.run_as_a_program`, which reads `sys.orig_argv`), the same both ways."""
    script = tmp_path / "entry_shown.py"
    script.write_text(ENTRY)
    fresh, preloaded = (
        finish_script(proc)
        for proc in both_ways(monkeypatch, lambda: start_script(["a"], tmp_path, script=script))
    )
    assert fresh.returncode == preloaded.returncode == 0, (fresh, preloaded)
    assert fresh.stdout == preloaded.stdout
    assert fresh.stdout.splitlines() == [
        "SafeStream SafeStream",
        "cleanrl_utils.console.signals._record_stop",
        str(["entry_shown.py", "a"]),
    ]


@pytest.mark.parametrize("how", ["python -m tool", "python tool.py"])
def test_a_tool_that_imports_a_script_gets_no_entry(monkeypatch, tmp_path, how):
    """A program that imports a script for its definitions (`python -m tool`, or `python tool.py`
    as the throughput benchmark runs: its file is on the command line, but the script is not
    the program) gets plain streams and the default SIGTERM, both ways."""
    (tmp_path / "entry_shown.py").write_text(ENTRY)
    (tmp_path / "tool.py").write_text("import entry_shown\n")
    where = (
        dict(module="tool") if how.startswith("python -m") else dict(script=tmp_path / "tool.py")
    )
    fresh, preloaded = (
        finish_script(proc)
        for proc in both_ways(monkeypatch, lambda: start_script(["a"], tmp_path, **where))
    )
    assert fresh.returncode == preloaded.returncode == 0, (fresh, preloaded)
    assert fresh.stdout == preloaded.stdout
    command = ["-m", "tool", "a"] if how.startswith("python -m") else ["tool.py", "a"]
    assert fresh.stdout.splitlines() == ["TextIOWrapper TextIOWrapper", "SIG_DFL", str(command)]


def test_a_script_imported_by_a_test_gets_no_entry(monkeypatch):
    """This process (pytest's, which names test files on its command line) imports a script's
    entry for its definitions: no output guard, no recorded stops."""
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)  # (entry installs its own hook)
    import cleanrl_utils.entry
    from cleanrl_utils.console import output, signals

    assert not cleanrl_utils.entry.run_as_a_program()
    assert signal.getsignal(signal.SIGTERM) is not signals._record_stop
    assert not isinstance(sys.stdout, output.SafeStream)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL, signal.SIGINT])
def test_signals_reach_the_script(monkeypatch, tmp_path, signum):
    script = tmp_path / "show.py"
    script.write_text(SHOW)
    for proc in both_ways(monkeypatch, lambda: start_script(["wait"], tmp_path, script=script)):
        deadline = time.monotonic() + 30
        while not _printed(proc):  # (its handlers are set)
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        proc.send_signal(signum)
        result = finish_script(proc, timeout=30)
        # (an uncaught KeyboardInterrupt ends the interpreter by SIGINT)
        assert result.returncode == -signum, result
        if signum == signal.SIGINT:
            assert result.stderr.splitlines()[-1] == "KeyboardInterrupt"


def _printed(proc) -> bool:
    stdout = proc.output_files[0]
    stdout.seek(0)
    return bool(stdout.read())


def test_a_variable_read_at_import_gets_a_new_interpreter(monkeypatch, tmp_path):
    monkeypatch.setattr(preload_testing, "ENABLED", True)
    proc = start_script(["--help"], tmp_path, env=script_env(tmp_path, OMP_NUM_THREADS="2"))
    assert not isinstance(proc, preload_testing.PreloadedProcess)
    assert finish_script(proc).returncode == 0


# what torch.compile logs under TORCH_LOGS (the tests' proof that a run compiled): dynamo's
# tracing, its recompilation (a second shape), and the loggers' levels
COMPILE_LOGGED = """\
import logging, torch
f = torch.compile(lambda x: x * 2, backend="eager", dynamic=False)
f(torch.zeros(2)), f(torch.zeros(3))
print(logging.getLogger("torch._dynamo").level, logging.getLogger("torch._inductor").level)
"""


def test_torch_logs_are_read_again_in_the_script_started_from_the_server(monkeypatch, tmp_path):
    """TORCH_LOGS (preload_testing.READ_AGAIN): the script logs what a new interpreter logs."""
    script = tmp_path / "compiled.py"
    script.write_text(COMPILE_LOGGED)
    env = script_env(tmp_path, TORCH_LOGS="dynamo,recompiles")
    fresh, preloaded = (
        finish_script(proc)
        for proc in both_ways(
            monkeypatch, lambda: start_script([], tmp_path, script=script, env=env)
        )
    )
    assert fresh.returncode == preloaded.returncode == 0, (fresh, preloaded)
    assert fresh.stdout == preloaded.stdout

    def logged(proc):
        return [
            line.split("] ", 1)[-1]
            for line in proc.stderr.splitlines()
            if "start tracing" in line or "Recompiling" in line
        ]

    assert logged(fresh) == logged(preloaded)
    # (two traces, the second a recompilation for the new shape)
    assert len(logged(fresh)) == 3, fresh.stderr


def test_a_variable_read_only_when_a_run_asks_starts_from_the_server(monkeypatch, tmp_path):
    """XLA_FLAGS and the JAX processes' variables (preload_testing.READ_LATER): a run on two CPU
    devices, one of two processes, starts from the server and sees what a new interpreter sees."""
    script = tmp_path / "devices.py"
    script.write_text(
        "import os, jax\n"
        "print(len(jax.devices()), os.environ['JAX_PROCESS_ID'], os.environ['XLA_FLAGS'])\n"
    )
    flags = "--xla_force_host_platform_device_count=2"
    env = script_env(tmp_path, XLA_FLAGS=flags, JAX_NUM_PROCESSES="2", JAX_PROCESS_ID="1")
    fresh, preloaded = (
        finish_script(proc)
        for proc in both_ways(
            monkeypatch, lambda: start_script([], tmp_path, script=script, env=env)
        )
    )
    assert fresh.returncode == preloaded.returncode == 0, (fresh, preloaded)
    assert fresh.stdout == preloaded.stdout == f"2 1 {flags}\n"


@pytest.mark.slow
def test_the_script_says_the_same_both_ways(monkeypatch, tmp_path):
    """Its help, and a bad input's one line and exit code."""
    for args in (["--help"], ["--total-timesteps", "-5"]):
        fresh, preloaded = (
            finish_script(proc)
            for proc in both_ways(monkeypatch, lambda args=args: start_script(args, tmp_path))
        )
        assert (fresh.returncode, fresh.stdout, fresh.stderr) == (
            preloaded.returncode,
            preloaded.stdout,
            preloaded.stderr,
        )
    assert str(PPO_ATARI_ENVPOOL) in preloaded.args and sys.executable in preloaded.args
