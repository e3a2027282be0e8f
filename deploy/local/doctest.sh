#!/usr/bin/env bash
# Runs every ```sh block of the READMEs and deploy docs as a reader pastes them
# (one `bash -e` per doc, blocks in order), so documented commands stay true.
# Blocks that are not commands (synopses, output, YAML) are fenced as text.
#
# Each doc runs in a scratch copy of the repository root (bin/ linked, deploy/
# copied) with free ports substituted for the documented ones (7443, 7444,
# 9464, 9465), a throwaway Postgres, and its own process group, stopped at
# the end. A real clawguard-server stands in wherever the doc assumes one
# is running. Only what cannot run on a test machine is stubbed, and the
# stubs check their arguments: `make` (dry run: the target exists; the real
# `make run` and `make test` are this test's own stages), `docker` (build:
# the Dockerfile and context exist; compose up: the services exist, and
# server-a/-b and runner-a/-b start as real processes with the doc's secrets),
# `kubectl` (create secret: every file exists; runner token files hold one
# bare token each), `bin/clawguard-telegram` and `bin/clawguard-slack` (their
# token files and data dir).
# The README walkthrough block is run by walkthrough.sh.
#
# Usage: deploy/local/doctest.sh [DOC ...]   (default: every doc with a sh block)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
docs=("$@")
if [ ${#docs[@]} = 0 ]; then
  # Every Markdown file of the repository with a ```sh block, so a new doc
  # is tested from its first commit (WEBHOOK.md's block: the webhook test).
  while IFS= read -r f; do
    [ "$f" = deploy/WEBHOOK.md ] && continue
    grep -q '^```sh$' "$f" && docs+=("$f")
  done < <(git ls-files '*.md' 2>/dev/null || find . -name '*.md' -not -path './.data/*' | sed 's#^\./##')
fi

for b in clawguard-server clawguard-runner ncl demo-agent clawguard-telegram clawguard-slack; do
  [ -x "bin/$b" ] || { echo "doctest: bin/$b missing: run make build" >&2; exit 1; }
done

mkdir -p .data
work=$(mktemp -d "$root/.data/doctest.XXXXXX")
chmod 755 "$work"
pg_started=
cleanup() {
  [ -z "$pg_started" ] || deploy/local/pg.sh stop "$work/pg" || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

pg_admin=$(deploy/local/pg.sh start "$work/pg")
pg_started=1

# --- stubs (their own checks; exit non-zero on a wrong call) ---------------
stubs="$work/stubs"
mkdir -p "$stubs"
cat >"$stubs/make" <<EOF
#!/usr/bin/env bash
# A dry run: the target exists (the real ones are make test's own stages).
exec $(command -v make) --no-print-directory -C "\$DOCTEST_ROOT" -n "\$@" >/dev/null
EOF
cat >"$stubs/docker" <<'EOF'
#!/usr/bin/env bash
set -euo pipefail
say() { echo "docker stub: $*" >&2; }
case "${1:-}" in
build)
  shift; file= ctx=
  while [ $# -gt 0 ]; do
    case $1 in -f) file=$2; shift 2 ;; -t) shift 2 ;; *) ctx=$1; shift ;; esac
  done
  [ -f "$file" ] || { say "no Dockerfile $file"; exit 1; }
  [ -d "$ctx" ] || { say "no build context $ctx"; exit 1; }
  say "build -f $file $ctx: ok" ;;
