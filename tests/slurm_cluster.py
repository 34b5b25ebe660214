"""A real single-node SLURM cluster on 127.0.0.1, started from scratch in a temporary folder.

`tests/test_slurm.py` runs the benchmark launcher against it. By hand (as root):

    python tests/slurm_cluster.py      # prints `export SLURM_CONF=...`, Ctrl-C stops the cluster

Everything (munge key and socket, configs, state, logs, fake GPU device files) lives in one
folder; the daemons run in the foreground as children of this process and are stopped by the
PIDs started here. Nothing listens beyond loopback: `NoCtldInAddrAny,NoInAddrAny` makes the
daemons bind to the address the host name resolves to, which must be a loopback address.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ports import free_port

PACKAGES = ["slurmctld", "slurmd", "slurm-client", "munge"]
PROGRAMS = "munged mungekey slurmctld slurmd sbatch srun squeue scontrol sinfo scancel".split()
# the daemons live in /usr/sbin, which a non-login shell may not have on its PATH
SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
NVIDIA_MAJOR = 195  # the character-device major number of /dev/nvidia*


def which(program: str) -> str | None:
    return shutil.which(program, path=SEARCH_PATH)


def ensure_installed() -> None:
    """Install Debian's SLURM and munge packages when a program is missing (needs root)."""
    missing = [program for program in PROGRAMS if which(program) is None]
    if not missing:
        return
    if os.geteuid() != 0:
        raise RuntimeError(f"{', '.join(missing)} missing and not root: cannot apt-get install")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update"], ["apt-get", "install", "-y", *PACKAGES]):
        result = subprocess.run(command, env=env, capture_output=True, text=True)
        if result.returncode:
            raise RuntimeError(
                f"{' '.join(command)} failed:\n{result.stdout[-2000:]}{result.stderr}"
            )
    still_missing = [program for program in PROGRAMS if which(program) is None]
    if still_missing:
        raise RuntimeError(f"installed {PACKAGES} but {still_missing} still missing")


def check_hostname_is_loopback() -> str:
    """With NoInAddrAny the daemons and srun bind to the address of the host name: refuse to
    start unless that address is a loopback one."""
    hostname = socket.gethostname()
    address = socket.gethostbyname(hostname)
    if not ipaddress.ip_address(address).is_loopback:
        raise RuntimeError(
            f"host name {hostname!r} resolves to {address}, not a loopback address: "
            "the test cluster would listen on the network"
        )
    return hostname


