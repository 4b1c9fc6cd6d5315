#!/usr/bin/env bash
# Builds the pinned test binaries (kube-apiserver, kube-controller-manager, kubectl, etcd,
# nats-server, helm) from the Go module proxy into $APPHOST_CACHE/bin.
# Each tool module is rebuilt only when its go.mod/go.sum change (a stamp file records them).
#
# Usage: hack/build-tools.sh [k8s|etcd|nats|helm ...]   (default: all)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${APPHOST_CACHE:-$HOME/.cache/apphost}
bin="$cache/bin"
mkdir -p "$bin" "$cache/stamps"

export GOTOOLCHAIN=local GOFLAGS=-mod=readonly CGO_ENABLED=0

if ! command -v go >/dev/null 2>&1; then
  echo "build-tools: 'go' (1.25+) is needed to build the test control plane; install it (apt-get install golang or https://go.dev/dl) or set KUBEBUILDER_ASSETS to a folder with etcd and kube-apiserver" >&2
  exit 1
fi

# The required version of module $2 in tools/$1/go.mod (inside or outside a require block).
module_version() {
  local v
  v=$(awk -v m="$2" '($1 == m && $2 ~ /^v/) {print $2} ($1 == "require" && $2 == m) {print $3}' "$here/tools/$1/go.mod" | head -n1)
  [ -n "$v" ] || { echo "build-tools: no version of $2 in tools/$1/go.mod" >&2; exit 1; }
  echo "$v"
}

stamp_of() { cat "$here/tools/$1/go.mod" "$here/tools/$1/go.sum" "$0" | sha256sum | cut -c1-16; }

build() {
  local name=$1; shift
  local dir="$here/tools/$name" stamp
  stamp=$(stamp_of "$name")
  if [ -f "$cache/stamps/$name" ] && [ "$(cat "$cache/stamps/$name")" = "$stamp" ]; then
    return 0
  fi
  echo "build-tools: building $name (first build takes several minutes)" >&2
  local t0=$SECONDS
  (cd "$dir" && go build -trimpath "$@")
  echo "$stamp" > "$cache/stamps/$name"
  echo "build-tools: $name built in $((SECONDS - t0))s" >&2
}

k8s() {
  local v
  v=$(module_version k8s k8s.io/kubernetes)
  local major=${v#v}; major=${major%%.*}
  local minor=${v#v*.}; minor=${minor%%.*}
  local ld=""
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $pkg.gitVersion=$v -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  done
  build k8s -ldflags "-s -w $ld" -o "$bin/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl
}
etcd() { build etcd -ldflags "-s -w" -o "$bin/etcd" go.etcd.io/etcd/server/v3; }
nats() { build nats -ldflags "-s -w" -o "$bin/nats-server" github.com/nats-io/nats-server/v2; }
helm() {
  local v
  v=$(module_version helm helm.sh/helm/v3)
  build helm -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$v" -o "$bin/helm" helm.sh/helm/v3/cmd/helm
}

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(nats etcd helm k8s)
for t in "${targets[@]}"; do
  case $t in
    k8s|etcd|nats|helm) "$t" ;;
    *) echo "build-tools: unknown tool $t" >&2; exit 2 ;;
  esac
done
