"""The life of one training run, from its arguments to its exit code: `Run`, which every script in
`cleanrl/` uses (`with Run(args, __file__) as run:`), and its parts, each with one job:

- `lifecycle`: `Run` itself, which composes the parts below in the order a run lives;
- `resume`: `--resume`, the checkpoint a run continues from and the arguments it continues with;
- `checkpoints`: the run's checkpoints, how many are kept, a rewind's set-aside line;
- `records`: config.json, the TensorBoard event file's first records, the W&B run;
- `stops`: the stop signals, from the handler to the process's end;
- `process`: what a run changes in its process and gives back when it ends;
- `folder_guard`: what keeps the run folder whole (its lock, a failing disk, TensorBoard's writer);
- `diverged`: a training whose state is no longer finite.
"""

from cleanrl_utils.run.lifecycle import KEEP, STOP_SIGNALS, Run, RunError

__all__ = ["KEEP", "STOP_SIGNALS", "Run", "RunError"]
