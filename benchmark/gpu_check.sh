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
#   5. ppo_atari_envpool_multigpu.py on two ranks over NCCL (two GPUs)
#   6. ppo_atari_envpool_xla_jax_scan_multigpu.py on every GPU JAX sees (two or more)
# A part that fails prints `FAILED: PART (...)` and the end of its output; the others still run;
# the exit code is 1 when any failed. Where torch (or JAX) sees no GPU, each GPU part prints
# `skipped: PART: WHY`. `--cpu` adds a tiny CPU part (two ranks over gloo) to check the
# machinery itself. GPU_CHECK_ITERATIONS (default 5) sets the measured iterations of each part.
set -u
cd "$(dirname "$0")/.."
python=${PYTHON:-python}
iterations=${GPU_CHECK_ITERATIONS:-5}
failed=0

measure() {  # measure NAME THROUGHPUT_FLAGS...: one part, with the GPUs' peak memory
    local name=$1 samples status
    shift
    echo "== $name"
    samples=$(mktemp)
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 500 > "$samples" 2>/dev/null &
    local sampler=$!
    "$python" benchmark/throughput.py --no-bounds --iterations "$iterations" "$@" 2>&1 | tail -n 25
    status=${PIPESTATUS[0]}
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

gpus=$("$python" -c "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)" 2>&1 | tail -n 1)
if ! [[ "$gpus" =~ ^[0-9]+$ ]]; then
    echo "error: cannot ask torch for GPUs: $gpus" >&2
    exit 2
fi

if [ "$gpus" -eq 0 ]; then
    why="torch sees no CUDA GPU here (torch.cuda.is_available() is False)"
    for part in "one process, eager" "one process, --compile" "one process, --cudagraphs" \
        "the JAX script" "two ranks on NCCL"; do
        echo "skipped: $part: $why"
    done
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
        measure "two ranks on NCCL" --scripts ppo_atari_envpool_multigpu --nproc 2 \
            --extra-args="--backend nccl"
    else
        echo "skipped: two ranks on NCCL: needs 2 GPUs, torch sees $gpus"
    fi
fi

# --- JAX on every device (ppo_atari_envpool_xla_jax_scan_multigpu.py), kept apart from the torch
# parts above: with 2+ GPUs JAX sees, the script on all of them, 8 envs per GPU (the global batch
# grows with the GPUs), steady steps per second
jax_gpus=$("$python" -c "import jax; print(sum(d.platform == 'gpu' for d in jax.devices()))" 2>/dev/null | tail -n 1)
if ! [[ "${jax_gpus:-}" =~ ^[0-9]+$ ]] || [ "$jax_gpus" -lt 2 ]; then
    echo "skipped: JAX on every GPU: needs 2 GPUs that JAX sees, it sees ${jax_gpus:-none} (its CUDA plugins: docs/installation.md)"
else
    measure "JAX on all $jax_gpus GPUs" --scripts ppo_atari_envpool_xla_jax_scan_multigpu --burn-in 2 \
        --extra-args="--num-envs $((8 * jax_gpus))"
fi

if [ "${1:-}" = "--cpu" ]; then
    measure "two ranks on gloo (CPU)" --scripts ppo_atari_envpool_multigpu --nproc 2 \
        --extra-args="--backend gloo --no-cuda --num-envs 4 --num-steps 32"
fi
exit $failed
