#!/usr/bin/env bash
# Regenerates the golden files tests/test_golden.c compares the C model against
# (tests/golden/model_small.safetensors, model_nonorm.safetensors) with the PyTorch
# reference (tests/reference/ws_ref.py). Needs Debian's python3 with torch + numpy.
# Deterministic: rerunning gives identical files. Extra arguments pass through
# (--check compares instead of writing; --spread reports float32-vs-float64 spread).
set -euo pipefail
cd "$(dirname "$0")/.."
exec /usr/bin/python3 tests/reference/gen_golden.py "$@"
