#!/usr/bin/env bash
# Builds the test suite with AddressSanitizer + UBSan into build-asan/ and runs it.
# (valgrind works too: ctest -T memcheck in a normal build; ASan is ~10x faster.)
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWS_SANITIZE=ON > /dev/null
cmake --build build-asan -j "$(nproc)" > /dev/null
# OpenBLAS and OpenMP keep thread pools alive at exit: not our leaks.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export LSAN_OPTIONS=suppressions=$PWD/scripts/lsan.supp
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
ctest --test-dir build-asan --output-on-failure "$@"
