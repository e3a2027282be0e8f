#!/usr/bin/env bash
# Runs the README's walkthrough verbatim against `make run`, as a new user
# would: start the system, run the block between the walkthrough markers
# with `bash -e`, stop everything. Fails if any step fails.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
rm -rf .data/run
log=$(mktemp)
setsid deploy/local/run.sh >"$log" 2>&1 &
runpid=$!
stop() {
  kill -INT -- -"$runpid" 2>/dev/null || kill -INT "$runpid" 2>/dev/null || true
  wait "$runpid" 2>/dev/null || true
}
trap stop EXIT
for _ in $(seq 1 300); do
  grep -q "Clawguard is running" "$log" && break
  kill -0 "$runpid" 2>/dev/null || { cat "$log" >&2; echo "make run died" >&2; exit 1; }
  sleep 0.2
done
grep -q "Clawguard is running" "$log" || { cat "$log" >&2; echo "make run did not come up" >&2; exit 1; }
script=$(mktemp)
awk '/<!-- walkthrough:start -->/{on=1;next} /<!-- walkthrough:end -->/{on=0} on' README.md | sed '/^```/d' > "$script"
echo "walkthrough: running $(grep -c . "$script") lines from README.md"
if timeout 180 bash -e "$script"; then
  echo "walkthrough: 1 passed, 0 failed"
else
  echo "--- make run log ---" >&2; tail -50 "$log" >&2
  echo "walkthrough: 0 passed, 1 failed"
  exit 1
fi
