"""The progress display on a real terminal (a pseudo-terminal): a bar at the terminal's width,
messages on lines of their own, plain lines where a bar cannot be drawn."""

from __future__ import annotations

import os
import pty
import re

import pytest

from cleanrl_utils.console.progress import Progress


@pytest.fixture
def terminal():
    """A stream that is a terminal, and a function returning what was written to it."""
    master, slave = pty.openpty()
    stream = open(slave, "w")  # noqa: SIM115 (closed below)

    def read() -> str:
        stream.flush()
        chunks = []
        os.set_blocking(master, False)
        while True:
            try:
                chunks.append(os.read(master, 1 << 16).decode())
            except BlockingIOError:
                return "".join(chunks)

    yield stream, read
    stream.close()
    os.close(master)


def test_a_bar_at_the_terminals_width_and_messages_on_their_own_lines(terminal, monkeypatch):
    stream, read = terminal
    monkeypatch.setenv("COLUMNS", "90")
    progress = Progress(1000, stream=stream)
    assert progress.bar is not None
    progress.update(100, 50.0, 1.5)
    progress.write("received SIGTERM: finishing this iteration")
    progress.update(200, 50.0, 2.0)
    progress.close()
    lines = re.split(r"[\r\n]+", read())
    assert "received SIGTERM: finishing this iteration" in lines  # alone on its line
    bars = [line for line in lines if "step" in line and "|" in line]
    assert len(bars) >= 3 and all(len(line.rstrip()) <= 90 for line in bars)
    assert len({len(line) for line in bars}) == 1  # drawn at one width throughout


@pytest.mark.parametrize("columns", ["0", "20"])
def test_a_terminal_too_narrow_for_a_bar_gets_plain_lines(terminal, monkeypatch, columns):
    stream, read = terminal
    monkeypatch.setenv("COLUMNS", columns)
    progress = Progress(1000, stream=stream)
    assert progress.bar is None
    progress.update(1000, 50.0, None)
    progress.write("a message")
    assert "step 1000/1000 (100.0%) SPS=50" in read().replace("\r", "")
