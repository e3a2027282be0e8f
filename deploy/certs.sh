#!/usr/bin/env bash
# One CA, a server certificate for every name clients dial, and one client
# certificate per runner, bridge or operator: the certificates of TLS.md and
# THREE-HOSTS.md from the hosts' names, no command to rewrite by hand.
#
#   deploy/certs.sh OUT_DIR --server NAME[,NAME…] [--client NAME[,NAME…]]
#
#   --server  the names (DNS or IP) the servers are dialled by: the shared
#             name and each control host (clawguard.example,host1,host2)
#   --client  one client certificate each, CN = the name (host3,bridge,operator)
#
# A CA already in OUT_DIR (ca.crt, ca.key) is reused, so clients can be
# added later. Keys are written 0600 (ca.key) and 0640 (the others) with
# the caller's owner: copy each to its host with the owner of the program
# that reads it (the images run as uid 65532), e.g.
#   install -o 65532 -g 65532 -m 0400 server.key tls/server.key
set -euo pipefail
usage() { echo "usage: $0 OUT_DIR --server NAME[,NAME...] [--client NAME[,NAME...]]" >&2; exit 2; }
[ $# -ge 3 ] || usage
out=$1; shift
servers='' clients=''
while [ $# -gt 0 ]; do
  case $1 in
    --server) servers=${2:-}; shift 2 || usage ;;
    --client) clients=${2:-}; shift 2 || usage ;;
    *) usage ;;
  esac
done
[ -n "$servers" ] || usage
command -v openssl >/dev/null || { echo "$0: openssl is required" >&2; exit 1; }
mkdir -p "$out"
cd "$out"
umask 027
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; chmod "$2" "$1"; }
if [ ! -f ca.key ]; then
  key ca.key 0600
  openssl req -x509 -new -key ca.key -days 365 -subj "/CN=clawguard CA" -out ca.crt 2>/dev/null
fi
chmod 0644 ca.crt
san=''
IFS=, read -ra names <<<"$servers"
for n in "${names[@]}"; do
  if [[ $n =~ ^[0-9.]+$ || $n == *:* ]]; then san+="IP:$n,"; else san+="DNS:$n,"; fi
done
cert() { # name key-file cn ext
  key "$1.key" 0640
  openssl req -new -key "$1.key" -subj "/CN=$2" -out "$1.csr" 2>/dev/null
  printf '%s\n' "$3" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 365 -extfile "$1.ext" -out "$1.crt" 2>/dev/null
  chmod 0644 "$1.crt"
  rm -f "$1.csr" "$1.ext"
}
cert server "${names[0]}" "subjectAltName=${san%,}
extendedKeyUsage=serverAuth"
if [ -n "$clients" ]; then
  IFS=, read -ra who <<<"$clients"
  for c in "${who[@]}"; do
    cert "$c" "$c" "extendedKeyUsage=clientAuth"
  done
fi
echo "certificates in $PWD: ca.crt, server.crt/server.key (${san%,})${clients:+, and ${clients//,/, } (.crt/.key)}"
