#!/usr/bin/env bash
# Builds the pinned test binaries from the Go module proxy into $APPHOST_CACHE/bin.
#
#   control plane (every suite): etcd, kube-apiserver, kube-controller-manager, kubectl, nats-server, helm
#   cluster suite (test/cluster): kubelet, kube-proxy, kube-scheduler, containerd (+ ctr, runc shim),
#                                 coredns, caddy, pause (gcc -static of Kubernetes' pause.c)
#
# Each group is rebuilt only when its go.mod/go.sum or build flags change (a stamp records them) or a
# binary is missing. A lock per group lets worktrees sharing the cache run this at the same time
# without building the same thing twice; binaries are replaced by rename, so a running test keeps its copy.
#
# Usage: hack/build-tools.sh [GROUP ...]   (default: the control-plane groups; `cluster` = the cluster suite's)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${APPHOST_CACHE:-$HOME/.cache/apphost}
bin="$cache/bin"
mkdir -p "$bin" "$cache/stamps" "$cache/locks"

export GOTOOLCHAIN=local GOFLAGS=-mod=readonly CGO_ENABLED=0

need_go() {
  if ! command -v go >/dev/null 2>&1; then
    echo "build-tools: 'go' (1.25+) is needed to build the test binaries; install it (apt-get install golang or https://go.dev/dl) or set KUBEBUILDER_ASSETS to a folder with etcd and kube-apiserver" >&2
    exit 1
  fi
}

# The required version of module $2 in tools/$1/go.mod (inside or outside a require block).
module_version() {
  local v
  v=$(awk -v m="$2" '($1 == m && $2 ~ /^v/) {print $2} ($1 == "require" && $2 == m) {print $3}' "$here/tools/$1/go.mod" | head -n1)
  [ -n "$v" ] || { echo "build-tools: no version of $2 in tools/$1/go.mod" >&2; exit 1; }
  echo "$v"
}

# build GROUP MODULE_DIR "OUTPUTS" GO_BUILD_ARGS...: one `go build` of a group's packages into bin/.
build() {
  local group=$1 mod=$2 outputs=$3; shift 3
  local dir="$here/tools/$mod" stamp_file="$cache/stamps/group-$group" stamp missing=0 o
  stamp=$( (cat "$dir/go.mod" "$dir/go.sum"; printf '%s\n' "$@") | sha256sum | cut -c1-16)
  for o in $outputs; do [ -x "$bin/$o" ] || missing=1; done
  if [ $missing = 0 ] && [ "$(cat "$stamp_file" 2>/dev/null)" = "$stamp" ]; then return 0; fi
  need_go
  exec {lock}>"$cache/locks/$group.lock"
  flock "$lock"
  # Another worktree may have built it while we waited.
  missing=0
  for o in $outputs; do [ -x "$bin/$o" ] || missing=1; done
  if [ $missing = 0 ] && [ "$(cat "$stamp_file" 2>/dev/null)" = "$stamp" ]; then exec {lock}>&-; return 0; fi
  echo "build-tools: building $group ($outputs; the first build takes minutes)" >&2
  local t0=$SECONDS tmp
  tmp=$(mktemp -d "$cache/bin.tmp.XXXXXX")
  local out="$tmp/"
  case $outputs in *" "*) ;; *) out="$tmp/$outputs" ;; esac
  (cd "$dir" && go build -trimpath -o "$out" "$@")
  for o in $outputs; do mv -f "$tmp/$o" "$bin/$o"; done
  rm -rf "$tmp"
  echo "$stamp" > "$stamp_file"
  echo "build-tools: $group built in $((SECONDS - t0))s" >&2
  exec {lock}>&-
}

k8s_ldflags() {
  local v major minor ld=""
  v=$(module_version k8s k8s.io/kubernetes)
  major=${v#v}; major=${major%%.*}
  minor=${v#v*.}; minor=${minor%%.*}
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $pkg.gitVersion=$v -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  done
  echo "-s -w$ld"
}

k8s() {
  build k8s k8s "kube-apiserver kube-controller-manager kubectl" -ldflags "$(k8s_ldflags)" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl
}
k8s-node() {
  build k8s-node k8s "kubelet kube-proxy kube-scheduler" -ldflags "$(k8s_ldflags)" \
    k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kube-scheduler
}
etcd() { build etcd etcd etcd -ldflags "-s -w" go.etcd.io/etcd/server/v3; }
nats() { build nats nats nats-server -ldflags "-s -w" github.com/nats-io/nats-server/v2; }
helm() {
  local v
  v=$(module_version helm helm.sh/helm/v3)
  build helm helm helm -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$v" helm.sh/helm/v3/cmd/helm
}
containerd() {
  local v
  v=$(module_version containerd github.com/containerd/containerd/v2)
  build containerd containerd "containerd containerd-shim-runc-v2 ctr" -tags "no_btrfs no_devmapper no_zfs" \
    -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$v" \
    github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
    github.com/containerd/containerd/v2/cmd/ctr
}
coredns() { build coredns coredns coredns -ldflags "-s -w" github.com/coredns/coredns; }
caddy() { build caddy caddy caddy -ldflags "-s -w" github.com/caddyserver/caddy/v2/cmd/caddy; }

# The pod sandbox ("pause") from the Kubernetes module's own source, linked statically.
pause() {
  local v src stamp stamp_file="$cache/stamps/group-pause"
  v=$(module_version k8s k8s.io/kubernetes)
  src="$(cd "$here/tools/k8s" && GOFLAGS= go env GOMODCACHE)/k8s.io/kubernetes@$v/build/pause/linux/pause.c"
  stamp=$(printf '%s gcc -static -Os\n' "$v" | sha256sum | cut -c1-16)
  if [ -x "$bin/pause" ] && [ "$(cat "$stamp_file" 2>/dev/null)" = "$stamp" ]; then return 0; fi
  if [ ! -f "$src" ]; then (cd "$here/tools/k8s" && go mod download k8s.io/kubernetes); fi
  command -v gcc >/dev/null || { echo "build-tools: gcc is needed for the pause binary: apt-get install gcc libc6-dev (or: make deps-cluster)" >&2; exit 1; }
  gcc -static -Os -Wall -Werror -DVERSION="$v" -o "$bin/pause.tmp" "$src"
  strip "$bin/pause.tmp" && mv -f "$bin/pause.tmp" "$bin/pause"
  echo "$stamp" > "$stamp_file"
}

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(nats etcd helm k8s)
for t in "${targets[@]}"; do
  case $t in
    k8s|k8s-node|etcd|nats|helm|containerd|coredns|caddy|pause) "$t" ;;
    cluster) k8s-node; containerd; coredns; caddy; pause ;;
    *) echo "build-tools: unknown group $t" >&2; exit 2 ;;
  esac
done
