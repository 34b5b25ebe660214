"""The training scripts of `cleanrl/` as modules, for the tools that reuse their definitions (the
evaluation rebuilds a model's network, the throughput benchmark its env and network)."""

from __future__ import annotations

import importlib
from types import ModuleType


def load_script(name: str) -> ModuleType:
    """The module of `cleanrl/{name}.py`: its definitions (`Args`, `make_env`, `Agent`), not its
    training, which runs only under `if __name__ == "__main__"`. `name` is the script's name
    (`ppo_atari`), or its module name (`cleanrl.ppo_atari`) as model files record it."""
    short = name.removeprefix("cleanrl.")
    if not short.isidentifier():
        raise ValueError(f"{name!r} does not name a script of cleanrl/")
    return importlib.import_module(f"cleanrl.{short}")