compose)
  shift; args=() files=()
  while [ $# -gt 0 ]; do
    case $1 in -f) files+=("$2"); shift 2 ;; -p) shift 2 ;; up|-d|--build) shift ;; *) args+=("$1"); shift ;; esac
  done
  [ ${#files[@]} -gt 0 ] || files=(docker-compose.yml)
  for f in "${files[@]}"; do [ -f "$f" ] || { say "no compose file $f"; exit 1; }; done
  if [ "${args[0]:-}" = exec ]; then
    # exec SERVICE CMD...: the service must exist; the command is the container's.
    grep -q "^  ${args[1]:-}:" "${files[@]}" || { say "no service ${args[1]:-} in ${files[*]}"; exit 1; }
    say "compose exec ${args[*]:1}: ok"; exit 0
  fi
  for svc in "${args[@]}"; do
    grep -q "^  $svc:" "${files[@]}" || { say "no service $svc in ${files[*]}"; exit 1; }
    case $svc in
    server-a|server-b)
      port=$DOCTEST_PORT; mport=$DOCTEST_METRICS_PORT
      [ "$svc" = server-a ] || { port=$DOCTEST_PORT2; mport=$DOCTEST_METRICS_PORT2; }
      # compose up of a service already up leaves it running.
      if curl -fsS "http://127.0.0.1:$mport/readyz" >/dev/null 2>&1; then continue; fi
      "$DOCTEST_ROOT/bin/clawguard-server" serve --database-url "$DOCTEST_DB" --auto-migrate --log-level warn \
        --listen "127.0.0.1:$port" --metrics-listen "127.0.0.1:$mport" --operator-token-file secrets/operator-token \
        >>"$DOCTEST_LOGS/$svc.log" 2>&1 &
      for _ in $(seq 1 150); do curl -fsS "http://127.0.0.1:$mport/readyz" >/dev/null 2>&1 && break; sleep 0.2; done
      curl -fsS "http://127.0.0.1:$mport/readyz" >/dev/null || { say "$svc not ready"; cat "$DOCTEST_LOGS/$svc.log" >&2; exit 1; } ;;
    runner-a|runner-b)
      id=$svc rport=$DOCTEST_RUNNER_PORT_A
      [ "$svc" = runner-a ] || rport=$DOCTEST_RUNNER_PORT_B
      "$DOCTEST_ROOT/bin/clawguard-runner" --server "127.0.0.1:$DOCTEST_PORT" --token-file "secrets/$id-token" --id "$id" \
        --runtime process --agent-binary "$DOCTEST_ROOT/bin/demo-agent" --data-dir "$DOCTEST_LOGS/$id" \
        --metrics-listen "127.0.0.1:$rport" >>"$DOCTEST_LOGS/$id.log" 2>&1 &
      for _ in $(seq 1 150); do curl -fsS "http://127.0.0.1:$rport/readyz" >/dev/null 2>&1 && break; sleep 0.2; done
      curl -fsS "http://127.0.0.1:$rport/readyz" >/dev/null || { say "$id did not connect with its token"; tail -5 "$DOCTEST_LOGS/$id.log" >&2; exit 1; } ;;
    esac
  done
  say "compose up ${args[*]}: ok" ;;
