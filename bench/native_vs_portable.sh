#!/usr/bin/env bash
# The cost of a portable build (issue 16): bench_model built for this CPU
# (build/, WS_NATIVE=ON: -march=native, the developer default) against the same
# source built for the generic x86-64 baseline (build-portable/, WS_NATIVE=OFF,
# as the Debian package is), same build type, run alternately in one window.
# Compares the one-thread rates per CPU second (on a shared machine wall time
# counts the waits for a core) and prints, per rate, the median of the rounds
# and the ratio portable/native. OpenBLAS picks its own kernels at run time
# either way, so the ratio is the cost in worldstate's own code.
#   bash bench/native_vs_portable.sh [ROUNDS] [SECONDS]     (defaults 3 and 2)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3} seconds=${2:-2}
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWS_NATIVE=ON > /dev/null
cmake -S . -B build-portable -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWS_NATIVE=OFF -DWS_CUDA=OFF > /dev/null
cmake --build build -j "$(nproc)" --target bench_model > /dev/null
cmake --build build-portable -j "$(nproc)" --target bench_model > /dev/null
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for r in $(seq "$rounds"); do
  for b in build build-portable; do
    echo "$b $($b/bench/bench_model --seconds "$seconds" --no-torch | tail -1)" >> "$out"
  done
done
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
runs = {"build": [], "build-portable": []}
for line in open(sys.argv[1]):
    name, js = line.split(" ", 1)
    runs[name].append(json.loads(js))
keys = ["train_steps_per_cpu_s_1t", "updater_steps_per_cpu_s_1t", "extractor_queries_per_cpu_s_1t"]
res = {"bench": "native_vs_portable", "rounds": int(sys.argv[2])}
print(f"{'one thread, per CPU second':34} {'native':>10} {'portable':>10} {'portable/native':>16}")
for k in keys:
    n = statistics.median(r[k] for r in runs["build"])
    p = statistics.median(r[k] for r in runs["build-portable"])
    print(f"{k:34} {n:10.2f} {p:10.2f} {p / n:16.3f}")
    res[k] = {"native": n, "portable": p, "ratio": round(p / n, 3)}
print(json.dumps(res))
PY
