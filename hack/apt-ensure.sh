#!/usr/bin/env bash
# Installs the Debian packages that provide missing files: `hack/apt-ensure.sh NAME PATH=PACKAGE...`.
# NAME prefixes the messages (who needs them). Needs root (apt-get); without it, fails naming the
# command to run.
set -euo pipefail
name="$1"
shift
missing=()
for pair in "$@"; do
  [ -e "${pair%%=*}" ] || missing+=("${pair#*=}")
done
[ ${#missing[@]} -eq 0 ] && exit 0
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)

if [ "$(id -u)" != 0 ]; then
  echo "$name: missing Debian packages: ${missing[*]}; fix: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "$name: apt-get install ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# Another apt-get (another worktree) may hold the lock: wait for it rather than fail.
apt_get() { apt-get -o DPkg::Lock::Timeout=600 "$@"; }
apt_get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
  { apt_get update -qq && apt_get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }
