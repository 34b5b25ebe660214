"""Free TCP ports for the servers the tests start (a rendezvous, a process group's store, the
SLURM daemons), taken below the kernel's ephemeral range. A port the kernel hands out for port 0
comes from that range, where it can go to another process's outgoing connection (the other runs
of a test open many) between the moment it is found free and the moment the server, seconds
later, binds it."""

from __future__ import annotations

import random
import socket


def ephemeral_range() -> tuple[int, int]:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = map(int, f.read().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


def free_port() -> int:
    """A port nothing listens on or is connected from, outside the ephemeral range."""
    low, _ = ephemeral_range()
    choose = random.Random()  # (not the global generator, which tests seed)
    for _ in range(100):
        port = choose.randrange(max(1024, low - 10000), low) if low > 2024 else 0
        with socket.socket() as probe:
            try:
                probe.bind(("", port))
            except OSError:
                continue
            return probe.getsockname()[1]
    raise RuntimeError("no free port below the ephemeral range")
