"""Tune `cleanrl/ppo_atari_envpool.py` on Breakout and Pong with Optuna (docs/tuning.md).

A CleanRL-style tuner file: `Tuner(...)` takes CleanRL's arguments, so a tuner file written for
CleanRL runs unchanged; `env_ids`, `workers` and `pruning_marks` are this project's additions.
Run from the repository root:

    python benchmark/tune_ppo_atari_envpool.py

Each trial trains both games for 1M steps (one seed), each run an ordinary run under runs/;
the objective is the mean human-normalised score of the last 50 games. Two trials run at once,
each run with half of the CPUs; a trial whose score lags the median of the earlier trials at the
same point of its runs is stopped there (with a checkpoint). Ctrl-C stops it all with
checkpoints, and the same command continues the study (tuner.db in this folder). The results:
tuner_logs/ppo_atari_envpool_breakout_pong/trials.md, .csv and .png.
"""

import optuna

from cleanrl_utils.tuner import Tuner


def params_fn(trial: optuna.Trial) -> dict:
    return {
        "learning-rate": trial.suggest_float("learning-rate", 1e-4, 1e-3, log=True),
        "num-minibatches": trial.suggest_categorical("num-minibatches", [2, 4, 8]),
        "ent-coef": trial.suggest_float("ent-coef", 0.0, 0.03),
        "total-timesteps": 1_000_000,
    }


tuner = Tuner(
    script="cleanrl/ppo_atari_envpool.py",
    metric="charts/episodic_return",
    target_scores={"Breakout-v5": None, "Pong-v5": None},  # None: human-normalised
    params_fn=params_fn,
    direction="maximize",
    aggregation_type="average",
    metric_last_n_average_window=50,
    sampler=optuna.samplers.TPESampler(seed=1),
    pruner=optuna.pruners.MedianPruner(n_startup_trials=5, n_warmup_steps=3),
    storage="sqlite:///tuner.db",
    study_name="ppo_atari_envpool_breakout_pong",
    workers=2,
    pruning_marks=10,
)

if __name__ == "__main__":
    tuner.tune(num_trials=30, num_seeds=1)
