"""Helpers for the report tool's tests: run folders written as the scripts write them (real
event files), the report run in process, and its markdown tables read back."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from cleanrl_utils import report
from cleanrl_utils.files.run_names import file_env_id


def make_run(
    root: Path,
    script: str,
    env_id: str,
    seed: int,
    returns: list[float],
    *,
    total_steps: int = 10240,
    budget: int | None = None,
    sps: float = 500.0,
    minutes: float = 10.0,
    config: bool = True,
    started: int = 1700000000,
    record: dict | None = None,
) -> Path:
    """A run folder as the scripts write it: `config.json` and one event file with
    `charts/episodic_return` (the games spread evenly over the run), a `charts/SPS` and a
    `losses/value_loss` every 1024 steps, and wall times spread over `minutes` from the
    writer's start. `budget` (default: `total_steps`) is the step budget in `config.json`;
    `started`, the start time in the run's name; `record`, more of config.json (the command
    is `cleanrl/{script}.py` unless it says otherwise)."""
    from torch.utils.tensorboard import SummaryWriter

    name = f"{file_env_id(env_id)}__{script}__{seed}__{started}"
    run_dir = root / name
    start = time.time()
    writer = SummaryWriter(str(run_dir))

    def wall(step):
        return start + 60 * minutes * step / total_steps

    for i, value in enumerate(returns):
        step = (i + 1) * total_steps // (len(returns) + 1)
        writer.add_scalar("charts/episodic_return", value, step, walltime=wall(step))
        writer.add_scalar("charts/episodic_length", 50, step, walltime=wall(step))
    for step in range(1024, total_steps + 1, 1024):
        writer.add_scalar("losses/value_loss", 0.5, step, walltime=wall(step))
        writer.add_scalar("charts/SPS", sps, step, walltime=wall(step))
    writer.close()
    if config:
        budget = budget or total_steps
        args = {"exp_name": script, "env_id": env_id, "seed": seed, "total_timesteps": budget}
        args.update(batch_size=1024, num_iterations=budget // 1024)
        record = {
            "run_name": name,
            "args": args,
            "command": [f"cleanrl/{script}.py"],
            "git": {"commit": "0123456789abcdef"},
            **(record or {}),
        }
        (run_dir / "config.json").write_text(json.dumps(record))
    return run_dir


def run_report(out: Path, *runs: Path, extra: tuple[str, ...] = ()) -> int:
    return report.main(["--runs", *map(str, runs), "--output-dir", str(out), *extra])


def table_rows(markdown: str) -> list[list[str]]:
    """The cells of every table row in `markdown` (header rows included, rules left out)."""
    rows = []
    for line in markdown.splitlines():
        if line.startswith("|") and not line.startswith("| ---"):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def expect_usage_error(argv: list[str], capsys) -> str:
    """Exit code 2 with one `error:` line on stderr and nothing on stdout; returns the line."""
    with pytest.raises(SystemExit) as exc:
        report.main(argv)
    assert exc.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("error: ") and err.count("\n") == 1, (out, err)
    return err