class SlurmCluster:
    """munged + slurmctld + slurmd on 127.0.0.1; one node `localhost` with `cpus` CPUs
    (more than the machine has, so short runs overlap) and `gpus` fake GPUs."""

    def __init__(self, root: Path, cpus: int = 4, gpus: int = 2):
        self.root = Path(root)
        self.cpus = cpus
        self.gpus = gpus
        self.conf = self.root / "slurm.conf"
        self.processes: list[subprocess.Popen] = []
        # the daemons' Unix sockets (munged's, slurmd's in its spool) in a short folder of their
        # own: a socket's path is at most 108 bytes, and pytest's folders can be longer
        self.sockets: Path | None = None

    @property
    def env(self) -> dict:
        """The environment for clients (sbatch, squeue, the launcher) to reach this cluster."""
        path = os.pathsep.join([str(Path(which("sbatch")).parent), SEARCH_PATH])
        return {**os.environ, "SLURM_CONF": str(self.conf), "PATH": path}

    def __enter__(self) -> SlurmCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        ensure_installed()
        hostname = check_hostname_is_loopback()
        for name in ("munge", "state", "log", "gpu"):
            (self.root / name).mkdir(parents=True, exist_ok=True)
        self.sockets = Path(tempfile.mkdtemp(prefix="slurm-", dir="/tmp"))
        (self.sockets / "spool").mkdir()
        os.chmod(self.sockets, 0o755)  # (as munged wants its socket's folder)
        # munged refuses a socket directory that others cannot enter
        os.chmod(self.root, 0o755)
        os.chmod(self.root / "munge", 0o755)
        self._write_munge_key()
        self._make_fake_gpus()
        self._write_configs(hostname)

        socket_path = self.sockets / "munge.socket"
        self._spawn(
            "munged",
            "--foreground",
            "--force",
            f"--socket={socket_path}",
            f"--key-file={self.root / 'munge' / 'munge.key'}",
            f"--pid-file={self.root / 'munge' / 'munged.pid'}",
            f"--seed-file={self.root / 'munge' / 'munged.seed'}",
            f"--log-file={self.root / 'log' / 'munged.log'}",
            "--origin=127.0.0.1",
        )
        self._wait_for(socket_path.exists, "munged to create its socket")
        self._spawn("slurmctld", "-D", "-f", str(self.conf))
        self._wait_for(self._controller_up, "slurmctld to answer `scontrol ping`")
        self._spawn("slurmd", "-D", "-N", "localhost", "-f", str(self.conf))
        self._wait_for(self._node_idle, "node localhost to become idle")

    def stop(self) -> None:
        """Cancel every job (the cluster is ours alone), then stop exactly the daemons
        started here, newest first."""
        if any(p.poll() is None for p in self.processes) and self._controller_up():
            subprocess.run(["scancel", "--user", "root"], env=self.env, capture_output=True)
        for process in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        self.processes = []
        if self.sockets is not None:
            shutil.rmtree(self.sockets, ignore_errors=True)
            self.sockets = None

    def log_tail(self, lines: int = 20) -> str:
        tails = []
        for log in sorted((self.root / "log").glob("*")):
            tail = log.read_text(errors="replace").splitlines()[-lines:]
            tails.append(f"--- {log.name}\n" + "\n".join(tail))
        return "\n".join(tails)

    def _write_munge_key(self) -> None:
        key = self.root / "munge" / "munge.key"
        if not key.exists():
            subprocess.run([which("mungekey"), "--create", f"--keyfile={key}"], check=True)
        os.chmod(key, 0o600)

    def _make_fake_gpus(self) -> None:
        # gres/gpu only checks that each File= is a character device; nothing can use these
        for index in range(self.gpus):
            path = self.root / "gpu" / f"nvidia{index}"
            if not path.exists():
                os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(NVIDIA_MAJOR, index))

    def _write_configs(self, hostname: str) -> None:
        root = self.root
        (root / "plugstack.conf").write_text("")
        (root / "gres.conf").write_text(
            "AutoDetect=off\n"
            + "".join(
                f"NodeName=localhost Name=gpu File={root / 'gpu' / f'nvidia{i}'}\n"
                for i in range(self.gpus)
            )
        )
        settings = {
            "ClusterName": "cleanrltest",
            "SlurmctldHost": f"{hostname}(127.0.0.1)",
            "SlurmctldPort": free_port(),
            "SlurmdPort": free_port(),
            "CommunicationParameters": "NoCtldInAddrAny,NoInAddrAny",
            "AuthType": "auth/munge",
            "CredType": "cred/munge",
            # a requeued job may start again only after the credential lifetime (120 s by
            # default): 10 s keeps the requeue test short
            "AuthInfo": f"socket={self.sockets / 'munge.socket'},cred_expire=10",
            "SlurmUser": "root",
            "SlurmdUser": "root",
            "StateSaveLocation": root / "state",
            "SlurmdSpoolDir": self.sockets / "spool",
            "SlurmctldPidFile": root / "slurmctld.pid",
            "SlurmdPidFile": root / "slurmd.pid",
            "SlurmctldLogFile": root / "log" / "slurmctld.log",
            "SlurmdLogFile": root / "log" / "slurmd.log",
            "PlugStackConfig": root / "plugstack.conf",
            "ProctrackType": "proctrack/linuxproc",
            "TaskPlugin": "task/none",
            "JobAcctGatherType": "jobacct_gather/none",
            "AccountingStorageType": "accounting_storage/none",
            "JobCompType": "jobcomp/none",
            "MpiDefault": "none",
            "SwitchType": "switch/none",
            "SelectType": "select/cons_tres",
            "SelectTypeParameters": "CR_Core",
            "SchedulerType": "sched/builtin",
            # start a submitted job at once instead of batching submissions for a few seconds;
            # a requeued job waits for the main scheduling loop, which runs every 60 s by default
            "SchedulerParameters": "batch_sched_delay=0,sched_interval=1",
            # no accounting: finished jobs are only visible while slurmctld keeps them
            "MinJobAge": 3600,
            "ReturnToService": 2,
            "SlurmdParameters": "config_overrides",
            "GresTypes": "gpu",
            "SlurmctldDebug": "info",
            "SlurmdDebug": "info",
        }
        lines = [f"{key}={value}" for key, value in settings.items()]
        lines += [
            f"NodeName=localhost NodeAddr=127.0.0.1 CPUs={self.cpus} Gres=gpu:{self.gpus} "
            "State=UNKNOWN",
            "PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP",
        ]
        self.conf.write_text("\n".join(lines) + "\n")

    def _spawn(self, program: str, *args: str) -> None:
        log = open(self.root / "log" / f"{program}.out", "ab")
        self.processes.append(
            subprocess.Popen([which(program), *args], stdout=log, stderr=subprocess.STDOUT)
        )
        log.close()

    def _controller_up(self) -> bool:
        result = subprocess.run(["scontrol", "ping"], env=self.env, capture_output=True, text=True)
        return "is UP" in result.stdout

    def _node_idle(self) -> bool:
        result = subprocess.run(
            ["sinfo", "--noheader", "--format=%t"], env=self.env, capture_output=True, text=True
        )
        return result.stdout.strip() == "idle"

    def _wait_for(self, ready, what: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            dead = [p.args[0] for p in self.processes if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                reason = f"{dead} exited" if dead else f"no answer after {timeout:.0f} s"
                raise RuntimeError(f"waiting for {what}: {reason}\n{self.log_tail()}")
            time.sleep(0.1)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop the daemons on SIGTERM too
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="slurm-"))
    with SlurmCluster(root) as cluster:
        print(f"cluster up; in another shell: export SLURM_CONF={cluster.conf}", flush=True)
        try:
            while all(p.poll() is None for p in cluster.processes):
                time.sleep(1)
            print(f"a daemon exited:\n{cluster.log_tail()}", file=sys.stderr)
        except KeyboardInterrupt:
            pass
