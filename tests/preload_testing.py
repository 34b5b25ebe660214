"""The tests' scripts started from a preloaded interpreter: a process per test worker that has
imported torch, EnvPool (which imports JAX and matplotlib) and the rest once, and forks a copy of
itself for each script the tests start (`start`), in place of a new interpreter that imports them
again (about 3.5 CPU seconds a process, most of the suite's CPU on 2 cores). The same fork-server
idea as Android's zygote or `multiprocessing`'s forkserver, for `python SCRIPT ARGS` and
`python -m MODULE ARGS`.

What a script sees is what a new interpreter gives it: its argv and `sys.orig_argv` (so that
`cleanrl_utils.entry` knows it for the program, and guards its output and records its stops),
`__main__`, `sys.path[0]`, working folder, environment, standard streams, default signal handlers,
and the interpreter's own exit (atexit, threads joined, a traceback and 1 for an uncaught
exception, death by SIGINT for an uncaught KeyboardInterrupt); no interpreter option (`-u`: a new
interpreter). One difference no script reads: the objects the server imported are frozen out of
the garbage collector's reach (`gc.freeze`). A test gets a `Popen`-like handle whose pid is the
script's own, so signals reach it as they would. What a preloaded library read from the
environment when it was imported cannot change: a start whose environment differs from the
server's in a variable those libraries read (`JAX_*`, `TORCH*`, `OMP_*`, ...) gets a new
interpreter, as does every start when `CLEANRL_TESTS_PRELOAD=0` (tests/test_preload.py runs the
same scripts both ways); but not one read only when a run asks (`READ_LATER`), nor one whose
reading the script's process can redo (`READ_AGAIN`: `TORCH_LOGS`)."""

from __future__ import annotations

import atexit
import gc
import importlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

# what every script imports, and nothing that starts a thread or reads a run's environment when
# imported (the server checks that it is still one thread)
PRELOADED = (
    "numpy",
    "torch",
    "torch._dynamo",  # (torch.optim's first call imports it: 1.2 s)
    "envpool",
    "gymnasium",
    "ale_py",
    "tyro",
    "torch.utils.tensorboard",
)
# variables that the preloaded libraries read when imported: a start that sets one differently
# gets a new interpreter
READ_AT_IMPORT = (
    "JAX_", "XLA_", "TORCH", "PYTORCH", "OMP_", "MKL_", "KMP_", "OPENBLAS", "NPY_", "CUDA",
    "NVIDIA", "MPL", "LD_", "PYTHON", "TF_", "TRITON", "ENVPOOL", "GLOG", "TPU", "LANG", "LC_",
    "HOME", "XDG_",
)  # fmt: skip
# ... but not these, read only when a run asks for them, which the server never does: XLA reads
# XLA_FLAGS when JAX's backend starts (the first `jax.devices()`: the server has none, it stays
# one thread), and the JAX processes' variables are read by `jax.distributed.initialize` and
# cleanrl_utils.distributed.jax_processes. A run on two CPU devices, or one of two processes,
# starts from the server then (tests/test_preload.py shows the devices it sees).
READ_LATER = ("XLA_FLAGS", "JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID")
# ... nor these, read at import by the call named, which the script's process makes again when
# its value differs from the server's: torch reads TORCH_LOGS (what `torch.compile` logs: the
# tests' proof that a run compiled) in `torch._logging._init_logs`, at import and at each
# `torch._logging.set_logs`
READ_AGAIN = {"TORCH_LOGS": ("torch._logging", "_init_logs")}
ENABLED = os.environ.get("CLEANRL_TESTS_PRELOAD", "1") != "0"


def preloadable(env: dict[str, str], server_env: dict[str, str]) -> bool:
    """Whether a script with environment `env` can start from the server's interpreter, whose
    environment is `server_env` (or was, when it started)."""
    base = _started[0].env if _started else server_env
    names = set(env) | set(base)
    return not any(
        env.get(name) != base.get(name)
        for name in names
        if name.startswith(READ_AT_IMPORT) and name not in READ_LATER and name not in READ_AGAIN
    )


def start(
    command: list[str],
    cwd: str | os.PathLike,
    env: dict[str, str],
    stdout,
    stderr,
    server_env: dict[str, str],
) -> PreloadedProcess:
    """Start `command` (`[sys.executable, SCRIPT, *ARGS]` or `[sys.executable, "-m", MODULE,
    *ARGS]`) from the preloaded interpreter, stdin from /dev/null, output to the given files; the
    first start starts the server, with `server_env`."""
    if command[1].startswith("-") and command[1] != "-m":
        raise ValueError(f"an interpreter option needs a new interpreter: {command}")
    server = _server(server_env)
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect(server.address)
    request = json.dumps({"argv": [str(a) for a in command[1:]], "cwd": str(cwd), "env": env})
    with open(os.devnull) as stdin:
        socket.send_fds(connection, [b"f"], [stdin.fileno(), stdout.fileno(), stderr.fileno()])
    connection.sendall(request.encode())
    connection.shutdown(socket.SHUT_WR)
    return PreloadedProcess(command, connection)


