#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests (and for trying the daemon on
# PostgreSQL): initdb into a fresh /tmp folder, started on a unix socket in that
# folder and on a free TCP port of 127.0.0.1, trust authentication (loopback
# only: for tests, never for data that matters), fsync off.
#   pg-test-server.sh start DIR   starts it; writes DIR/uri (unix socket) and
#                                 DIR/uri-tcp, prints `export WS_TEST_POSTGRES=...`
#   pg-test-server.sh stop DIR    stops it and removes its folder
#   pg-test-server.sh halt DIR    stops the server, keeping its data (the
#                                 failover test: PostgreSQL restarted under load)
#   pg-test-server.sh resume DIR  starts a halted server again, same socket and port
# PostgreSQL refuses to run as root: as root the cluster runs as the `postgres`
# user (Debian's package makes it), else as `nobody`. Without PostgreSQL's
# programs, start writes no DIR/uri and exits 0: the PostgreSQL tests then say
# skipped (77). ctest runs start and stop as the fixture `postgresql`.
set -euo pipefail

cmd=${1:-} dir=${2:-}
[[ $cmd =~ ^(start|stop|halt|resume)$ && -n $dir ]] || { echo "usage: $0 start|stop|halt|resume DIR" >&2; exit 2; }
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

# The cluster's user, and how to run a command as it.
as_user() {
  if [[ $(id -u) -ne 0 ]]; then "$@"; else runuser -u "$run_user" -- "$@"; fi
}
run_user=$(id -un)
if [[ $(id -u) -eq 0 ]]; then
  run_user=nobody
  getent passwd postgres >/dev/null && run_user=postgres
fi

stop() {
  [[ -f $dir/cluster ]] || return 0
  local cluster; cluster=$(cat "$dir/cluster")
  if [[ -f $cluster/data/postmaster.pid ]]; then
    as_user "$bindir/pg_ctl" -D "$cluster/data" -m fast -w stop >/dev/null || true
  fi
  rm -rf "$cluster"
  rm -f "$dir/cluster" "$dir/uri" "$dir/uri-tcp"
}

bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
if [[ $cmd == stop ]]; then
  [[ -n $bindir ]] && stop
  exit 0
fi
if [[ $cmd == halt || $cmd == resume ]]; then
  cluster=$(cat "$dir/cluster")
  if [[ $cmd == halt ]]; then
    as_user "$bindir/pg_ctl" -D "$cluster/data" -m fast -w stop >/dev/null
  else
    as_user "$bindir/pg_ctl" -D "$cluster/data" -l "$cluster/server.log" -w -t 60 start >/dev/null
  fi
  exit 0
fi
if [[ -z $bindir || ! -x $bindir/initdb ]]; then
  echo "pg-test-server: no PostgreSQL server programs (/usr/lib/postgresql/*/bin); the PostgreSQL tests will be skipped"
  exit 0
fi
stop # a cluster left by an interrupted run

cluster=$(mktemp -d /tmp/ws-pg.XXXXXX)
chmod 755 "$cluster"
mkdir -m 700 "$cluster/data"
chown "$run_user" "$cluster" "$cluster/data"
echo "$cluster" > "$dir/cluster"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
as_user "$bindir/initdb" -D "$cluster/data" -U worldstate --auth=trust -E UTF8 --locale=C \
  --no-sync >"$cluster/initdb.log" 2>&1 || { cat "$cluster/initdb.log" >&2; exit 1; }
cat >>"$cluster/data/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$cluster'
fsync = off
full_page_writes = off
max_connections = 200
EOF
as_user "$bindir/pg_ctl" -D "$cluster/data" -l "$cluster/server.log" -w -t 60 start >/dev/null ||
  { cat "$cluster/server.log" >&2; exit 1; }
echo "postgresql:///postgres?host=$cluster&port=$port&user=worldstate" > "$dir/uri"
echo "postgresql://worldstate@127.0.0.1:$port/postgres" > "$dir/uri-tcp"
echo "export WS_TEST_POSTGRES='$(cat "$dir/uri")'"
