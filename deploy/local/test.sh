#!/usr/bin/env bash
# `make test`: every stage — lint, proto check, build, Go tests (one throwaway
# Postgres, the local Docker daemon), the README walkthrough against a running
# `make run`, the docs' commands, the deploy tests — each run even when an
# earlier one failed; one summary of every failure at the end; non-zero exit if
# any failed.
#
# Hermetic: the Go tests run without the CLAWGUARD_* variables of the caller's
# shell (the README's terminal exports CLAWGUARD_SERVER/TOKEN_FILE), every
# stage uses its own data dir under .data/test.* and free ports, so `make test`
# runs next to `make run` without touching it; its Postgres is stopped on exit.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"

mkdir -p "$root/.data"
work=$(mktemp -d "$root/.data/test.XXXXXX")
chmod 755 "$work" # pg.sh runs Postgres as the postgres user when root
pgdir="$work/pg"
own_pg=
cleanup() {
  [ -z "$own_pg" ] || deploy/local/pg.sh stop "$pgdir" || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

failed=()
passed=()
# stage NAME CMD...: runs one stage, records its outcome, never stops the script.
stage() {
  local name=$1; shift
  echo
  echo "=== $name"
  if "$@"; then passed+=("$name"); else failed+=("$name (exit $?)"); fi
}

test_db_url=${CLAWGUARD_TEST_DATABASE_URL:-}
if [ -z "$test_db_url" ]; then
  if test_db_url=$(deploy/local/pg.sh start "$pgdir"); then
    own_pg=1
  else
    failed+=("postgres for tests did not start")
    test_db_url=
  fi
fi
echo "postgres for tests: ${test_db_url:-none}"

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

# The console's browser test drives headless Chromium (Debian's package).
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  echo "chromium not found; installing it for the console's browser test" >&2
  sudo=""
  if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then sudo=sudo; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi

# clean_env CMD...: runs CMD without any CLAWGUARD_* variable of the caller,
# except the test database's URL.
clean_env() {
  local unset_args=() v
  for v in $(compgen -e); do
    case $v in CLAWGUARD_*) unset_args+=(-u "$v") ;; esac
  done
  env "${unset_args[@]}" CLAWGUARD_TEST_DATABASE_URL="$test_db_url" "$@"
}

go_tests() {
  # Packages run in parallel processes, each with its own template database.
  # The two longest (several minutes each) are named first, so go test starts
  # them first and the short ones fill the other slot: listed last, they ran
  # alone at the end and the stage took their length on top of the rest.
  # PIPESTATUS: the exit status of go test, not of tee.
  clean_env go test -count=1 -timeout 20m -p 2 ./runner/internal/e2e/ ./e2e/faults/ ./proto/... ./migrations/... ./server/... \
    ./runner/... ./cli/... ./examples/... ./bench/... ./e2e/... 2>&1 | tee "$work/go-test.log"
  local rc=${PIPESTATUS[0]}
  if [ "$rc" != 0 ]; then
    echo "--- failing Go packages and tests"
    grep -E '^(--- FAIL|FAIL)' "$work/go-test.log" | sort -u
  fi
  return "$rc"
}

stage lint make --no-print-directory lint
stage proto-check make --no-print-directory proto-check
stage build make --no-print-directory build
# The Debian base image the real package-install test builds on (mmdebstrap
# from the Debian archive; a few minutes the first time, then cached in Docker).
stage "debian image" make --no-print-directory debian-image
stage "go test" go_tests
stage walkthrough clean_env deploy/local/walkthrough.sh
stage "docs commands" clean_env deploy/local/doctest.sh
stage "deploy tests" clean_env deploy/test.sh

echo
echo "=== summary: ${#passed[@]} stages passed, ${#failed[@]} failed"
for f in "${failed[@]}"; do
  echo "FAILED: $f"
  if [[ $f == "go test "* ]]; then
    grep -E '^(--- FAIL|FAIL)' "$work/go-test.log" | sort -u | sed 's/^/    /'
  fi
done
[ ${#failed[@]} = 0 ]
