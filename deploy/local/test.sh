#!/usr/bin/env bash
# `make test`: lint, proto check, and every Go test against one throwaway
# Postgres (the machine's own binaries) and the local Docker daemon.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"

mkdir -p "$root/.data"
pgdir="$root/.data/test-pg"
if [ -z "${CLAWGUARD_TEST_DATABASE_URL:-}" ]; then
  deploy/local/pg.sh stop "$pgdir" 2>/dev/null || true
  rm -rf "$pgdir"
  export CLAWGUARD_TEST_DATABASE_URL=$(deploy/local/pg.sh start "$pgdir")
  trap 'deploy/local/pg.sh stop "$pgdir"' EXIT
fi
echo "postgres for tests: $CLAWGUARD_TEST_DATABASE_URL"

if ! docker info >/dev/null 2>&1; then
  echo "WARNING: no Docker daemon reachable; the runner's docker tests will fail" >&2
fi

# The e2e multi-host test makes network namespaces with iproute2's ip and ss.
if ! command -v ip >/dev/null 2>&1 || ! command -v ss >/dev/null 2>&1; then
  echo "iproute2 not found; installing it for the e2e multi-host test" >&2
  sudo=""
  if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then sudo=sudo; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends iproute2 >/dev/null
fi

make --no-print-directory lint
make --no-print-directory proto-check
make --no-print-directory build

# Packages run in parallel processes, each with its own template database.
go test -count=1 -timeout 20m -p 2 ./proto/... ./migrations/... ./server/... ./runner/... ./cli/... ./bench/... ./e2e/... 2>&1 | tee "$root/.data/go-test.log"
status=${PIPESTATUS[0]}

deploy/local/walkthrough.sh || status=1

if [ -x deploy/test.sh ]; then
  deploy/test.sh || status=1
fi
exit $status
