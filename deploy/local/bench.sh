#!/usr/bin/env bash
# make bench: a throwaway Postgres, one clawguard-server, and the open-loop
# load generator (bench/cmd/decideload) against Guard.Decide and
# Guard.DecideStream. Figures go to stdout; BENCHMARKS.md records a run.
#   RATE_UNARY (default 6400)  RATE_STREAM (default 20000)  DURATION (default 20s)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
data=${BENCH_DIR:-$root/.data/bench}
mkdir -p "$data"
url=$("$root/deploy/local/pg.sh" start "$data/pg")
db=${url/\/postgres\?/\/clawguard_bench?}
psql "$url" -qc "DROP DATABASE IF EXISTS clawguard_bench" -c "CREATE DATABASE clawguard_bench" >/dev/null
go build -o "$data/decideload" "$root/bench/cmd/decideload"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$root/bin/clawguard-server" serve --database-url "$db" --listen "127.0.0.1:$port" --metrics-listen "127.0.0.1:$mport" \
  --auto-migrate --operator-token-file "$data/operator.token" --log-level error --max-conns "${MAX_CONNS:-32}" >"$data/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.1
done
echo "== Guard.Decide (unary), open loop"
"$data/decideload" -database-url "$db" -addr "127.0.0.1:$port" -metrics "http://127.0.0.1:$mport/metrics" \
  -mode unary -rate "${RATE_UNARY:-6400}" -duration "${DURATION:-20s}"
echo "== Guard.DecideStream, open loop"
"$data/decideload" -database-url "$db" -addr "127.0.0.1:$port" -metrics "http://127.0.0.1:$mport/metrics" \
  -mode stream -rate "${RATE_STREAM:-20000}" -duration "${DURATION:-20s}"
