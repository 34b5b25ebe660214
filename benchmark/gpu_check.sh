#!/bin/bash
# The GPU parts, checked in one command on a machine with CUDA GPUs (from the repository root,
# in the environment of the test install, with PyTorch's CUDA build; docs/installation.md):
#
#   bash benchmark/gpu_check.sh
#
# Each part runs a few training iterations through benchmark/throughput.py and prints its steady
# steps per second, the host's peak memory (RSS) and the GPUs' peak memory (nvidia-smi, sampled):
#   1. ppo_atari_envpool.py on one GPU, eager
#   2. the same with --compile
#   3. the same with --cudagraphs
#   4. ppo_atari_envpool_xla_jax.py (JAX on the GPU)
#   5. with 2+ GPUs, the data-parallel scripts: ppo_atari_envpool_multigpu.py eager, --compile and
#      --cudagraphs, each on one GPU and on all GPUs (NCCL; DATA_PARALLEL_ENVS envs per GPU,
#      default 8: the global batch grows with the GPUs), then one table: steps per second per
#      configuration and the scaling against one GPU; in the same table,
#      ppo_atari_envpool_xla_jax_scan_multigpu.py on one GPU and on every GPU JAX sees
# A part that fails prints `FAILED: PART (...)` and the end of its output; the others still run;
# the exit code is 1 when any failed. Where torch (or JAX) sees no GPU, each GPU part prints
# `skipped: PART: WHY`. `--cpu` adds a tiny CPU part (two ranks over gloo) to check the
# machinery itself. GPU_CHECK_ITERATIONS (default 5) sets the measured iterations of each part.
set -u
cd "$(dirname "$0")/.."
python=${PYTHON:-python}
iterations=${GPU_CHECK_ITERATIONS:-5}
per_gpu=${DATA_PARALLEL_ENVS:-8}
failed=0
declare -A sps  # part -> its steady steps per second (the table of the data-parallel parts)

measure() {  # measure NAME THROUGHPUT_FLAGS...: one part, with the GPUs' peak memory
    local name=$1 samples status table
    shift
    echo "== $name"
    samples=$(mktemp)
    table=$(mktemp)
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 500 > "$samples" 2>/dev/null &
    local sampler=$!
    "$python" benchmark/throughput.py --no-bounds --iterations "$iterations" --markdown "$table" \
        "$@" 2>&1 | tail -n 25
    status=${PIPESTATUS[0]}
    # the steady SPS: the second column of the script's row
    sps[$name]=$(awk -F'|' '/^\| `/ { gsub(/[ ,]/, "", $3); print $3; exit }' "$table")
    rm -f "$table"
    kill "$sampler" 2>/dev/null
    wait "$sampler" 2>/dev/null
    local peak
    peak=$(sort -n "$samples" | tail -n 1)
    rm -f "$samples"
    if [ "$status" -eq 0 ]; then
        echo "ok: $name (GPU memory peak: ${peak:-?} MiB per GPU, nvidia-smi)"
    else
        echo "FAILED: $name (exit code $status; its output is above)"
        failed=1
    fi
}

