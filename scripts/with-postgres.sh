#!/usr/bin/env bash
# Runs a command against a throwaway PostgreSQL cluster, then stops and deletes the cluster.
#   scripts/with-postgres.sh npm run test:pg
# The command gets DATABASE_URL (database "postgres" as superuser "postgres"). Needs the
# PostgreSQL server binaries (initdb, pg_ctl) on the PATH or in /usr/lib/postgresql/*/bin.
# As root, the cluster runs as the OS user "postgres" (PostgreSQL refuses to run as root).
set -euo pipefail

if ! command -v initdb >/dev/null 2>&1; then
  for d in /usr/lib/postgresql/*/bin; do [ -x "$d/initdb" ] && PATH="$d:$PATH"; done
fi
if ! command -v initdb >/dev/null 2>&1 || ! command -v pg_ctl >/dev/null 2>&1; then
  echo "with-postgres: PostgreSQL server binaries (initdb, pg_ctl) not found — cannot run the PostgreSQL suites" >&2
  exit 3
fi

as_pg() {
  if [ "$(id -u)" = "0" ]; then su postgres -s /bin/bash -c "PATH='$PATH' $*"; else bash -c "$*"; fi
}

dir=$(mktemp -d /tmp/statehouse-pg.XXXXXX)
chmod 755 "$dir"
mkdir -p "$dir/data" "$dir/sock"
[ "$(id -u)" = "0" ] && chown -R postgres "$dir"
port=$(node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')

cleanup() {
  as_pg "pg_ctl -D '$dir/data' -m immediate -w stop" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT INT TERM

as_pg "initdb -D '$dir/data' -A trust -U postgres --no-sync" >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
as_pg "pg_ctl -D '$dir/data' -l '$dir/server.log' -w -o \"-p $port -k '$dir/sock' -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300\" start" >/dev/null \
  || { cat "$dir/server.log" >&2; exit 1; }
echo "with-postgres: PostgreSQL $(as_pg "postgres --version" | awk '{print $3}') on 127.0.0.1:$port" >&2

export DATABASE_URL="postgres://postgres@127.0.0.1:$port/postgres"
set +e
"$@"
status=$?
set -e
exit $status
