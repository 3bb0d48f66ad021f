#!/usr/bin/env bash
# Issue 7: multi-head attention vs the simplicial2 mixer on the conj task (agents
# hold keys, keys open boxes; "can agent i open box b?" is the conjunction of two
# instructions: model/tasks/conj.c). Same budget for every row: same iterations,
# width, layers, batch, learning-rate schedule and seeds; only the mixer differs.
#   mha          the default block everywhere
#   s2-ext       simplicial2 in the Extractor (queries attend to pairs of state
#                tokens: the conjunction of two stored facts, MIXERS.md §9), τ = 1
#                (the authors) and τ = 1/d2 (MIXERS.md §2.5)
#   s2-upd       simplicial2 in the Updater (the last M = 4 of T = 16 state tokens
#                are virtual entities), τ = 1/d2
# Each run trains with truncated gradients on 8-step rollouts, then evaluates
# fresh worlds at three horizons (accuracy over the 4 steps up to each, and the
# per-agent argmax "group" accuracy; chance: group 1/4, all-false 75%). Prints
# a table and one JSON line.
#   bench/mixer_conj.sh [OUTDIR]
# Environment: ITERS (3000), SEEDS ("1"), JOBS (2 runs at a time), SKIP_DONE=1
# keeps finished runs, ONLY="mha s2-ext-tau1 ..." picks rows, MOVE_RATE (1.0;
# 0: a static world, everything told at step 1, so only the conjunction is
# left to learn), HORIZONS (three, "8,32,100").
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${WS_TRAIN:-$here/build/server/worldstate-train}
out=${1:-$here/build/mixer_conj}
mkdir -p "$out"
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
iters=${ITERS:-3000}
seeds=${SEEDS:-1}
jobs=${JOBS:-2}
move=${MOVE_RATE:-1.0}
horizons=${HORIZONS:-8,32,100}
IFS=, read -r h1 h2 h3 <<< "$horizons"

common="--task conj --move-rate $move --d 64 --heads 4 --state-tokens 16
        --upd-layers 1 --ext-layers 1
        --batch 32 --rollout 8 --lifetime fixed --lr 2e-3 --warmup 100 --wd 0.01
        --iters $iters --threads 1 --horizons $horizons --trajectories 64"
s2="--s2-heads 1 --s2-dim 32"
declare -A rows=(
  [mha]=""
  [s2-ext-tau1]="--ext-mixer simplicial2 $s2 --s2-tau 1"
  [s2-ext-tau1/32]="--ext-mixer simplicial2 $s2 --s2-tau 0.03125"
  [s2-upd-tau1/32]="--upd-mixer simplicial2 $s2 --s2-virtual 4 --s2-tau 0.03125"
)
order=${ONLY:-"mha s2-ext-tau1 s2-ext-tau1/32 s2-upd-tau1/32"}

run() { # row, seed
  local name=${1//\//_}-s$2
  if [[ ${SKIP_DONE:-} == 1 ]] && grep -q '^{"eval"' "$out/$name.txt" 2>/dev/null; then return; fi
  # shellcheck disable=SC2086
  "$bin" train $common ${rows[$1]} --seed "$2" --log "$out/$name.log" > "$out/$name.txt" 2>&1
}

for seed in $seeds; do
  for row in $order; do
    while (( $(jobs -rp | wc -l) >= jobs )); do wait -n; done
    echo "=== $row seed $seed: worldstate-train train $(echo $common) ${rows[$row]} --seed $seed" >&2
    run "$row" "$seed" &
  done
done
wait

printf '\nconj (4 agents, 4 keys/boxes, move rate %s), %s iterations; chance: group 25%%, ' \
  "$move" "$iters"
printf 'all-false acc 75%%\n'
printf '%-16s %4s %8s %9s | %7s %7s | %7s %7s | %7s %7s\n' mixer seed "train s" "traj/s" \
  "acc@$h1" "grp@$h1" "acc@$h2" "grp@$h2" "acc@$h3" "grp@$h3"
json="{\"bench\":\"mixer_conj\",\"move_rate\":$move,\"iters\":$iters,\"runs\":["
sep=""
for seed in $seeds; do
  for row in $order; do
    f="$out/${row//\//_}-s$seed.txt"
    line=$(grep -m1 '^trained' "$f" || true)
    ev=$(grep -m1 '^{"eval"' "$f" || true)
    [[ -n $ev ]] || { printf '%-16s %4s  (no result: see %s)\n' "$row" "$seed" "$f"; continue; }
    secs=$(sed -E 's/.* in ([0-9.]+) s.*/\1/' <<< "$line")
    rate=$(sed -E 's/.* s, ([0-9.]+) trajectory.*/\1/' <<< "$line")
    mapfile -t v < <(grep -oE '"(acc|group_acc)":[0-9.]+' <<< "$ev" | cut -d: -f2)
    printf '%-16s %4s %8s %9s | %6.2f%% %6.2f%% | %6.2f%% %6.2f%% | %6.2f%% %6.2f%%\n' \
      "$row" "$seed" "$secs" "$rate" \
      "$(bc -l <<< "100*${v[0]}")" "$(bc -l <<< "100*${v[1]}")" \
      "$(bc -l <<< "100*${v[2]}")" "$(bc -l <<< "100*${v[3]}")" \
      "$(bc -l <<< "100*${v[4]}")" "$(bc -l <<< "100*${v[5]}")"
    json+="$sep{\"mixer\":\"$row\",\"seed\":$seed,\"train_s\":$secs,\"traj_per_s\":$rate,"
    json+="\"acc\":[${v[0]},${v[2]},${v[4]}],\"group_acc\":[${v[1]},${v[3]},${v[5]}]}"
    sep=","
  done
done
echo "$json],\"horizons\":[$horizons]}"