*) say "unexpected: docker $*"; exit 1 ;;
esac
EOF
cat >"$stubs/kubectl" <<'EOF'
#!/usr/bin/env bash
set -euo pipefail
say() { echo "kubectl stub: $*" >&2; }
args=("$@")
if [ "${args[*]}" = "get nodes -o name" ]; then printf 'node/node-a\nnode/node-b\n'; exit 0; fi
[ "${args[0]}" = -n ] && [ "${args[2]} ${args[3]} ${args[4]}" = "create secret generic" ] || { say "unexpected: kubectl $*"; exit 1; }
for a in "${args[@]:6}"; do
  case $a in
  --from-literal=*) ;;
  --from-file=*)
    f=${a#--from-file=}; f=${f#*=}
    [ -e "$f" ] || { say "$a: no such file"; exit 1; }
    if [ -d "$f" ]; then
      for tok in "$f"/*; do
        # A runner token file is the bare secret (what the runner reads).
        grep -qxE 'cgt_[A-Za-z0-9_-]+' "$tok" && [ "$(wc -l <"$tok")" = 1 ] || { say "$tok is not one bare token: $(head -c 200 "$tok")"; exit 1; }
      done
    fi ;;
  *) say "unexpected argument $a"; exit 1 ;;
  esac
done
say "create secret ${args[5]}: ok"
EOF
# clawguard-telegram needs the real Telegram: check what it is given (the
# bridge token file holds one bare token, the bot token file is private and
# not empty, a data dir is named) and stop there.
mkdir -p "$stubs/bin"
cat >"$stubs/bin/clawguard-telegram" <<'EOF'
#!/usr/bin/env bash
set -euo pipefail
say() { echo "clawguard-telegram stub: $*" >&2; }
tok= bot= data=
while [ $# -gt 0 ]; do
  case $1 in
  --token-file) tok=$2; shift 2 ;;
  --telegram-bot-token-file) bot=$2; shift 2 ;;
  --data-dir) data=$2; shift 2 ;;
  --server|--tls-ca|--telegram-api-url|--http-listen|--poll-timeout|--shutdown-grace|--log-level|--retry-max) shift 2 ;;
  *) say "unexpected argument $1"; exit 1 ;;
  esac
done
[ -n "$tok" ] && grep -qxE 'cgt_[A-Za-z0-9_-]+' "$tok" && [ "$(wc -l <"$tok")" = 1 ] || { say "--token-file $tok is not one bare token"; exit 1; }
[ -s "$bot" ] && [ "$(stat -c %a "$bot")" = 600 ] || { say "--telegram-bot-token-file $bot is empty or readable by others"; exit 1; }
[ -n "$data" ] || { say "no --data-dir"; exit 1; }
say "ok"
EOF
# clawguard-slack needs the real Slack: the same checks, for its two Slack
# token files (the bot token xoxb-…, the app-level token xapp-…).
cat >"$stubs/bin/clawguard-slack" <<'EOF'
#!/usr/bin/env bash
set -euo pipefail
say() { echo "clawguard-slack stub: $*" >&2; }
tok= bot= app= data=
while [ $# -gt 0 ]; do
  case $1 in
  --token-file) tok=$2; shift 2 ;;
  --slack-bot-token-file) bot=$2; shift 2 ;;
  --slack-app-token-file) app=$2; shift 2 ;;
  --data-dir) data=$2; shift 2 ;;
  --server|--tls-ca|--slack-api-url|--http-listen|--shutdown-grace|--log-level|--retry-max) shift 2 ;;
  *) say "unexpected argument $1"; exit 1 ;;
  esac
done
[ -n "$tok" ] && grep -qxE 'cgt_[A-Za-z0-9_-]+' "$tok" && [ "$(wc -l <"$tok")" = 1 ] || { say "--token-file $tok is not one bare token"; exit 1; }
for f in "$bot" "$app"; do
  [ -s "$f" ] && [ "$(stat -c %a "$f")" = 600 ] || { say "token file $f is empty or readable by others"; exit 1; }
done
grep -q '^xoxb-' "$bot" || { say "--slack-bot-token-file $bot does not hold a bot token (xoxb-…)"; exit 1; }
grep -q '^xapp-' "$app" || { say "--slack-app-token-file $app does not hold an app-level token (xapp-…)"; exit 1; }
[ -n "$data" ] || { say "no --data-dir"; exit 1; }
say "ok"
EOF
chmod +x "$stubs"/* "$stubs/bin"/*

# --- one doc ---------------------------------------------------------------
# blocks DOC: its ```sh blocks, without the README walkthrough (walkthrough.sh).
blocks() {
  awk '/<!-- walkthrough:start -->/{skip=1} /<!-- walkthrough:end -->/{skip=0; next}
       skip {next}
       /^```sh$/ {on=1; next} /^```/ {on=0} on' "$1"
}

n=0 failed=()
run_doc() {
  local doc=$1 n_blocks
  n=$((n + 1))
  n_blocks=$(grep -c '^```sh$' "$doc" || true)
  if [ "$n_blocks" = 0 ]; then echo "doctest: $doc: no sh blocks"; return 0; fi
  local dir="$work/doc$n" port port2 mport rport
  port=$(free_port) port2=$(free_port) mport=$(free_port) rport=$(free_port)
  local mport2 rport_a rport_b
  mport2=$(free_port) rport_a=$(free_port) rport_b=$(free_port)
  mkdir -p "$dir/root/.data" "$dir/logs" "$dir/home"
  chmod 755 "$dir" "$dir/root" "$dir/root/.data"
  # bin/: the real binaries, but the stub for what needs the outside world.
  mkdir "$dir/root/bin"
  for b in "$root"/bin/*; do ln -s "$b" "$dir/root/bin/"; done
  ln -sf "$stubs/bin/clawguard-telegram" "$dir/root/bin/clawguard-telegram"
  ln -sf "$stubs/bin/clawguard-slack" "$dir/root/bin/clawguard-slack"
  cp -r "$root/deploy" "$dir/root/deploy"
  rm -f "$dir/root/deploy/compose/secrets/"*-token* "$dir/root/deploy/compose/secrets/operator-token"
  psql "$pg_admin" -qc "CREATE DATABASE doc$n" >/dev/null
  local db=${pg_admin/\/postgres\?/\/doc$n?}

  local script="$dir/doc.sh"
  {
    echo "cd '$dir/root'"
    case $doc in
    README.md | cli/README.md | runner/README.md)
      # As after `make run`: a server with the operator token under .data/run.
      echo "bin/clawguard-server serve --database-url '$db' --auto-migrate --log-level warn --listen 127.0.0.1:$port \
        --metrics-listen 127.0.0.1:$mport --operator-token-file .data/run/operator.token >'$dir/logs/server.log' 2>&1 &"
      echo "until curl -fsS http://127.0.0.1:$mport/readyz >/dev/null 2>&1; do sleep 0.2; done"
      ;;
    deploy/k8s/README.md)
      # The files the doc says you have, and ncl pointed at a server with the operator token.
      echo "head -c 32 /dev/urandom | base64 > operator-token; : > tls.crt; : > tls.key; : > ca.crt"
      echo "bin/clawguard-server serve --database-url '$db' --auto-migrate --log-level warn --listen 127.0.0.1:$port \
        --metrics-listen 127.0.0.1:$mport --operator-token-file operator-token >'$dir/logs/server.log' 2>&1 &"
      echo "until curl -fsS http://127.0.0.1:$mport/readyz >/dev/null 2>&1; do sleep 0.2; done"
      echo "export CLAWGUARD_SERVER=127.0.0.1:$port CLAWGUARD_TOKEN_FILE=\$PWD/operator-token"
      ;;
    esac
    echo "set -x"
    blocks "$doc" | sed -e "s#127\.0\.0\.1:7443#127.0.0.1:$port#g" -e "s#127\.0\.0\.1:7444#127.0.0.1:$port2#g" \
      -e "s#127\.0\.0\.1:9464#127.0.0.1:$mport#g" -e "s#127\.0\.0\.1:9465#127.0.0.1:$rport#g"
  } >"$script"

  echo "doctest: $doc: $n_blocks sh blocks"
  local rc=0
  env -i PATH="$stubs:$root/bin:$PATH" HOME="$dir/home" TERM=dumb \
    DOCTEST_ROOT="$root" DOCTEST_DB="$db" DOCTEST_LOGS="$dir/logs" CLAWGUARD_DATABASE_URL="$db" \
    DOCTEST_PORT="$port" DOCTEST_PORT2="$port2" DOCTEST_METRICS_PORT="$mport" DOCTEST_METRICS_PORT2="$mport2" \
    DOCTEST_RUNNER_PORT_A="$rport_a" DOCTEST_RUNNER_PORT_B="$rport_b" \
    setsid timeout 300 bash -e "$script" >"$dir/out.log" 2>&1 &
  local pid=$!
  wait "$pid" || rc=$?
  kill -TERM -- -"$pid" 2>/dev/null || true
  # Let the doc's servers and runners stop before their database goes.
  for _ in $(seq 1 50); do pgrep -g "$pid" >/dev/null 2>&1 || break; sleep 0.2; done
  kill -KILL -- -"$pid" 2>/dev/null || true
  if [ "$rc" = 0 ]; then
    echo "doctest: $doc: ok"
  else
    echo "doctest: $doc: FAILED (exit $rc); last lines:" >&2
    tail -30 "$dir/out.log" >&2
    for l in "$dir"/logs/*.log; do [ -f "$l" ] && { echo "--- $l" >&2; tail -10 "$l" >&2; }; done
    failed+=("$doc")
  fi
}

for d in "${docs[@]}"; do run_doc "$d"; done
echo "doctest: $((${#docs[@]} - ${#failed[@]})) docs passed, ${#failed[@]} failed${failed:+: ${failed[*]}}"
[ ${#failed[@]} = 0 ]
