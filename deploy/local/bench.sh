#!/usr/bin/env bash
# make bench: the issue-16 table, reproduced (BENCHMARKS.md records runs of it).
# A throwaway Postgres with fsync and synchronous commit on, and for every run
# a fresh database and a fresh clawguard-server, so each run's CPU and WAL per
# decision are its own; bench/cmd/decideload drives the load and measures.
#   BENCH_RUNS  the runs, in order (default: all of them, as below)
#   DURATION    measured period of each run (default 10s), WARMUP (default 3s)
#   MAX_CONNS   the server's Postgres pool (default 32)
#   SERVER      the server binary (default bin/clawguard-server; e.g. an older build to compare)
#   SERVER_FLAGS  more flags for every clawguard-server run (e.g. "--admission-target 10ms" to compare a setting)
#   LOG_COMMIT  the decision log's commit, --decision-log-commit (default: the server's own
#               default, sync); the report says which was measured
# Runs:
#   floor2000               the machine's floor: the gRPC health check on the same open loop at
#                           2,000/s (transport and the server's interceptors, no guard, no Postgres);
#                           runs on this VM differ by as much between sessions as a change does
#   durable2000             the floor of a durable answer: floor2000's health check, then one
#                           single-row INSERT the generator commits on the same Postgres (the
#                           commit waits for the WAL flush); no answer that waits for its log row
#                           on disk is faster on this machine at this rate
#   open2000 / stream2000   Decide / DecideStream at 2,000/s, open loop
#   closed                  512 in flight, closed loop, the defaults (admission control on)
#   closed-max              the same with admission control off: the maximum
#   open80 / open150        Decide open loop at 80 % / 150 % of closed-max's answered rate
#   open150-reask           the same 150 %, each refused decision asked again as the runner does
#                           (the server's retry hint, doubled per refusal, until 10 s after it was due)
#   open150-reask-hint10s   (not in the default runs) the same with --admission-max-retry-after 10s
#   stream25k               DecideStream offered 25,000/s
#   approvals               100 approval round trips/s beside 2,000 Decide/s
#   approvals20             20 approval round trips/s beside 500 Decide/s (issue 48: p99 ≤ 10 ms)
#   egress                  (not in the default runs; needs Squid: apt-get install squid) an agent's
#                           connection set-up through the guarded egress path (clawguard-init's
#                           forwarder, a real runner, a net.connect decision) beside Squid with the same
#                           allow rule, at EGRESS_RATE (default 200) a second, and bulk throughput
#                           through one tunnel; printed into the report beside the decision runs
#   models                  (not in the default runs) an agent's streamed model call through the model
#                           gateway of a real runner (its forwarder, a model.call decision) beside a bare
#                           httputil.ReverseProxy to the same fake provider: the first byte at
#                           MODELS_RATE (default 100) calls a second each, and events a second through one
#                           stream; printed into the report beside the decision runs
#   fga-open2000 / fga-closed   OpenFGA (OPENFGA, default: go install of OPENFGA_VERSION v1.22.1 into
#                           the bench dir) on the same Postgres, its own database, the same pairs
#                           written through its API, asked the same checks as open2000 / closed
#                           (closed with 512 in flight; OpenFGA has no retry hint to honour)
# After the table, each goal of issues 48 and 35 whose runs are in the report, as a ratio of two runs
# or a bound on one.
# The table goes to stdout and to .data/bench/report-<time>.md, the raw runs to .jsonl beside it.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
data=${BENCH_DIR:-$root/.data/bench}
runs=${BENCH_RUNS:-floor2000 durable2000 open2000 fga-open2000 stream2000 closed fga-closed closed-max open80 open150 open150-reask stream25k approvals20 approvals}
server_bin=${SERVER:-$root/bin/clawguard-server}
# The mode measured: LOG_COMMIT when set, else what the server defaults to
# (read from its own --help, so a changed default is what is measured and said).
# (--help exits non-zero: the pipeline's status is not the answer.)
log_commit=${LOG_COMMIT:-$({ "$server_bin" serve --help 2>&1 || true; } | sed -n '/-decision-log-commit/,/default/s/.*(default "\([a-z]*\)").*/\1/p' | head -1)}
[ -n "$log_commit" ] || { echo "bench: could not read the server's --decision-log-commit default; set LOG_COMMIT" >&2; exit 1; }
mkdir -p "$data"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
report="$data/report-$stamp.jsonl"