data_parallel() {  # the data-parallel parts on 1 GPU and on all $gpus GPUs, then their table
    local mode extra rows=() row label one all
    for mode in eager --compile --cudagraphs; do
        extra="--backend nccl"
        [ "$mode" = eager ] || extra="$extra $mode"
        measure "torch, 1 GPU, $mode" --scripts ppo_atari_envpool_multigpu --nproc 1 \
            --extra-args="$extra --num-envs $per_gpu"
        measure "torch, $gpus GPUs, $mode" --scripts ppo_atari_envpool_multigpu --nproc "$gpus" \
            --extra-args="$extra --num-envs $((per_gpu * gpus))"
        rows+=("torch ppo_atari_envpool_multigpu.py, $mode|torch, 1 GPU, $mode|torch, $gpus GPUs, $mode")
    done
    if [[ "${jax_gpus:-}" =~ ^[0-9]+$ ]] && [ "$jax_gpus" -ge 2 ]; then  # the JAX script, alike
        CUDA_VISIBLE_DEVICES=0 measure "JAX, 1 GPU" --scripts ppo_atari_envpool_xla_jax_scan_multigpu \
            --burn-in 2 --extra-args="--num-envs $per_gpu"
        measure "JAX, $jax_gpus GPUs" --scripts ppo_atari_envpool_xla_jax_scan_multigpu \
            --burn-in 2 --extra-args="--num-envs $((per_gpu * jax_gpus))"
        rows+=("JAX ppo_atari_envpool_xla_jax_scan_multigpu.py|JAX, 1 GPU|JAX, $jax_gpus GPUs")
    else
        echo "skipped: JAX on every GPU: needs 2 GPUs that JAX sees, it sees ${jax_gpus:-none} (its CUDA plugins: docs/installation.md)"
    fi
    echo "== data parallel on $gpus GPUs: steady steps per second, $per_gpu envs per GPU"
    echo "| configuration | 1 GPU | $gpus GPUs | scaling | per GPU |"
    echo "|---|---:|---:|---:|---:|"
    for row in "${rows[@]}"; do
        IFS='|' read -r label one all <<< "$row"
        one=${sps[$one]:-} all=${sps[$all]:-}
        if [[ "$one" =~ ^[0-9.]+$ && "$all" =~ ^[0-9.]+$ ]] && [ "${one//[0.]/}" != "" ]; then
            awk -v l="$label" -v o="$one" -v a="$all" -v n="$gpus" \
                'BEGIN { printf "| %s | %s | %s | %.2fx | %.0f%% |\n", l, o, a, a / o, 100 * a / o / n }'
        else
            echo "| $label | ${one:-failed} | ${all:-failed} | | |"
        fi
    done
}

gpus=$("$python" -c "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)" 2>&1 | tail -n 1)
jax_gpus=$("$python" -c "import jax; print(sum(d.platform == 'gpu' for d in jax.devices()))" 2>/dev/null | tail -n 1)
if ! [[ "$gpus" =~ ^[0-9]+$ ]]; then
    echo "error: cannot ask torch for GPUs: $gpus" >&2
    exit 2
fi

if [ "$gpus" -eq 0 ]; then
    why="torch sees no CUDA GPU here (torch.cuda.is_available() is False)"
    for part in "one process, eager" "one process, --compile" "one process, --cudagraphs" \
        "the JAX script"; do
        echo "skipped: $part: $why"
    done
    echo "skipped: the data-parallel scripts on all GPUs (eager, --compile, --cudagraphs) and their table: $why"
    echo "skipped: JAX on every GPU: needs 2 GPUs that JAX sees, it sees ${jax_gpus:-none} (its CUDA plugins: docs/installation.md)"
else
    script=(--scripts ppo_atari_envpool)
    measure "one process, eager" "${script[@]}"
    measure "one process, --compile" "${script[@]}" --extra-args=--compile
    measure "one process, --cudagraphs" "${script[@]}" --extra-args=--cudagraphs
    jax_backend=$("$python" -c "import jax; print(jax.default_backend())" 2>/dev/null | tail -n 1)
    if [ "$jax_backend" = "gpu" ] || [ "$jax_backend" = "cuda" ]; then
        measure "the JAX script" --scripts ppo_atari_envpool_xla_jax --burn-in 2
    else
        echo "skipped: the JAX script: JAX runs on '${jax_backend:-nothing}', not a GPU (its CUDA plugins: docs/installation.md)"
    fi
    if [ "$gpus" -ge 2 ]; then
        data_parallel
    else
        echo "skipped: the data-parallel scripts on all GPUs (eager, --compile, --cudagraphs) and their table: needs 2 GPUs, torch sees $gpus"
        echo "skipped: JAX on every GPU: needs 2 GPUs that JAX sees, it sees ${jax_gpus:-none} (its CUDA plugins: docs/installation.md)"
    fi
fi

if [ "${1:-}" = "--cpu" ]; then
    measure "two ranks on gloo (CPU)" --scripts ppo_atari_envpool_multigpu --nproc 2 \
        --extra-args="--backend gloo --no-cuda --num-envs 4 --num-steps 32"
fi
exit $failed
