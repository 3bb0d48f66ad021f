#!/usr/bin/env bash
# test_install: `cmake --install BUILD --prefix P` into a fresh P gives the three
# programs (each prints VERSION), a C program built against the installed
# ws_client.h and library through pkg-config alone, the Python client module
# (its __version__ is VERSION), the man pages, the systemd unit naming P's
# worldstated, and the default config file, which the installed daemon reads
# without an error and which names every setting (each flag of `worldstated
# --help` that takes a value).
#   install_check.sh CMAKE BUILD VERSION
set -euo pipefail
cmake=$1 build=$2 version=$3
p=$(mktemp -d "${TMPDIR:-/tmp}/ws-install-XXXXXX")
trap 'rm -rf "$p"' EXIT
"$cmake" --install "$build" --prefix "$p" > "$p.log" 2>&1 || { cat "$p.log"; rm -f "$p.log"; exit 1; }
rm -f "$p.log"
for prog in worldstated worldstate-train worldstate; do
  out=$("$p/bin/$prog" --version)
  [[ "$out" == "$prog $version"* ]] || { echo "FAIL: $prog --version said '$out'"; exit 1; }
  help=$("$p/bin/$prog" --help)
  [[ "$help" == *--version* ]] || { echo "FAIL: $prog --help lacks --version"; exit 1; }
done
pc=$(find "$p" -name worldstate.pc)
[[ -n "$pc" ]] || { echo "FAIL: no worldstate.pc installed"; exit 1; }
cat > "$p/use.c" <<'C'
#include <stdio.h>
#include <ws_client.h>
int main(void)
{
    ws_client_config cfg = ws_client_config_default();
    ws_client *c;
    ws_client_error e;
    if (ws_client_new(&cfg, &c, &e) != WS_CLIENT_OK) return 1;
    printf("%s\n", cfg.url);
    ws_client_free(c);
    return 0;
}
C
export PKG_CONFIG_PATH=$(dirname "$pc")
cc -o "$p/use" "$p/use.c" $(pkg-config --cflags --libs worldstate)
[[ "$("$p/use")" == http://* ]] || { echo "FAIL: the installed client library did not run"; exit 1; }
[[ "$(pkg-config --modversion worldstate)" == "$version" ]] || { echo "FAIL: worldstate.pc version"; exit 1; }
py=$(dirname "$(find "$p" -name worldstate.py)")
PYTHONPATH=$py python3 -c "import sys, worldstate; sys.exit(worldstate.__version__ != '$version')" ||
  { echo "FAIL: the installed Python client's __version__ is not $version"; exit 1; }
for page in man8/worldstated.8 man1/worldstate.1 man1/worldstate-train.1; do
  [[ -f "$p/share/man/$page" ]] || { echo "FAIL: no man page share/man/$page"; exit 1; }
done
unit=$(find "$p" -name worldstated.service)
grep -q "^ExecStart=.*/worldstated " "$unit" && grep -q "^Type=notify" "$unit" ||
  { echo "FAIL: the systemd unit"; exit 1; }
conf=$(find "$p" -name worldstated.conf)
[[ -n "$conf" ]] || { echo "FAIL: no worldstated.conf installed"; exit 1; }
"$p/bin/worldstated" --config "$conf" --check-config > /dev/null ||
  { echo "FAIL: the installed worldstated refuses its own config file"; exit 1; }
# the settings are what --check-config prints: `name = value ; source`
settings=$("$p/bin/worldstated" --config "$conf" --check-config | sed -n 's/^\([a-z-]*\) = .*/\1/p')
[[ $(wc -w <<< "$settings") -gt 10 ]] || { echo "FAIL: --check-config printed no settings"; exit 1; }
for flag in $settings; do
  grep -Eq "^(# )?$flag = " "$conf" || { echo "FAIL: worldstated.conf does not name $flag"; exit 1; }
done
echo "install: ok ($(find "$p" -type f | wc -l) files)"
