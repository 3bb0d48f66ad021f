#!/usr/bin/env bash
# The whole test suite under AddressSanitizer (with LeakSanitizer) and UBSan:
# built into build-asan/ without CUDA (the sanitizers do not see into the GPU;
# scripts/gpu-check.sh runs compute-sanitizer there), every report fatal.
# Tests that train for minutes run a smaller configuration of the same code
# there (WS_TEST_SANITIZED, tests/test_util.h). Arguments go to ctest:
#   bash scripts/sanitize.sh [-R test_name] ...
# (valgrind works too: ctest -T memcheck in a normal build; ASan is ~10x faster.)
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWS_SANITIZE=address,undefined \
  -DWS_CUDA=OFF > build-asan.log 2>&1 || { cat build-asan.log; exit 1; }
cmake --build build-asan -j "$(nproc)" >> build-asan.log 2>&1 || { tail -50 build-asan.log; exit 1; }
# OpenBLAS and OpenMP keep thread pools alive at exit: not our leaks.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export LSAN_OPTIONS=suppressions=$PWD/scripts/lsan.supp
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
ctest --test-dir build-asan -j "$(nproc)" --output-on-failure "$@"
