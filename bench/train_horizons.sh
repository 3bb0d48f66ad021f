#!/usr/bin/env bash
# Issue #3's long-horizon benchmarks: train each task with truncated gradients on
# short rollouts, then roll fresh worlds out to 10,000 steps and print accuracy
# against horizon (tables + JSON lines). Same iteration budget within a group of
# rows, so the schemes and the state-LayerNorm ablation are compared fairly.
#   bench/train_horizons.sh [facts4|facts8|facts8s|facts8s-rmc|facts8s-rmc-nonorm|life|numbers|all] [OUTDIR]
# Environment: SKIP_DONE=1 keeps finished runs; EXTRA adds arguments to every run
# (e.g. EXTRA="--trajectories 16" for cheaper 10,000-step evaluations);
# LIFE_ITERS, NUMBERS_ITERS, HORIZONS size the life and numbers runs; F8S_ITERS the
# facts8s pair (facts 8x8 on the small model: the plain Updater and the gated
# relational-memory one with and without LN_w, issue 7; the groups can run side by side).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${WS_TRAIN:-$here/build/server/worldstate-train}
what=${1:-all}
out=${2:-$here/build/horizons}
mkdir -p "$out"
# Idle OpenMP threads sleep instead of spinning: on a shared 2-core machine a
# spinning waiter steals the core its partner needs (30x slowdowns seen).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

run() { # name, then worldstate-train arguments (plus $EXTRA)
  local name=$1; shift
  if [[ ${SKIP_DONE:-} == 1 ]] && grep -q '^{"eval"' "$out/$name.txt" 2>/dev/null; then
    echo "=== $name: done before, kept"; return
  fi
  echo "=== $name: worldstate-train train $* ${EXTRA:-}"
  "$bin" train "$@" ${EXTRA:-} --checkpoint "$out/$name.safetensors" --log "$out/$name.log" \
    | tee "$out/$name.txt" | grep -v '^{"eval"' || true
  grep '^{"eval"' "$out/$name.txt" | sed "s/\"eval\":\"final\"/\"eval\":\"$name\"/"
}

small="--d 48 --heads 2 --state-tokens 8 --upd-layers 1 --ext-layers 1 --batch 32 --lr 3e-3
       --warmup 50 --wd 0 --horizons 8,100,1000,10000"
mid="--d 64 --heads 4 --state-tokens 16 --upd-layers 2 --ext-layers 1 --batch 32 --lr 2e-3
     --warmup 100 --wd 0.01 --horizons 8,100,1000,10000"

if [[ $what == facts4 || $what == all ]]; then
  run facts4-norm --task facts $small --rollout 8 --lifetime fixed --iters 4000
  run facts4-nonorm --task facts $small --rollout 8 --lifetime fixed --iters 4000 --no-state-norm
fi
if [[ $what == facts8 || $what == all ]]; then
  f8="--task facts --entities 8 --places 8 $mid --iters 8000"
  run facts8-fixed8 $f8 --rollout 8 --lifetime fixed
  run facts8-fixed32 $f8 --rollout 32 --lifetime fixed
  run facts8-pool256 $f8 --rollout 8 --lifetime pool --max-age 256
  run facts8-fixed8-nonorm $f8 --rollout 8 --lifetime fixed --no-state-norm
fi
f8s="--task facts --entities 8 --places 8 $small --rollout 8 --lifetime fixed --iters ${F8S_ITERS:-6000}"
if [[ $what == facts8s || $what == all ]]; then
  run facts8s-plain $f8s
fi
if [[ $what == facts8s-rmc || $what == all ]]; then
  run facts8s-rmc $f8s --upd-mixer rmc
fi
if [[ $what == facts8s-rmc-nonorm || $what == all ]]; then
  run facts8s-rmc-nonorm $f8s --upd-mixer rmc --no-state-norm
fi
# Life and numbers: bounded runs; --horizons may be overridden through HORIZONS.
if [[ $what == life || $what == all ]]; then
  run life-fixed8 --task life $mid --empty-steps update --rollout 8 --lifetime fixed --iters ${LIFE_ITERS:-12000} \
    --horizons ${HORIZONS:-8,100,1000,10000}
fi
if [[ $what == numbers || $what == all ]]; then
  run numbers-fixed8 --task numbers $mid --empty-steps update --rollout 8 --lifetime fixed --iters ${NUMBERS_ITERS:-8000} \
    --horizons ${HORIZONS:-8,100,1000}
fi
