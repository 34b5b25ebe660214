"""Helpers for the tests of the gymnasium Atari scripts (`cleanrl/ppo_atari.py`,
`cleanrl/ppo_atari_lstm.py`) and their wrappers: real emulators, no mocks."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

BREAKOUT = "BreakoutNoFrameskip-v4"
NOOP, FIRE, RIGHT, LEFT = 0, 1, 2, 3  # Breakout's minimal action set


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """In-process forward passes on a small, busy machine: one thread is several times faster."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def wrapper_chain(env) -> list[str]:
    """The class names of a single env's wrappers, outermost first, down to the emulator."""
    names = []
    while True:
        names.append(type(env).__name__)
        if not hasattr(env, "env"):
            return names
        env = env.env


def find_wrapper(env, name: str):
    while type(env).__name__ != name:
        env = env.env
    return env


def decoded_frames(path: Path) -> list:
    import imageio

    reader = imageio.get_reader(path, format="ffmpeg")
    try:
        return [frame for frame in reader]  # (not list(reader): its length hint is infinite)
    finally:
        reader.close()
