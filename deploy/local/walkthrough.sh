#!/usr/bin/env bash
# Runs the README's walkthrough as a new user would, twice in a row on the
# same data dir (as a user who runs `make run` again the next day): next to a
# running `make run` whose demo agent has already asked for things (its
# install and greeting holds are pending), paste the block between the
# walkthrough markers into a shell (`bash -e`), then stop everything.
#
# The only edits to the pasted block are the address and the data dir: this
# `make run` listens on free ports with its own data dir, so the test runs
# next to a developer's own `make run` without touching it.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
mkdir -p .data
data=$(mktemp -d "$root/.data/walkthrough.XXXXXX")
rel=${data#"$root"/}
chmod 755 "$data"   # pg.sh runs Postgres as the postgres user when root
log="$data.make-run.log"
runpid=
walkpid=

# stop_run: stops the walkthrough's leftovers (its watch and runner) and make run.
stop_run() {
  [ -z "$walkpid" ] || kill -INT -- -"$walkpid" 2>/dev/null || true
  [ -z "$runpid" ] || { kill -INT -- -"$runpid" 2>/dev/null || kill -INT "$runpid" 2>/dev/null || true; }
  [ -z "$runpid" ] || wait "$runpid" 2>/dev/null || true
  walkpid= runpid=
}
stop() {
  status=$?
  stop_run
  if [ "$status" = 0 ]; then rm -rf "$data" "$log"; else echo "walkthrough: make run's data and log kept in $rel and $rel.make-run.log" >&2; fi
}
trap stop EXIT
trap 'exit 130' INT TERM

# round N: make run (fresh, as make run always starts), the demo's holds, the
# README's block, then everything stopped.
round() {
  local n=$1 port
  port=$(free_port)
  : >"$log"
  CLAWGUARD_RUN_PORT=$port CLAWGUARD_RUN_METRICS_PORT=$(free_port) CLAWGUARD_RUN_RUNNER_METRICS_PORT=$(free_port) CLAWGUARD_RUN_CONSOLE_PORT=0 \
    CLAWGUARD_RUN_DATA="$data" setsid deploy/local/run.sh >"$log" 2>&1 &
  runpid=$!
  local deadline=$((SECONDS + 120))
  until grep -q "Clawguard is running" "$log"; do
    kill -0 "$runpid" 2>/dev/null || { cat "$log" >&2; echo "make run died" >&2; return 1; }
    [ $SECONDS -lt $deadline ] || { cat "$log" >&2; echo "make run did not come up" >&2; return 1; }
    sleep 0.2
  done
  if [ "$n" -gt 1 ] && ! grep -q "starting fresh" "$log"; then
    echo "walkthrough: run $n of make run did not start fresh" >&2; return 1
  fi

  # Wait until the demo agents have asked, as they have by the time a user opens
  # a second terminal: demo's greeting to helper (a held a2a message, the same
  # kind as the walkthrough's) and both groups' cowsay installs are pending.
  local demo
  demo=$(CLAWGUARD_SERVER=127.0.0.1:$port CLAWGUARD_TOKEN_FILE=$data/operator.token bin/ncl groups get demo -q)
  deadline=$((SECONDS + 120))
  until CLAWGUARD_SERVER=127.0.0.1:$port CLAWGUARD_TOKEN_FILE=$data/operator.token bin/ncl approvals list --kind a2a_message_gate --group "$demo" -q | grep -q . &&
    [ "$(CLAWGUARD_SERVER=127.0.0.1:$port CLAWGUARD_TOKEN_FILE=$data/operator.token bin/ncl approvals list --kind install_packages -q | grep -c .)" -ge 2 ]; do
    [ $SECONDS -lt $deadline ] || { tail -50 "$log" >&2; echo "the demo agent never asked" >&2; return 1; }
    sleep 0.5
  done
  echo "walkthrough $n: make run on 127.0.0.1:$port, data in $rel; the demo agent's holds are pending"

  local script="$data.walkthrough.sh"
  awk '/<!-- walkthrough:start -->/{on=1;next} /<!-- walkthrough:end -->/{on=0} on' README.md | sed '/^```/d' \
    | sed -e "s#127\.0\.0\.1:7443#127.0.0.1:$port#g" -e "s#\.data/run#$rel#g" > "$script"
  grep -q "127.0.0.1:$port" "$script" || { echo "walkthrough: README block not found or has no server address" >&2; return 1; }
  echo "walkthrough $n: running $(grep -c . "$script") lines from README.md"
  # Its own process group (setsid), so whatever it leaves in the background is stopped with it.
  setsid timeout 180 bash -e "$script" &
  walkpid=$!
  if ! wait "$walkpid"; then
    echo "--- make run log ---" >&2; tail -50 "$log" >&2
    return 1
  fi
  rm -f "$script"
  stop_run
}

for n in 1 2; do
  if ! round "$n"; then
    echo "walkthrough: run $n failed"
    exit 1
  fi
done
echo "walkthrough: 2 passed (make run twice on one data dir), 0 failed"
