#!/usr/bin/env bash
# gpu-train.sh — trains the shipped default model on a GPU: worldstate-train on its
# CUDA backend (--backend cuda: the same trainer, task and checkpoints as
# scripts/train-default.sh, the products on the GPU), resumed from
# models/default.safetensors, on stage K's task of that recipe with many more
# trajectories a step than 2 CPU cores allow (issue 11: K = 16 facts is where the
# CPU-trained default falls short of 99%). The CPU recipe ran about 1,500-3,700
# trajectory steps/s; what a GPU runs is what this script is for finding out.
#
#   scripts/gpu-train.sh DEPS_DIR OUT_DIR SECONDS [worldstate-train flags...]
#
# DEPS_DIR as for gpu-check.sh (`scripts/gpu-check.sh fetch build-gpudeps` on a
# Debian machine; empty "" uses the system's libraries). Flags given after
# SECONDS override the stage's below (the last of a flag given twice wins).
# OUT_DIR gets train.log (JSON lines), train.txt, stage.ckpt (with AdamW state,
# every 2,000 iterations and at the end) and default.safetensors (parameters
# alone: the candidate for models/default.safetensors), then bench_memory's
# table of it on the GPU machine's CPU. With this workplace's device tool, where
# a call may run 600 s in all: the build takes a minute or two, so SECONDS 300
# leaves room for the benchmark:
#   run: bash scripts/gpu-train.sh build-gpudeps "$OUT" 300   carry ["build-gpudeps"]
# Here, after: build/bench/bench_memory --checkpoint OUT/default.safetensors
#   --ks 4,8,16,64 --delays 1,10,100,1000,10000, and against the shipped file.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -ge 3 ]] || { echo "usage: $0 DEPS_DIR OUT_DIR SECONDS [worldstate-train flags...]" >&2; exit 2; }
deps=$1 out=$2 seconds=$3
shift 3
build=${BUILD_DIR:-build-gpu}
source scripts/gpu-env.sh
gpu_env "$deps"

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
cmake -S . -B "$build" "${cmake_args[@]}" > /dev/null
cmake --build "$build" -j "$(nproc)" --target worldstate-train ws_kernels_cuda bench_memory
mkdir -p "$out"
# Stage K's task (train-default.sh) at 32 times its batch: a peak learning rate
# a little over stage K's, after a warmup long enough for AdamW's moments (the
# shipped file carries none), decaying to a tenth over the budget.
"$build/server/worldstate-train" train --backend cuda --task memory --no-eval --iters 0 \
  --resume models/default.safetensors --seed 71 --batch 2048 --lr 3e-4 --warmup 300 \
  --min-lr-ratio 0.1 --live-facts 24 --live-facts-min 6 --instr-per-step 6 --chatter-rate 0.5 \
  --max-arity 4 --lifetime fixed --rollout 16 --seconds "$seconds" "$@" \
  --log "$out/train.log" --checkpoint "$out/stage.ckpt" --ship "$out/default.safetensors" |
  tee "$out/train.txt"
"$build/bench/bench_memory" --checkpoint "$out/default.safetensors" --ks 4,8,16,64 \
  --delays 1,10,100 | tee "$out/bench_memory.txt"
