#!/usr/bin/env bash
# The published PPO Atari tables (docs/published.md; the numbers in
# cleanrl_utils/data/published_ppo_atari.csv), and the ALE vector script on the same games: one
# launcher call per script, 3 seeds x 10M steps,
# each run an array task with one GPU and 10 CPUs (benchmark/cleanrl_1gpu.slurm_template).
# Run from the repository root on a SLURM login node: `bash benchmark/ppo.sh`. Each call only
# submits its array and returns; `squeue --me` shows them, logs go to slurm/logs/. A rejected
# submission stops the script and leaves no rendered file behind. Where there is no SLURM
# (no sbatch on the PATH), the first call stops with one error line and its local command.
#
# To run a call on this machine instead, drop its four --slurm-* flags and set --workers to the
# runs the machine holds at once; logs then go to benchmark_logs/ and each run gets
# CPUs // workers threads (docs/benchmark_launcher.md).
set -euo pipefail

# locally: python -m cleanrl_utils.benchmark --env-ids PongNoFrameskip-v4 \
#   --command "python cleanrl/ppo_atari.py" --num-seeds 3 --workers 2
python -m cleanrl_utils.benchmark \
    --env-ids PongNoFrameskip-v4 BeamRiderNoFrameskip-v4 BreakoutNoFrameskip-v4 \
    --command "python cleanrl/ppo_atari.py --track --capture_video" \
    --num-seeds 3 \
    --workers 9 \
    --slurm-gpus-per-task 1 \
    --slurm-ntasks 1 \
    --slurm-total-cpus 10 \
    --slurm-template-path benchmark/cleanrl_1gpu.slurm_template

# locally: python -m cleanrl_utils.benchmark --env-ids PongNoFrameskip-v4 \
#   --command "python cleanrl/ppo_atari_lstm.py" --num-seeds 3 --workers 2
python -m cleanrl_utils.benchmark \
    --env-ids PongNoFrameskip-v4 BeamRiderNoFrameskip-v4 BreakoutNoFrameskip-v4 \
    --command "python cleanrl/ppo_atari_lstm.py --track --capture_video" \
    --num-seeds 3 \
    --workers 9 \
    --slurm-gpus-per-task 1 \
    --slurm-ntasks 1 \
    --slurm-total-cpus 10 \
    --slurm-template-path benchmark/cleanrl_1gpu.slurm_template

# locally: python -m cleanrl_utils.benchmark --env-ids Pong-v5 \
#   --command "python cleanrl/ppo_atari_envpool.py" --num-seeds 3 --workers 2
python -m cleanrl_utils.benchmark \
    --env-ids Pong-v5 BeamRider-v5 Breakout-v5 \
    --command "python cleanrl/ppo_atari_envpool.py --track --capture_video" \
    --num-seeds 3 \
    --workers 9 \
    --slurm-gpus-per-task 1 \
    --slurm-ntasks 1 \
    --slurm-total-cpus 10 \
    --slurm-template-path benchmark/cleanrl_1gpu.slurm_template

# all 57 Atari games (`atari57`, a game set of the launcher: each game's `-v5` id, as printed);
# five games instead, with the 57-game median estimated from them (docs/atari5.md): atari5.
# Locally (one game at a time: the JAX script uses every core):
# python -m cleanrl_utils.benchmark --env-ids atari5 \
#   --command "python cleanrl/ppo_atari_envpool_xla_jax.py" --num-seeds 3 --workers 1
python -m cleanrl_utils.benchmark \
    --env-ids atari57 \
    --command "python cleanrl/ppo_atari_envpool_xla_jax.py --track --capture_video" \
    --num-seeds 3 \
    --workers 9 \
    --slurm-gpus-per-task 1 \
    --slurm-ntasks 1 \
    --slurm-total-cpus 10 \
    --slurm-template-path benchmark/cleanrl_1gpu.slurm_template

# locally: python -m cleanrl_utils.benchmark --env-ids Pong-v5 \
#   --command "python cleanrl/ppo_atari_envpool_xla_jax_scan.py" --num-seeds 3 --workers 1
python -m cleanrl_utils.benchmark \
    --env-ids Pong-v5 BeamRider-v5 Breakout-v5 \
    --command "python cleanrl/ppo_atari_envpool_xla_jax_scan.py --track --capture_video" \
    --num-seeds 3 \
    --workers 9 \
    --slurm-gpus-per-task 1 \
    --slurm-ntasks 1 \
    --slurm-total-cpus 10 \
    --slurm-template-path benchmark/cleanrl_1gpu.slurm_template

# ppo_atari_envpool.py on ALE's own vector env (no published table: the same three games, to
# compare with the EnvPool script's; ALE's ids, `ALE/Pong-v5`, work as well);
# locally: python -m cleanrl_utils.benchmark --env-ids Pong-v5 \
#   --command "python cleanrl/ppo_atari_ale_vector.py" --num-seeds 3 --workers 2
python -m cleanrl_utils.benchmark \
    --env-ids Pong-v5 BeamRider-v5 Breakout-v5 \
    --command "python cleanrl/ppo_atari_ale_vector.py --track --capture_video" \
    --num-seeds 3 \
    --workers 9 \
    --slurm-gpus-per-task 1 \
    --slurm-ntasks 1 \
    --slurm-total-cpus 10 \
    --slurm-template-path benchmark/cleanrl_1gpu.slurm_template