url=$(PG_DURABLE=1 "$root/deploy/local/pg.sh" start "$data/pg-durable")
db=${url/\/postgres\?/\/clawguard_bench?}
go build -o "$data/decideload" "$root/bench/cmd/decideload"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# OpenFGA for the side-by-side runs: built with the machine's Go on first use.
openfga_bin() {
  if [ -n "${OPENFGA:-}" ]; then echo "$OPENFGA"; return; fi
  local bin="$data/bin/openfga"
  if [ ! -x "$bin" ]; then
    echo "bench: building OpenFGA ${OPENFGA_VERSION:-v1.22.1} (once, into $data/bin)" >&2
    GOBIN="$data/bin" GOFLAGS=-mod=mod go install "github.com/openfga/openfga/cmd/openfga@${OPENFGA_VERSION:-v1.22.1}" >&2
  fi
  echo "$bin"
}

server=""
stop_server() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; server=""; fi
}
trap 'stop_server; "$root/deploy/local/pg.sh" stop "$data/pg-durable"' EXIT

# await_port PORT NAME LABEL: until the server just started ($server) listens,
# or its log and exit when it dies or takes 20 s.
await_port() {
  for _ in $(seq 1 200); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return; fi
    kill -0 "$server" 2>/dev/null || break
    sleep 0.1
  done
  echo "$2 did not start; its log:" >&2; cat "$data/server-$3.log" >&2; exit 1
}

# run LABEL [server flags...] -- [decideload flags...]
run() {
  local label=$1; shift
  local sargs=()
  while [ "$1" != -- ]; do sargs+=("$1"); shift; done
  shift
  psql "$url" -qc "DROP DATABASE IF EXISTS clawguard_bench" -c "CREATE DATABASE clawguard_bench" >/dev/null
  local port mport
  port=$(free_port); mport=$(free_port)
  "$server_bin" serve --database-url "$db" --listen "127.0.0.1:$port" --metrics-listen "127.0.0.1:$mport" \
    --auto-migrate --log-level error --max-conns "${MAX_CONNS:-32}" --decision-log-commit "$log_commit" ${SERVER_FLAGS:-} "${sargs[@]}" >"$data/server-$label.log" 2>&1 &
  server=$!
  await_port "$port" clawguard-server "$label"
  echo "== $label"
  "$data/decideload" -database-url "$db" -addr "127.0.0.1:$port" -metrics "http://127.0.0.1:$mport/metrics" \
    -server-pid "$server" -duration "${DURATION:-10s}" -warmup "${WARMUP:-3s}" -report "$report" -label "$label" "$@"
  stop_server
}

# run_fga LABEL [decideload flags...]: OpenFGA on a fresh database of the same
# Postgres, asked the same checks by the same generator.
run_fga() {
  local label=$1; shift
  local bin fgadb port
  bin=$(openfga_bin)
  fgadb=${url/\/postgres\?/\/openfga_bench?}
  psql "$url" -qc "DROP DATABASE IF EXISTS openfga_bench" -c "CREATE DATABASE openfga_bench" >/dev/null
  "$bin" migrate --datastore-engine postgres --datastore-uri "$fgadb" >"$data/server-$label.log" 2>&1
  port=$(free_port)
  "$bin" run --datastore-engine postgres --datastore-uri "$fgadb" --datastore-max-open-conns "${MAX_CONNS:-32}" \
    --grpc-addr "127.0.0.1:$port" --http-enabled=false --playground-enabled=false --metrics-enabled=false \
    --log-level none >>"$data/server-$label.log" 2>&1 &
  server=$!
  await_port "$port" openfga "$label"
  echo "== $label"
  "$data/decideload" -mode openfga -database-url "$url" -addr "127.0.0.1:$port" \
    -server-pid "$server" -duration "${DURATION:-10s}" -warmup "${WARMUP:-3s}" -report "$report" -label "$label" "$@"
  stop_server
}

# run_egress: egressload against a fresh server (operator token in a file),
# its runner and Squid; its table goes into the report beside the others.
egress_out="$data/egress-$stamp.txt"
run_egress() {
  psql "$url" -qc "DROP DATABASE IF EXISTS clawguard_bench" -c "CREATE DATABASE clawguard_bench" >/dev/null
  local port tok
  port=$(free_port); tok="$data/operator-$stamp.token"
  "$server_bin" serve --database-url "$db" --listen "127.0.0.1:$port" --auto-migrate --log-level error \
    --max-conns "${MAX_CONNS:-32}" --decision-log-commit "$log_commit" --operator-token-file "$tok" ${SERVER_FLAGS:-} >"$data/server-egress.log" 2>&1 &
  server=$!
  await_port "$port" clawguard-server egress
  echo "== egress"
  go build -o "$data/egressload" "$root/bench/cmd/egressload"
  "$data/egressload" -addr "127.0.0.1:$port" -token-file "$tok" -runner-bin "$root/bin/clawguard-runner" \
    -init-bin "$root/bin/clawguard-init" -agent-bin "$root/bin/demo-agent" -rate "${EGRESS_RATE:-200}" \
    -duration "${DURATION:-10s}" -warmup "${WARMUP:-3s}" | tee "$egress_out"
  stop_server
}

