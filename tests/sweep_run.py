"""A run of the launcher test's sweep (tests/test_benchmark_launcher.py), as a real process:
`python tests/sweep_run.py --env-id ENV --seed N`, as the launcher starts a script of cleanrl/
(tests/test_resume.py rewinds one too).
It goes through the scripts' whole lifecycle (`cleanrl_utils.run.Run`: the run folder and its
lock, config.json, TensorBoard, checkpoints, stop signals, `--resume`, the sweep, a launcher that
is gone) around iterations that only log their step: `ITERATIONS[seed]` of them, each taking
`SLOW_S` while a file `slow` is in the working folder (then at once), so that the test can have
one seed finish while another trains on, then let the rest finish quickly."""

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import cleanrl_utils.entry  # noqa: F401 (first, as in the scripts)
from cleanrl_utils.checks.args import parse_args
from cleanrl_utils.console.errors import entry_point
from cleanrl_utils.run import Run

ITERATIONS = {1: 2, 2: 400, 3: 400}
SLOW_S = 0.1


@dataclass
class Args:
    exp_name: str = "sweep_run"
    """the name of this experiment"""
    seed: int = 1
    """seed of the experiment"""
    env_id: str = "Breakout-v5"
    """the id of the environment"""
    resume: str | None = None
    """a run folder, a checkpoint file or `auto`"""
    checkpoint_every: int = 0
    """checkpoint every this many iterations (0: after the last and after a stop)"""
    num_envs: int = 1
    """the number of environments"""
    num_steps: int = 8
    """the steps of each environment per iteration"""
    total_timesteps: int = 0
    """the steps in all (0: from the seed)"""
    learning_rate: float = 2.5e-4
    """unused: a float flag of the scripts', for the tuner's tests to search over"""
    ent_coef: float = 0.01
    """unused, as `learning_rate`"""
    batch_size: int = field(default=0, init=False)
    """the steps of an iteration (filled in at runtime)"""
    num_iterations: int = field(default=0, init=False)
    """the iterations (filled in at runtime)"""


if __name__ == "__main__":
    args = parse_args(Args)
    with entry_point(), Run(args, __file__) as run:  # (as the scripts)
        args = run.args
        args.batch_size = args.num_envs * args.num_steps
        args.total_timesteps = args.total_timesteps or ITERATIONS[args.seed] * args.batch_size
        args.num_iterations = args.total_timesteps // args.batch_size
        writer = run.start()
        run.restore({})
        for iteration in range(run.start_iteration, args.num_iterations + 1):
            if Path("slow").exists():
                time.sleep(SLOW_S)
            global_step = iteration * args.batch_size
            writer.add_scalar("charts/SPS", 1.0, global_step)
            # (a "game" per iteration, its return the process's first iteration: the report's
            # curve tells which process, so which line of a rewound run, logged each step)
            writer.add_scalar("charts/episodic_return", float(run.start_iteration), global_step)
            run.end_iteration(iteration, global_step, [], {})
            if run.stop_requested:
                break
    sys.exit(run.exit_code())
