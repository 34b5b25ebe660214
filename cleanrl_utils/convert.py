"""Convert files of the older, pickle formats that you trust into the current ones, in place:

    python -m cleanrl_utils.convert runs/RUN/checkpoint_0000200.ckpt runs/RUN/ppo_atari_envpool.cleanrl_model

A checkpoint (`CLEANRL-CHECKPOINT-1`, a pickle) becomes a checkpoint of `cleanrl_utils.files.state_file`'s
code-free format; a torch model file (`torch.save`) becomes a safetensors model file
(`cleanrl_utils.files.model_file`). Converting unpickles the file, which runs any code a pickle
carries: this command is for files you or your own runs wrote, never for downloaded ones. Nothing
else in this project unpickles anything.
"""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import tyro

from cleanrl_utils.checks.args import parse_args
from cleanrl_utils.console import extras, output
from cleanrl_utils.console.errors import entry_point, fail
from cleanrl_utils.files.atomic import atomic_write_bytes
from cleanrl_utils.files.model_file import METADATA_KEY, ZIP_MAGIC, model_info
from cleanrl_utils.files.state_file import (
    PICKLE_MAGIC,
    CorruptCheckpoint,
    checked_body,
    write_checkpoint,
)


@dataclass
class ConvertArgs:
    """Convert trusted checkpoints and torch model files of the older pickle formats, in place."""

    files: Annotated[tuple[str, ...], tyro.conf.Positional]
    """the files (a pickle runs code when it is read: only files you trust)"""


def convert_checkpoint(path: Path, raw: bytes) -> None:
    try:
        payload = pickle.loads(checked_body(raw, PICKLE_MAGIC))
    except CorruptCheckpoint as exc:
        fail(f"{path}: {exc}")
    write_checkpoint(path, payload)


def convert_torch_model(path: Path) -> None:
    import torch
    from safetensors.torch import save

    old = torch.load(path, map_location="cpu", weights_only=False)
    info = model_info(old["script"].removeprefix("cleanrl."), old["args"])
    weights = {name: t.contiguous() for name, t in old["model_state_dict"].items()}
    atomic_write_bytes(path, save(weights, metadata={METADATA_KEY: json.dumps(info)}))


@entry_point()
def main(argv=None) -> None:
    args = parse_args(ConvertArgs, argv, prog="python -m cleanrl_utils.convert")
    for name in args.files:
        path = Path(name)
        if not path.is_file():
            fail(f"no such file: {path}")
        raw = path.read_bytes()
        if raw.startswith(PICKLE_MAGIC):
            convert_checkpoint(path, raw)
        elif raw.startswith(ZIP_MAGIC):
            convert_torch_model(path)
        else:
            fail(f"{path} is neither a pickle checkpoint nor a torch.save model file")
        print(f"converted {path}")


if __name__ == "__main__":
    output.guard()  # a lost stdout or stderr (a full disk, `| head`, `2>&-`): said, not a traceback
    extras.install()  # a missing optional package: one line naming its install command
    main()
