#!/usr/bin/env bash
# A throwaway local Postgres for `make run` and `make test`.
#   pg.sh start DIR   → starts (initialising if needed) a cluster in DIR, prints its URL
#   pg.sh stop DIR    → stops it
# PG_DURABLE=1 starts it with fsync and synchronous commit on (benchmarks).
# Uses the machine's own Postgres binaries (PATH, pg_config, /usr/lib/postgresql/*/bin).
# As root the server runs as the "postgres" user (initdb and postgres refuse root).
# Without binaries it falls back to a `postgres` container when Docker is reachable.
set -euo pipefail

cmd=${1:?usage: pg.sh start|stop DIR}
dir=${2:?usage: pg.sh start|stop DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

find_bindir() {
  if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
    dirname "$(command -v initdb)"; return
  fi
  if command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ]; then
    pg_config --bindir; return
  fi
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    [ -x "$d/initdb" ] && { echo "$d"; return; }
  done
}

as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 55432
}

bindir=$(find_bindir || true)
# One container per data dir, so make run and make test can run side by side.
container=clawguard-pg-$(printf %s "$dir" | cksum | cut -d' ' -f1)

case "$cmd" in
start)
  if [ -z "$bindir" ]; then
    if docker info >/dev/null 2>&1; then
      port=$(free_port)
      docker rm -f "$container" >/dev/null 2>&1 || true
      echo "no Postgres binaries found; using a postgres:15 container (pulled if missing)" >&2
      docker run -d --name "$container" -e POSTGRES_HOST_AUTH_METHOD=trust -p 127.0.0.1:$port:5432 postgres:15 >/dev/null \
        || { echo "could not start a postgres:15 container; install Postgres: apt-get install postgresql" >&2; exit 1; }
      echo "docker" > "$dir/mode"; echo "$port" > "$dir/port"
      for _ in $(seq 1 60); do docker exec "$container" pg_isready -U postgres >/dev/null 2>&1 && break; sleep 0.5; done
      echo "postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"; exit 0
    fi
    echo "no Postgres found and no Docker daemon reachable: install Postgres with 'apt-get install postgresql'" >&2
    exit 1
  fi
  # Throwaway clusters skip fsync; PG_DURABLE=1 keeps Postgres' defaults
  # (fsync, synchronous_commit, full_page_writes on), as benchmarks need.
  durability="-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
  if [ "${PG_DURABLE:-}" = 1 ]; then durability=""; fi
  if [ "$(id -u)" = 0 ]; then chown postgres "$dir"; chmod 700 "$dir"; fi
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    as_pg "$bindir/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 \
      || { cat "$dir/initdb.log" >&2; exit 1; }
  fi
  if as_pg "$bindir/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
    port=$(cat "$dir/port")
  else
    port=$(free_port)
    as_pg "$bindir/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 \
      -o "-p $port -k $dir -c listen_addresses=127.0.0.1 $durability -c max_connections=500" \
      start >/dev/null || { tail -20 "$dir/postgres.log" >&2; exit 1; }
    echo "$port" > "$dir/port"
  fi
  echo "postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
  ;;
stop)
  if [ -f "$dir/mode" ] && [ "$(cat "$dir/mode")" = docker ]; then
    docker rm -f "$container" >/dev/null 2>&1 || true
  elif [ -n "$bindir" ] && [ -f "$dir/data/PG_VERSION" ]; then
    as_pg "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
  fi
  ;;
*) echo "usage: pg.sh start|stop DIR" >&2; exit 2 ;;
esac
