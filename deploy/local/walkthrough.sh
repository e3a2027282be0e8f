#!/usr/bin/env bash
# Runs the README's walkthrough as a new user would: next to a running
# `make run` whose demo agent has already asked for things (its install and
# greeting holds are pending), paste the block between the walkthrough markers
# into a shell (`bash -e`), then stop everything.
#
# The only edits to the pasted block are the address and the data dir: this
# `make run` listens on free ports with its own data dir, so the test runs
# next to a developer's own `make run` without touching it.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free_port)
mkdir -p .data
data=$(mktemp -d "$root/.data/walkthrough.XXXXXX")
rel=${data#"$root"/}
chmod 755 "$data"   # pg.sh runs Postgres as the postgres user when root
log="$data/make-run.log"
: >"$log"

CLAWGUARD_RUN_PORT=$port CLAWGUARD_RUN_METRICS_PORT=$(free_port) CLAWGUARD_RUN_RUNNER_METRICS_PORT=$(free_port) CLAWGUARD_RUN_CONSOLE_PORT=0 \
  CLAWGUARD_RUN_DATA="$data" setsid deploy/local/run.sh >"$log" 2>&1 &
runpid=$!
walkpid=
stop() {
  status=$?
  # A failed walkthrough may leave its watch and runner behind: stop its process group.
  [ -z "$walkpid" ] || kill -INT -- -"$walkpid" 2>/dev/null || true
  kill -INT -- -"$runpid" 2>/dev/null || kill -INT "$runpid" 2>/dev/null || true
  wait "$runpid" 2>/dev/null || true
  if [ "$status" = 0 ]; then rm -rf "$data"; else echo "walkthrough: make run's data and log kept in $rel" >&2; fi
}
trap stop EXIT
trap 'exit 130' INT TERM

deadline=$((SECONDS + 120))
until grep -q "Clawguard is running" "$log"; do
  kill -0 "$runpid" 2>/dev/null || { cat "$log" >&2; echo "make run died" >&2; exit 1; }
  [ $SECONDS -lt $deadline ] || { cat "$log" >&2; echo "make run did not come up" >&2; exit 1; }
  sleep 0.2
done

# Wait until the demo agents have asked, as they have by the time a user opens
# a second terminal: demo's greeting to helper (a held a2a message, the same
# kind as the walkthrough's) and both groups' cowsay installs are pending.
export CLAWGUARD_SERVER=127.0.0.1:$port CLAWGUARD_TOKEN_FILE=$data/operator.token
demo=$(bin/ncl groups get demo -q)
deadline=$((SECONDS + 120))
until bin/ncl approvals list --kind a2a_message_gate --group "$demo" -q | grep -q . &&
  [ "$(bin/ncl approvals list --kind install_packages -q | grep -c .)" -ge 2 ]; do
  [ $SECONDS -lt $deadline ] || { tail -50 "$log" >&2; echo "the demo agent never asked" >&2; exit 1; }
  sleep 0.5
done
unset CLAWGUARD_SERVER CLAWGUARD_TOKEN_FILE
echo "walkthrough: make run on 127.0.0.1:$port, data in $rel; the demo agent's holds are pending"

script="$data/walkthrough.sh"
awk '/<!-- walkthrough:start -->/{on=1;next} /<!-- walkthrough:end -->/{on=0} on' README.md | sed '/^```/d' \
  | sed -e "s#127\.0\.0\.1:7443#127.0.0.1:$port#g" -e "s#\.data/run#$rel#g" > "$script"
grep -q "127.0.0.1:$port" "$script" || { echo "walkthrough: README block not found or has no server address" >&2; exit 1; }
echo "walkthrough: running $(grep -c . "$script") lines from README.md"
# Its own process group (setsid), so whatever it leaves in the background is stopped with it.
setsid timeout 180 bash -e "$script" &
walkpid=$!
if wait "$walkpid"; then
  echo "walkthrough: 1 passed, 0 failed"
else
  echo "--- make run log ---" >&2; tail -50 "$log" >&2
  echo "walkthrough: 0 passed, 1 failed"
  exit 1
fi
