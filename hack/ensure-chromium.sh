#!/usr/bin/env bash
# Debian's chromium for the dashboard's browser tests (driven by playwright-core). Never a browser
# download: the system package, installed with apt-get when it is missing and we are root.
set -euo pipefail
CHROMIUM="${APPHOST_CHROMIUM:-/usr/bin/chromium}"
[ -x "$CHROMIUM" ] && exit 0
if [ -n "${APPHOST_CHROMIUM:-}" ]; then
  echo "APPHOST_CHROMIUM=$APPHOST_CHROMIUM is not an executable file" >&2
  exit 1
fi
FIX="apt-get update && apt-get install -y --no-install-recommends chromium fonts-dejavu-core"
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "installing Debian's chromium for the dashboard's browser tests ..."
  if apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    chromium fonts-dejavu-core >/dev/null; then
    [ -x "$CHROMIUM" ] && exit 0
  fi
fi
echo "Chromium is missing at /usr/bin/chromium and could not be installed here." >&2
echo "Install it as root:  $FIX" >&2
echo "(or set APPHOST_CHROMIUM to a Chromium binary)" >&2
exit 1
