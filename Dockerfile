# syntax=docker/dockerfile:1
# The apphost platform image: one image, one entrypoint, `apphost <piece>` per Deployment
# (operator | gateway | webhooks | management). Build: docker build -t ghcr.io/apphost/apphost:0.1.0 .
# `make images` builds the same image without Docker (hack/images/build.ts): Debian bookworm, the same
# pinned Node, user, layout (/app: dist/, production node_modules, crds/, bin/apphost-dataplane), entrypoint
# and ports.
ARG NODE_IMAGE=node:24.21.0-bookworm-slim

# 1. Compile TypeScript with the full (dev) dependency set.
FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --loglevel=error
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY hack/bundle.ts ./hack/
# The gateway's entry bundled (one module instead of ~445: docs/benchmarks.md, "The gateway bundled").
RUN npx tsc -p tsconfig.build.json && node hack/bundle.ts dist

# 2. Production dependencies only.
FROM ${NODE_IMAGE} AS prod-deps
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error && npm cache clean --force

# 3. The native data plane (docs/design/native-data-plane.md), glibc-linked on the same Debian release as
# the runtime base (bookworm: libc6 2.36; the binary needs GLIBC_2.34 at most), as `make images` builds it.
FROM rust:1.95.0-slim-bookworm AS dataplane
WORKDIR /src/native/dataplane
COPY native/dataplane/Cargo.toml native/dataplane/Cargo.lock ./
COPY native/dataplane/src ./src
# What `apphost-dataplane --version` reports as its build (a developer's build says dev).
ARG DATAPLANE_BUILD=docker
RUN APPHOST_DATAPLANE_BUILD=${DATAPLANE_BUILD} cargo build --release --locked

# 4. Runtime: compiled JS + prod node_modules + the data plane, non-root, read-only root filesystem friendly.
FROM ${NODE_IMAGE}
ENV NODE_ENV=production \
    NODE_OPTIONS=--enable-source-maps
WORKDIR /app
COPY --from=prod-deps /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY package.json ./
COPY crds ./crds
# The gateway's APPHOST_GATEWAY_DATA_PLANE_BIN (gateway.dataPlane: native in the chart).
COPY --from=dataplane /src/native/dataplane/target/release/apphost-dataplane ./bin/apphost-dataplane
# A fixed numeric uid so `runAsNonRoot` can verify it (the chart runs as 10001).
USER 10001:10001
EXPOSE 8080 8081 9090
ENTRYPOINT ["node", "dist/cli/main.js"]
CMD ["help"]
