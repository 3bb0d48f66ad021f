#!/usr/bin/env bash
# CI (after the README's test command): the Debian package, built and used as a
# user would. A Release build (-O3, warnings are errors, portable: no
# -march=native, no CUDA) into build-release/, `cpack -G DEB`, `dpkg -i` (apt-get
# -f install for missing dependencies), `man` finds and renders the three man
# pages, then /usr/bin/worldstated on a temporary data dir and a free loopback
# port: the installed CLI creates a session, the installed Python client steps
# it and checks the answer's shape, SIGHUP reloads the packaged config file
# (/etc/worldstate/worldstated.conf, a conffile) and the daemon goes on serving,
# SIGTERM must end it with status 0; the package is purged at the end, whatever
# happened.
# Run as root, on a machine where the package is not installed already.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
log=build-release.log
say() { echo "package-check: $*"; }

if dpkg-query -W -f='${Status}' worldstate 2>/dev/null | grep -q "install ok installed"; then
  say "the worldstate package is installed already; not touching it"
  exit 1
fi
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DWS_WERROR=ON -DWS_NATIVE=OFF \
      -DWS_CUDA=OFF -DCMAKE_INSTALL_PREFIX=/usr > "$log" 2>&1 || { cat "$log"; exit 1; }
cmake --build build-release -j "$(nproc)" >> "$log" 2>&1 || { tail -50 "$log"; exit 1; }
built=$(date +%s)
(cd build-release && rm -f worldstate_*.deb && cpack -G DEB) >> "$log" 2>&1 || { tail -50 "$log"; exit 1; }
deb=$(ls build-release/worldstate_*.deb)
say "built $deb in $((built - start)) s (Depends: $(dpkg-deb -f "$deb" Depends))"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ws-package-XXXXXX")
pid=
cleanup() {
  [[ -n "$pid" ]] && kill -KILL "$pid" 2>/dev/null || true
  dpkg --purge worldstate > /dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
export DEBIAN_FRONTEND=noninteractive
if ! dpkg -i "$deb" > "$tmp/dpkg.log" 2>&1; then
  apt-get install -f -y -qq --no-install-recommends >> "$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log"; exit 1; }
fi
dpkg-query -W -f='${Status}' worldstate | grep -q "install ok installed" || { cat "$tmp/dpkg.log"; exit 1; }
for f in /usr/bin/worldstated /usr/bin/worldstate-train /usr/bin/worldstate \
         /usr/include/worldstate/ws_client.h /usr/lib/systemd/system/worldstated.service \
         /etc/worldstate/worldstated.conf; do
  [[ -e "$f" ]] || { say "the package lacks $f"; exit 1; }
done
say "installed: $(/usr/bin/worldstated --version)"
# The man pages: man finds each by name and renders it without a warning.
for page in 8:worldstated 1:worldstate 1:worldstate-train; do
  file=$(man -w "${page%%:*}" "${page#*:}" 2> /dev/null) || { say "man finds no ${page#*:}(${page%%:*})"; exit 1; }
  [[ "$file" == /usr/share/man/* ]] || { say "${page#*:}(${page%%:*}) is $file, not the package's"; exit 1; }
  warnings=$(MANWIDTH=80 man -l "$file" 2>&1 > /dev/null)
  [[ -z "$warnings" ]] || { say "man -l $file: $warnings"; exit 1; }
done

/usr/bin/worldstated --data-dir "$tmp/data" --listen 127.0.0.1:0 > "$tmp/daemon.log" 2>&1 &
pid=$!
port=
for _ in $(seq 600); do # up to 60 s: the first start creates the default model
  port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$tmp/daemon.log")
  [[ -n "$port" ]] && break
  kill -0 "$pid" 2>/dev/null || { cat "$tmp/daemon.log"; exit 1; }
  sleep 0.1
done
[[ -n "$port" ]] || { say "the daemon did not start"; cat "$tmp/daemon.log"; exit 1; }
url=http://127.0.0.1:$port
sid=$(/usr/bin/worldstate --url "$url" session create)
# Debian's python3 finds the installed client in /usr/lib/python3/dist-packages.
/usr/bin/python3 - "$url" "$sid" <<'PY'
import sys
import worldstate

c = worldstate.Client(sys.argv[1])
assert c.version()["version"] == worldstate.__version__, c.version()
r = c.step(sys.argv[2], expect_step=0, instructions=[(["anna", "location", "kitchen"], True)],
           queries=[["anna", "location", "kitchen"], ["anna", "location", "garden"]])
assert set(r) >= {"step", "answers", "model_version"}, r
assert r["step"] == 1 and r["model_version"] >= 1, r
assert len(r["answers"]) == 2, r
for a in r["answers"]:
    assert 0.0 <= a["p"] <= 1.0 and a["holds"] == (a["p"] >= 0.5), a
print("package-check: step 1 answered", [round(a["p"], 3) for a in r["answers"]])
PY
dpkg-query --showformat='${Conffiles}' -W worldstate | grep -q /etc/worldstate/worldstated.conf ||
  { say "/etc/worldstate/worldstated.conf is not a conffile"; exit 1; }
# the daemon read the packaged file (its flags beat the file's data-dir and listen)
grep -q "config file file=/etc/worldstate/worldstated.conf" "$tmp/daemon.log" ||
  { say "the daemon did not read /etc/worldstate/worldstated.conf"; cat "$tmp/daemon.log"; exit 1; }
kill -HUP "$pid"
for _ in $(seq 100); do grep -q "reload: done" "$tmp/daemon.log" && break; sleep 0.1; done
grep -q "reload: done" "$tmp/daemon.log" || { say "SIGHUP: no reload"; cat "$tmp/daemon.log"; exit 1; }
/usr/bin/worldstate --url "$url" session show "$sid" > /dev/null || { say "not serving after SIGHUP"; exit 1; }
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
pid=
[[ $status -eq 0 ]] || { say "SIGTERM: exit status $status"; cat "$tmp/daemon.log"; exit 1; }
files=$(find "$tmp/data" -type f -perm /077)
[[ -z "$files" ]] || { say "files open to others: $files"; exit 1; }
dpkg --purge worldstate > /dev/null
[[ ! -e /usr/bin/worldstated && ! -e /etc/worldstate/worldstated.conf ]] ||
  { say "dpkg --purge left /usr/bin/worldstated or /etc/worldstate/worldstated.conf"; exit 1; }
say "ok: built, installed, served, reloaded, stopped, purged in $(($(date +%s) - start)) s"
