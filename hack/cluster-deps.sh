#!/usr/bin/env bash
# Debian packages the cluster suite (test/cluster) and `make images` need, installed when missing:
# runc, CNI plugins, iptables and conntrack for the node; mmdebstrap for the images' Debian layers;
# skopeo to check the archives; gcc + libc6-dev for the pause binary; openssl for the node's certificates.
# Needs root (apt-get); without it, fails naming the command to run.
set -euo pipefail

exec "$(dirname "$0")/apt-ensure.sh" cluster-deps \
  /usr/sbin/runc=runc \
  /usr/lib/cni/bridge=containernetworking-plugins \
  /usr/sbin/iptables=iptables \
  /usr/sbin/conntrack=conntrack \
  /usr/bin/mmdebstrap=mmdebstrap \
  /usr/bin/skopeo=skopeo \
  /usr/bin/gcc=gcc \
  /usr/lib/x86_64-linux-gnu/libc.a=libc6-dev \
  /usr/bin/openssl=openssl \
  /usr/bin/nsenter=util-linux \
  /usr/bin/flock=util-linux
