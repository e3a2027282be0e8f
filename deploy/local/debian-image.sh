#!/usr/bin/env bash
# Builds clawguard-debian:<suite>, a minimal Debian image with apt, from the
# Debian archive this machine's apt uses (no registry pull: none is reachable
# here). Group images built on it (through an agent image FROM it, see
# `make debian-image`) get their approved apt packages really installed.
#
# Cached in Docker: when the image exists nothing is done (DEBIAN_IMAGE_REBUILD=1
# forces a rebuild). mmdebstrap is installed with apt-get when missing.
# Progress goes to stderr; the image name is printed on stdout.
#
#   DEBIAN_SUITE   (default: this machine's VERSION_CODENAME, else bookworm)
#   DEBIAN_MIRROR  (default: http://deb.debian.org/debian)
set -euo pipefail

suite=${DEBIAN_SUITE:-}
if [[ -z $suite && -r /etc/os-release ]]; then
  suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
fi
suite=${suite:-bookworm}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
image="clawguard-debian:$suite"

# What the image holds besides apt: CA roots, and curl (a client nobody
# here wrote, for the egress tests and an agent's own use). The list is a
# label of the image, so a cached image from an older list is rebuilt.
packages=ca-certificates,curl

if [[ -z ${DEBIAN_IMAGE_REBUILD:-} ]] &&
  [[ $(docker image inspect -f '{{ index .Config.Labels "dev.clawguard.debian-packages" }}' "$image" 2>/dev/null) == "$packages" ]]; then
  echo "$image: present (cached)" >&2
  echo "$image"
  exit 0
fi

if ! command -v mmdebstrap >/dev/null; then
  sudo=; [[ $(id -u) -ne 0 ]] && sudo=sudo
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "$image: mmdebstrap $suite from $mirror (a few minutes, once)" >&2
# --variant=apt: Essential plus apt, nothing else. Docs, man pages and
# locales are left out; apt lists are emptied (group builds run apt-get update).
mmdebstrap --variant=apt --include="$packages" \
  --aptopt='Acquire::Languages "none"' \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --customize-hook='rm -rf "$1"/var/lib/apt/lists/*' \
  "$suite" "$work/rootfs.tar" "$mirror" >&2
docker import \
  --change 'CMD ["/bin/bash"]' \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change "LABEL dev.clawguard.debian-suite=$suite" \
  --change "LABEL dev.clawguard.debian-packages=$packages" \
  "$work/rootfs.tar" "$image" >/dev/null
echo "$image: built" >&2
echo "$image"
