# gpu-env.sh — sourced by gpu-check.sh and gpu-train.sh on the GPU machine: the
# build environment when the Debian -dev libraries are not installed there but
# unpacked under DEPS_DIR (`scripts/gpu-check.sh fetch DEPS_DIR` on a Debian
# machine). gpu_env [DEPS_DIR] sets cmake_args and the variables pkg-config,
# CMake and the loader need; without DEPS_DIR the system's libraries are used.
gpu_env() {
  local deps=${1:-} arch=x86_64-linux-gnu
  cmake_args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
  [[ -n "$deps" ]] || return 0
  deps=$(cd "$deps" && pwd)
  # The .pc files say prefix=/usr: the sysroot puts DEPS_DIR in front of every path.
  export PKG_CONFIG_SYSROOT_DIR="$deps"
  export PKG_CONFIG_LIBDIR="$deps/usr/lib/$arch/pkgconfig:$deps/usr/lib/$arch/openblas-pthread/pkgconfig:$deps/usr/share/pkgconfig"
  export CMAKE_PREFIX_PATH="$deps/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  export LD_LIBRARY_PATH="$deps/usr/lib/$arch:$deps/usr/lib/$arch/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  if ! command -v pkg-config > /dev/null; then
    cmake_args+=(-DPKG_CONFIG_EXECUTABLE="$deps/usr/bin/pkgconf")
  fi
}
