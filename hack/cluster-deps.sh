#!/usr/bin/env bash
# Debian packages the cluster suite (test/cluster) and `make images` need, installed when missing:
# runc, CNI plugins, iptables and conntrack for the node; mmdebstrap for the images' Debian layers;
# skopeo to check the archives; gcc + libc6-dev for the pause binary; openssl for the node's certificates.
# Needs root (apt-get); without it, fails naming the command to run.
set -euo pipefail

# command-or-path → package
declare -A need=(
  [/usr/sbin/runc]=runc
  [/usr/lib/cni/bridge]=containernetworking-plugins
  [/usr/sbin/iptables]=iptables
  [/usr/sbin/conntrack]=conntrack
  [/usr/bin/mmdebstrap]=mmdebstrap
  [/usr/bin/skopeo]=skopeo
  [/usr/bin/gcc]=gcc
  [/usr/lib/x86_64-linux-gnu/libc.a]=libc6-dev
  [/usr/bin/openssl]=openssl
  [/usr/bin/nsenter]=util-linux
  [/usr/bin/flock]=util-linux
)
missing=()
for path in "${!need[@]}"; do
  [ -e "$path" ] || missing+=("${need[$path]}")
done
[ ${#missing[@]} -eq 0 ] && exit 0
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)

if [ "$(id -u)" != 0 ]; then
  echo "cluster-deps: missing Debian packages: ${missing[*]}; fix: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "cluster-deps: apt-get install ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# Another apt-get (another worktree) may hold the lock: wait for it rather than fail.
apt_get() { apt-get -o DPkg::Lock::Timeout=600 "$@"; }
apt_get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
  { apt_get update -qq && apt_get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }
