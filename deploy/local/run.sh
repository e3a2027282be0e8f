#!/usr/bin/env bash
# `make run`: a throwaway Postgres under .data/, the server (auto-migrated),
# a demo set-up (an owner, two agent groups, a destination under a message
# policy), a runner and the demo agent. With ANTHROPIC_API_KEY (or
# OPENAI_API_KEY) in the environment, also an LLM agent: the key becomes a
# model provider's credential on the server (the agent's container never
# holds it; it calls its model through the runner's gateway with a session
# token), and a group "llm" runs bin/llm-agent with a task and a daily
# budget. Ctrl-C stops everything it started.
#
# Each run starts fresh: the last run's data (its Postgres, tokens, runner
# state) is removed first, so the README's walkthrough works on every run.
# CLAWGUARD_RUN_KEEP=1 keeps it (and the groups, holds and decisions in it).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
# CLAWGUARD_RUN_DATA, CLAWGUARD_RUN_PORT and CLAWGUARD_RUN_METRICS_PORT let a
# second instance (make test's walkthrough) run next to this one.
data=${CLAWGUARD_RUN_DATA:-$root/.data/run}
mkdir -p "$data"
data=$(cd "$data" && pwd)
if [ "${CLAWGUARD_RUN_KEEP:-}" != 1 ] && [ -n "$(ls -A "$data")" ]; then
  # A Postgres a killed run left behind is stopped before its files go.
  deploy/local/pg.sh stop "$data/pg" >/dev/null 2>&1 || true
  find "$data" -mindepth 1 -delete
  echo "make run: starting fresh (the last run's data is gone; CLAWGUARD_RUN_KEEP=1 keeps it)"
fi
export CLAWGUARD_SERVER=127.0.0.1:${CLAWGUARD_RUN_PORT:-7443}
metrics_port=${CLAWGUARD_RUN_METRICS_PORT:-9464}
runner_metrics_port=${CLAWGUARD_RUN_RUNNER_METRICS_PORT:-$((metrics_port + 1))}
# The approvals console; CLAWGUARD_RUN_CONSOLE_PORT=0 picks a free port.
console_port=${CLAWGUARD_RUN_CONSOLE_PORT:-7480}

pids=()
cleanup() {
  trap - INT TERM EXIT
  echo; echo "stopping..."
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  deploy/local/pg.sh stop "$data/pg" || true
  echo "stopped."
}
trap cleanup INT TERM EXIT

pg_admin=$(deploy/local/pg.sh start "$data/pg")
db_url=$pg_admin
if command -v psql >/dev/null 2>&1; then
  db_url=${pg_admin/\/postgres\?/\/clawguard?}
  psql "$pg_admin" -qtAc "SELECT 1 FROM pg_database WHERE datname='clawguard'" | grep -q 1 \
    || psql "$pg_admin" -qc "CREATE DATABASE clawguard" >/dev/null
fi
echo "postgres:  $db_url"

bin/clawguard-server serve --database-url "$db_url" --auto-migrate \
  --listen "$CLAWGUARD_SERVER" --metrics-listen "127.0.0.1:$metrics_port" \
  --console-listen "127.0.0.1:$console_port" \
  --operator-token-file "$data/operator.token" --log-level info &
pids+=($!)
export CLAWGUARD_TOKEN_FILE="$data/operator.token"

for _ in $(seq 1 100); do
  bin/ncl catalog list -q >/dev/null 2>&1 && break
  sleep 0.2
done
bin/ncl catalog list -q >/dev/null || { echo "server did not come up" >&2; exit 1; }
echo "server:    $CLAWGUARD_SERVER (metrics http://127.0.0.1:$metrics_port/metrics)"
[ "$console_port" = 0 ] || echo "console:   http://127.0.0.1:$console_port (sign in with a user token: bin/ncl tokens create --kind user --user local:operator --name console --secret-only)"

# Demo set-up (idempotent, for a run with CLAWGUARD_RUN_KEEP=1: existing rows are kept).
owner=local:operator
bin/ncl users create --id "$owner" --display-name "Local operator" >/dev/null 2>&1 || true
bin/ncl roles grant --user "$owner" --role owner --scope global >/dev/null 2>&1 || true
bin/ncl user-dms set --user "$owner" --channel-type local --address console >/dev/null 2>&1 || true
demo=$(bin/ncl groups get demo -q 2>/dev/null || bin/ncl groups create --name demo --cli-scope group -q)
helper=$(bin/ncl groups get helper -q 2>/dev/null || bin/ncl groups create --name helper --cli-scope group -q)
bin/ncl destinations add --group "$demo" --name helper --target-group "$helper" >/dev/null 2>&1 || true
bin/ncl policies set --from "$demo" --to "$helper" --approver "$owner" >/dev/null 2>&1 || true
# The LLM agent, when a provider's key is here: the key goes to the server
# (write-only, from standard input, never a flag), the group gets the
# provider, a task, a daily budget (past it: an approval) and its agent.
llm_groups=()
provider=""
if [ -n "${ANTHROPIC_API_KEY:-}" ]; then
  printf '%s' "$ANTHROPIC_API_KEY" | bin/ncl models providers set --name anthropic --kind anthropic --credential-file - >/dev/null
  provider=anthropic
elif [ -n "${OPENAI_API_KEY:-}" ]; then
  printf '%s' "$OPENAI_API_KEY" | bin/ncl models providers set --name openai --kind openai --credential-file - >/dev/null
  provider=openai
fi
if [ -n "$provider" ]; then
  llm=$(bin/ncl groups get llm -q 2>/dev/null || bin/ncl groups create --name llm --cli-scope group -q)
  bin/ncl models use --group "$llm" --provider "$provider" >/dev/null
  bin/ncl models budget set --group "$llm" --period day --tokens 2000000 >/dev/null
  bin/ncl destinations add --group "$llm" --name helper --target-group "$helper" >/dev/null 2>&1 || true
  bin/ncl policies set --from "$llm" --to "$helper" --approver "$owner" >/dev/null 2>&1 || true
  printf '%s\n' "${CLAWGUARD_TASK:-Find out which agent groups you may message, greet one of them, then read your inbox once and say in two sentences what you did and what the guard answered.}" \
    | bin/ncl groups update "$llm" --instructions-file - >/dev/null
  llm_groups=(--group "$llm")
fi
# Nothing started from here on holds a provider's key: the server has it.
unset ANTHROPIC_API_KEY OPENAI_API_KEY
[ -s "$data/runner.token" ] || bin/ncl tokens create --kind runner --runner local-1 --host local-1 --name "make run" --secret-only > "$data/runner.token"

runtime=process
if docker info >/dev/null 2>&1; then
  (cd runner && go run ./internal/runtime/docker/buildbase -binary "$root/bin/demo-agent" -mcp "$root/bin/clawguard-mcp" -tag clawguard-agent-demo:latest) >/dev/null \
    && runtime=docker
fi
if [ -n "$provider" ]; then
  if [ "$runtime" = docker ]; then
    (cd runner && go run ./internal/runtime/docker/buildbase -binary "$root/bin/llm-agent" -mcp "$root/bin/clawguard-mcp" -tag clawguard-agent-llm:latest) >/dev/null
    bin/ncl groups update "$llm" --base-image clawguard-agent-llm:latest >/dev/null
  else
    bin/ncl groups config update "$llm" --agent-command "$root/bin/llm-agent" >/dev/null
  fi
fi
bin/clawguard-runner --server "$CLAWGUARD_SERVER" --token-file "$data/runner.token" --id local-1 \
  --runtime "$runtime" --data-dir "$data/runner" --metrics-listen "127.0.0.1:$runner_metrics_port" \
  --agent-image clawguard-agent-demo:latest --agent-binary "$root/bin/demo-agent" \
  --group "$demo" --group "$helper" "${llm_groups[@]}" &
pids+=($!)

cat <<MSG

Clawguard is running (runner runtime: $runtime). In another terminal:

  export CLAWGUARD_SERVER=$CLAWGUARD_SERVER
  export CLAWGUARD_TOKEN_FILE=$data/operator.token
  bin/ncl approvals watch                 # live hold events
  bin/ncl approvals list                  # the demo agent's holds
  bin/ncl approvals approve <hold-id> --as $owner
  bin/ncl decisions list                  # the decision log
MSG
[ -z "$provider" ] || cat <<MSG
  bin/ncl usage --group llm               # the LLM agent's tokens, per model ($provider)
  bin/ncl models budget get --group llm   # its daily budget
MSG
cat <<MSG

Ctrl-C stops everything.
MSG
wait -n "${pids[@]}" || true