class PreloadedProcess:
    """The `subprocess.Popen` a test uses (`pid`, `poll`, `wait`, `send_signal`, `terminate`,
    `kill`, `returncode`, `args`) for a script started by the server; the exit status comes over
    the connection from the process that waits for the script."""

    def __init__(self, args: list[str], connection: socket.socket):
        self.args, self._connection, self.returncode = args, connection, None
        self._received = b""
        line = self._read_line(timeout=60)
        if line is None:
            raise RuntimeError("the preloaded interpreter did not start the script")
        self.pid = int(line)

    def _read_line(self, timeout: float | None) -> str | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._received:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self._connection], [], [], left)[0]:
                return None
            chunk = self._connection.recv(4096)
            if not chunk:
                return None
            self._received += chunk
        line, self._received = self._received.split(b"\n", 1)
        return line.decode()

    def poll(self) -> int | None:
        return self.wait(timeout=0, _raise=False)

    def wait(self, timeout: float | None = None, _raise: bool = True) -> int | None:
        if self.returncode is None:
            line = self._read_line(timeout)
            if line is None:
                if _raise:
                    raise subprocess.TimeoutExpired(self.args, timeout)
                return None
            self.returncode = int(line)
            self._connection.close()
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class _Server:
    def __init__(self, env: dict[str, str]):
        folder = tempfile.mkdtemp(prefix="cleanrl-tests-preload-")
        self.address = os.path.join(folder, "socket")
        self.env = env
        self.process = subprocess.Popen(
            [sys.executable, __file__, self.address],
            stdin=subprocess.PIPE,  # its end: the server's too
            stdout=subprocess.PIPE,
            env=self.env,
        )
        if self.process.stdout.readline() != b"ready\n":
            raise RuntimeError(f"the preloaded interpreter did not start ({self.process.wait()})")
        atexit.register(self.close, folder)

    def close(self, folder: str) -> None:
        self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        Path(self.address).unlink(missing_ok=True)
        os.rmdir(folder)


_lock = threading.Lock()
_started: list[_Server] = []


def _server(env: dict[str, str]) -> _Server:
    with _lock:
        if not _started:
            _started.append(_Server(env))
        return _started[0]


def _serve(address: str) -> dict:
    """The server: import, then fork for each request. Returns (in the script's process only)
    the request it is to run."""
    for name in PRELOADED:
        try:
            importlib.import_module(name)
        except ImportError:
            pass  # (an extra not installed: the scripts that need it say so themselves)
    threads = os.listdir("/proc/self/task")
    assert len(threads) == 1, f"a preloaded module started a thread ({len(threads)} threads)"
    # the imported objects out of the garbage collector's reach, as Python's docs advise before
    # forking: a script's collections (the full one at its exit above all) would walk them all
    # and write to each one's page, which the fork shares with the server (1.4 CPU seconds a
    # script that exits, measured; 0.4 frozen)
    gc.collect()
    gc.freeze()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # (the test session's Ctrl-C is not its own)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(64)
    print("ready", flush=True)
    while True:
        while True:  # the waiters that are done
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
        readable = select.select([listener, sys.stdin], [], [], 1.0)[0]
        if sys.stdin in readable:  # the test process closed its end, or is gone
            sys.exit(0)
        if listener not in readable:
            continue
        connection, _ = listener.accept()
        _, fds, _, _ = socket.recv_fds(connection, 1, 3)
        request = b""
        while chunk := connection.recv(1 << 16):
            request += chunk
        if os.fork() == 0:
            # the waiter: starts the script, tells its pid and then its exit status
            listener.close()
            sys.stdout.flush()
            pid = os.fork()
            if pid == 0:
                connection.close()
                return _become(json.loads(request), fds)
            for fd in fds:
                os.close(fd)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            connection.sendall(f"{pid}\n".encode())
            _, status = os.waitpid(pid, 0)
            try:
                connection.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
            except OSError:
                pass  # (the test process is gone)
            os._exit(0)
        connection.close()
        for fd in fds:
            os.close(fd)


def _become(request: dict, fds: list[int]) -> dict:
    """In the script's process: stand where `python ARGV` would."""
    for target, fd in zip((0, 1, 2), fds):
        os.dup2(fd, target)
        os.close(fd)
    for signum in (signal.SIGTERM, signal.SIGCHLD, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.chdir(request["cwd"])
    server_values = {name: os.environ.get(name) for name in READ_AGAIN}
    os.environ.clear()
    os.environ.update(request["env"])
    for name, (module, function) in READ_AGAIN.items():
        if os.environ.get(name) != server_values[name]:
            getattr(importlib.import_module(module), function)()
    return request


def _run(argv: list[str]) -> None:
    import runpy

    # (the command line as the interpreter got it: `cleanrl_utils.entry` looks there for the
    # script run as the program)
    sys.orig_argv = [sys.executable, *argv]
    if argv[0] == "-m":
        sys.argv = [argv[1], *argv[2:]]  # (run_module puts the module's file first)
        sys.path[0] = os.getcwd()
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(argv)
        sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
        runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    _run(_serve(sys.argv[1])["argv"])