# run_models: modelload against a fresh server and its runner; its table
# goes into the report beside the others.
models_out="$data/models-$stamp.txt"
run_models() {
  psql "$url" -qc "DROP DATABASE IF EXISTS clawguard_bench" -c "CREATE DATABASE clawguard_bench" >/dev/null
  local port tok
  port=$(free_port); tok="$data/operator-$stamp.token"
  "$server_bin" serve --database-url "$db" --listen "127.0.0.1:$port" --auto-migrate --log-level error \
    --max-conns "${MAX_CONNS:-32}" --decision-log-commit "$log_commit" --operator-token-file "$tok" ${SERVER_FLAGS:-} >"$data/server-models.log" 2>&1 &
  server=$!
  await_port "$port" clawguard-server models
  echo "== models"
  go build -o "$data/modelload" "$root/bench/cmd/modelload"
  "$data/modelload" -addr "127.0.0.1:$port" -token-file "$tok" -runner-bin "$root/bin/clawguard-runner" \
    -rate "${MODELS_RATE:-100}" -duration "${DURATION:-10s}" -warmup "${WARMUP:-3s}" | tee "$models_out"
  stop_server
}

# The answered rate of an earlier run in this report.
answered() {
  sed -n "s/^{\"label\":\"$1\".*\"answered_per_s\":\([0-9.]*\).*/\1/p" "$report" | tail -1
}

# of_max SHARE: SHARE of closed-max's answered rate (measured first if this
# report has no closed-max run), as a whole number of decisions a second.
of_max() {
  local m
  m=$(answered closed-max)
  if [ -z "$m" ]; then
    echo "   (no closed-max run in this report: measuring it first)" >&2
    run closed-max --admission-target 0 -- -mode unary -closed 512 >&2
    m=$(answered closed-max)
  fi
  awk -v m="$m" -v f="$1" 'BEGIN{printf "%d", m*f}'
}

for r in $runs; do
  case "$r" in
  floor2000) run floor2000 -- -mode health -rate 2000 ;;
  durable2000) run durable2000 -- -mode durable -rate 2000 ;;
  open2000) run open2000 -- -mode unary -rate 2000 ;;
  stream2000) run stream2000 -- -mode stream -rate 2000 ;;
  closed) run closed -- -mode unary -closed 512 ;;
  closed-max) run closed-max --admission-target 0 -- -mode unary -closed 512 ;;
  open80) rate=$(of_max 0.8); run open80 -- -mode unary -rate "$rate" ;;
  open150) rate=$(of_max 1.5); run open150 -- -mode unary -rate "$rate" ;;
  open150-reask) rate=$(of_max 1.5); run open150-reask -- -mode unary -reask -rate "$rate" ;;
  open150-reask-hint10s) rate=$(of_max 1.5); run open150-reask-hint10s --admission-max-retry-after 10s -- -mode unary -reask -rate "$rate" ;;
  stream25k) run stream25k -- -mode stream -rate 25000 ;;
  approvals) run approvals -- -mode unary -rate 2000 -approvals 100 ;;
  approvals20) run approvals20 -- -mode unary -rate 500 -approvals 20 ;;
  egress) run_egress ;;
  models) run_models ;;
  fga-open2000) run_fga fga-open2000 -rate 2000 ;;
  fga-closed) run_fga fga-closed -closed 512 ;;
  *) echo "unknown run $r (BENCH_RUNS)" >&2; exit 2 ;;
  esac
done

echo
echo "== summary ($(nproc) cores, load average before the last run: $(cut -d' ' -f1-3 /proc/loadavg); decision log commit: $log_commit)"
{
  echo "Decision log commit: $log_commit (--decision-log-commit).${SERVER_FLAGS:+ More server flags: $SERVER_FLAGS.}"
  echo
  "$data/decideload" -summarize "$report"
  if [ -s "$egress_out" ]; then echo; cat "$egress_out"; fi
  if [ -s "$models_out" ]; then echo; cat "$models_out"; fi
} | tee "$data/report-$stamp.md"
