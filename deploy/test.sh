#!/usr/bin/env bash
# Tests of deploy/: promtool checks the Prometheus config and rules and runs
# the rule unit tests; then the deploy Go module's tests (metric names the
# rules and dashboard use are exported, dashboard shape, kustomize base,
# compose wiring, the Helm chart linted and rendered, Dockerfiles built and
# run on the local Docker daemon).
# Exits non-zero on any failure. Called by `make test`.
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v promtool >/dev/null 2>&1; then
  echo "deploy/test.sh: promtool not found; installing Debian's prometheus package" >&2
  sudo=""
  if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then sudo=sudo; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  command -v promtool >/dev/null 2>&1 || { echo "deploy/test.sh: promtool still missing after install" >&2; exit 1; }
fi

# Compose validates the compose files (compose/ha_test.go needs it).
if ! command -v docker-compose >/dev/null 2>&1 && ! docker compose version >/dev/null 2>&1; then
  echo "deploy/test.sh: docker compose not found; installing Debian's docker-compose package" >&2
  sudo=""
  if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then sudo=sudo; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends docker-compose >/dev/null
  command -v docker-compose >/dev/null 2>&1 || { echo "deploy/test.sh: docker-compose still missing after install" >&2; exit 1; }
fi

echo "== promtool check config / rules"
promtool check config prometheus/prometheus.yml
promtool check config prometheus/local.yml
promtool check config prometheus/hosts.yml
promtool check rules prometheus/rules.yml prometheus/alerts.yml
echo "== promtool test rules"
promtool test rules prometheus/tests/*.yml

echo "== go test (deploy module)"
go vet ./...
go test -count=1 ./...
