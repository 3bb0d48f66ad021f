#!/usr/bin/env bash
# Configures and builds everything into build/ (CUDA parts only where a toolkit is found).
# A developer build: warnings are errors (WS_WERROR) and code is tuned for this CPU
# (WS_NATIVE, on by default); a package is built portable (scripts/package-check.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWS_WERROR=ON > build.log 2>&1 || { cat build.log; exit 1; }
cmake --build build -j "$(nproc)" >> build.log 2>&1 || { tail -50 build.log; exit 1; }
echo "build: ok (log in build.log)"
