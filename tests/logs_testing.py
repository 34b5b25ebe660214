"""Helpers for the tests that read what a run logged: its TensorBoard scalars and texts, read
as TensorBoard reads them."""

from __future__ import annotations

import os
from pathlib import Path

# the scalars every script logs once per iteration, at the iteration's last step
LOGGED_EVERY_ITERATION = [
    "charts/learning_rate",
    "charts/SPS",
    "losses/value_loss",
    "losses/policy_loss",
    "losses/entropy",
    "losses/old_approx_kl",
    "losses/approx_kl",
    "losses/clipfrac",
    "losses/explained_variance",
    "time/rollout",
    "time/advantages",
    "time/update",
]


def event_accumulator(run_dir: str | os.PathLike, files: int | None = 1):
    """The loaded TensorBoard events of a run folder, read as TensorBoard reads them (a resumed
    run's later files purge what the killed run logged after its checkpoint). `files`: how many
    event files the folder must hold (None: any number)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    found = sorted(Path(run_dir).glob("events.out.tfevents.*"))
    if files is not None:
        assert len(found) == files, f"expected {files} event file(s) in {run_dir}: {found}"
    accumulator = EventAccumulator(str(run_dir), size_guidance={"scalars": 0, "tensors": 0})
    accumulator.Reload()
    return accumulator


def read_scalars(
    run_dir: str | os.PathLike, files: int | None = 1
) -> dict[str, list[tuple[int, float]]]:
    """Every scalar of a run: tag -> [(step, value), ...] in logging order."""
    accumulator = event_accumulator(run_dir, files)
    return {
        tag: [(event.step, event.value) for event in accumulator.Scalars(tag)]
        for tag in accumulator.Tags()["scalars"]
    }


def read_texts(run_dir: str | os.PathLike) -> dict[str, str]:
    """Every text summary of a run (`writer.add_text`): name -> text of its first record."""
    accumulator = event_accumulator(run_dir)
    texts = {}
    for tag in accumulator.Tags()["tensors"]:
        if accumulator.SummaryMetadata(tag).plugin_data.plugin_name != "text":
            continue
        name = tag.removesuffix("/text_summary")
        texts[name] = accumulator.Tensors(tag)[0].tensor_proto.string_val[0].decode()
    return texts
