"""Helpers for the tests that use `cleanrl_utils.run.Run` in-process (tests/test_run.py, and the
programs it runs as processes): a small run of `cleanrl/ppo_atari_envpool.py`, opened as a script
opens it."""

from __future__ import annotations

from pathlib import Path

from scripts_testing import REPO_ROOT

import cleanrl.ppo_atari_envpool as torch_script
from cleanrl_utils.run import Run

SCRIPT = str(REPO_ROOT / "cleanrl" / "ppo_atari_envpool.py")
SMALL = dict(num_envs=2, num_steps=4, num_minibatches=2, update_epochs=1, total_timesteps=40)


def derive_sizes(args):
    args.batch_size = args.num_envs * args.num_steps
    args.minibatch_size = args.batch_size // args.num_minibatches
    args.num_iterations = args.total_timesteps // args.batch_size


def open_run(runs_dir: Path, script: str = SCRIPT, **flags) -> Run:
    """What a script does before its loop: parse, resolve --resume, derive the sizes, start."""
    args = torch_script.Args(**{**SMALL, **flags})
    run = Run(args, script, runs_dir=str(runs_dir))
    derive_sizes(run.args)  # (the arguments as reconciled: a new object)
    run.start()
    return run
