#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, one per parser of a client's bytes) with
# clang, AddressSanitizer and UBSan into build-fuzz/, then runs each for
# SECONDS (default 60) from its committed seeds (fuzz/corpus/NAME); what it
# learns stays in build-fuzz/corpus/. Fails on the first crash, leak, hang
# (-timeout) or sanitizer report; the input is saved as
# build-fuzz/artifacts/TARGET-crash-*, replayed by build-fuzz/fuzz/TARGET FILE.
#   bash scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(fuzz_json fuzz_request fuzz_utf8 fuzz_path fuzz_checkpoint)

CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWS_FUZZ=ON \
  -DWS_SANITIZE=address,undefined -DWS_CUDA=OFF > build-fuzz.log 2>&1 || { cat build-fuzz.log; exit 1; }
cmake --build build-fuzz -j "$(nproc)" --target fuzz >> build-fuzz.log 2>&1 || { tail -50 build-fuzz.log; exit 1; }

# OpenBLAS and OpenMP keep thread pools alive at exit: not our leaks.
export LSAN_OPTIONS=suppressions=$PWD/scripts/lsan.supp
export UBSAN_OPTIONS=print_stacktrace=1
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
mkdir -p build-fuzz/artifacts
for t in "${targets[@]}"; do
  mkdir -p "build-fuzz/corpus/$t"
  log=build-fuzz/$t.log
  dict=()  # fuzz/NAME.dict: the words of its format, where it has one
  [[ -f fuzz/${t#fuzz_}.dict ]] && dict=(-dict="fuzz/${t#fuzz_}.dict")
  if ! build-fuzz/fuzz/$t -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
       -print_final_stats=1 -artifact_prefix="build-fuzz/artifacts/$t-" "${dict[@]}" \
       "build-fuzz/corpus/$t" "fuzz/corpus/${t#fuzz_}" > "$log" 2>&1; then
    tail -60 "$log"
    echo "fuzz: $t FAILED (log $log, input in build-fuzz/artifacts/)" >&2
    exit 1
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
  echo "fuzz: $t ok: $runs runs in ${secs}s, $cov, corpus $(ls "build-fuzz/corpus/$t" | wc -l) inputs"
done
