#!/usr/bin/env bash
# gpu-check.sh — builds worldstate with its CUDA backend on a machine with a GPU and
# checks the backend: tests/test_backend_cuda (every op and a whole model step
# against the CPU backend; a skip counts as a failure here), test_golden (which
# also runs on the automatic backend, CUDA there), both again with TF32 products,
# then test_backend_cuda under compute-sanitizer memcheck.
#
#   scripts/gpu-check.sh fetch DEPS_DIR
#       On a Debian 12 machine with apt (not the GPU one): downloads the libraries the
#       build needs that a GPU image with nvcc/cmake but no Debian -dev packages lacks
#       (cmocka, OpenBLAS, cJSON, SQLite, pkg-config) and unpacks them with dpkg -x
#       under DEPS_DIR. Keep DEPS_DIR inside the checkout and git-ignored, so that it
#       can travel to the GPU machine.
#   scripts/gpu-check.sh run [DEPS_DIR] [BUILD_DIR]
#       On the GPU machine: configures with DEPS_DIR as an extra prefix (pkg-config
#       sysroot), builds into BUILD_DIR (default build-gpu) and runs the checks.
#
# With this workplace's device tool: here `scripts/gpu-check.sh fetch build-gpudeps`
# (build*/ is git-ignored), then run `scripts/gpu-check.sh run build-gpudeps` there
# with carry ["build-gpudeps"] (about 45 MB).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-run}
deps=${2:-}
build=${3:-build-gpu}
arch=x86_64-linux-gnu

if [[ "$mode" == fetch ]]; then
  [[ -n "$deps" ]] || { echo "usage: $0 fetch DEPS_DIR" >&2; exit 2; }
  mkdir -p "$deps/debs"
  # libmicrohttpd/libcurl only let the whole project configure (server, its tests);
  # the targets built here do not link them.
  (cd "$deps/debs" && apt-get download libcmocka0 libcmocka-dev libopenblas0-pthread \
      libopenblas-pthread-dev libopenblas-dev libgfortran5 libquadmath0 libcjson1 \
      libcjson-dev libsqlite3-0 libsqlite3-dev zlib1g-dev pkgconf pkgconf-bin libpkgconf3 \
      libmicrohttpd12 libmicrohttpd-dev libcurl4 libcurl4-openssl-dev libinih1 libinih-dev)
  for f in "$deps"/debs/*.deb; do dpkg -x "$f" "$deps"; done
  # Small enough to travel (static archives and docs are not needed).
  rm -rf "$deps/debs" "$deps/usr/share/doc" "$deps/usr/share/man"
  find "$deps" \( -name '*.a' -o -name 'liblapack.so*' \) -delete
  # libmicrohttpd.pc names gnutls as a private requirement: a stub satisfies pkg-config.
  pc="$deps/usr/lib/$arch/pkgconfig"
  [[ -e "$pc/gnutls.pc" ]] || printf 'Name: gnutls\nDescription: stub\nVersion: 3.7.9\n' > "$pc/gnutls.pc"
  echo "gpu-check: dependencies unpacked under $deps"
  exit 0
fi
[[ "$mode" == run ]] || { echo "usage: $0 fetch DEPS_DIR | run [DEPS_DIR] [BUILD_DIR]" >&2; exit 2; }

source scripts/gpu-env.sh
gpu_env "$deps"

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
nvcc --version | tail -n 2
cmake -S . -B "$build" "${cmake_args[@]}"
cmake --build "$build" -j "$(nproc)" --target test_backend_cuda test_golden

export WS_REQUIRE_CUDA=1 OMP_NUM_THREADS=4 WS_GOLDEN_DIR="$PWD/tests/golden"
status=0
echo "== FP32 products"
"$build/tests/test_backend_cuda" || status=1
"$build/tests/test_golden" || status=1
echo "== TF32 products (looser tolerances in test_backend_cuda; test_golden keeps 1e-4)"
WS_CUDA_TF32=1 "$build/tests/test_backend_cuda" || status=1
WS_CUDA_TF32=1 "$build/tests/test_golden" || echo "gpu-check: test_golden under TF32 failed (expected if TF32 error > 1e-4)"
echo "== compute-sanitizer memcheck"
WS_CUDA_SYNC_CHECK=1 compute-sanitizer --tool memcheck --error-exitcode 3 \
  --leak-check full "$build/tests/test_backend_cuda" || status=1
echo "gpu-check: $([[ $status == 0 ]] && echo PASS || echo FAIL)"
exit $status
