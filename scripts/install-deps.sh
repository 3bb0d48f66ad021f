#!/usr/bin/env bash
# Installs the Debian 12 packages worldstate builds and tests with. Idempotent:
# installs only what is missing (apt-get update only then). Run as root.
#   --with-torch   also Debian's PyTorch (golden-file regeneration, benchmark peers)
#   --with-fuzz    also clang with libFuzzer and its OpenMP (scripts/fuzz.sh)
#   --with-browser also chromium, and Node.js with npm where the machine has none,
#                  for the web console's browser test (tests/browser/, ctest
#                  console_browser: skipped without them)
set -euo pipefail

packages=(build-essential cmake pkg-config libopenblas-dev libcjson-dev libcmocka-dev
          libsqlite3-dev libmicrohttpd-dev libinih-dev zlib1g-dev libcurl4-openssl-dev sqlite3
          dataset-fashion-mnist python3
          libsystemd-dev file # file: CPack finds the ELF files for dpkg-shlibdeps with it
          man-db # man and groff: the man pages' test and the package check
          libpq-dev postgresql # the PostgreSQL backend, and a server for its tests
          haproxy) # the cluster failover test and benchmark (deploy/haproxy/)
for arg in "$@"; do
  case "$arg" in
    --with-torch) packages+=(python3-torch python3-numpy) ;;
    --with-fuzz) packages+=(clang libclang-rt-14-dev libomp-dev) ;;
    --with-browser)
      packages+=(chromium)
      # a Node.js installed otherwise (with its own npm) is used as it is
      command -v node > /dev/null || packages+=(nodejs)
      command -v npm > /dev/null || packages+=(npm) ;;
    *) echo "install-deps: unknown option $arg" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "install-deps: missing ${missing[*]}; run as root" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
