#!/usr/bin/env bash
# Runs inside the node's namespaces (keeper.sh) before any component: the node address, forwarding,
# private tmpfs where kubelet/CNI/iptables write to fixed host paths, and the kernel settings kubelet
# insists on, shown to it as files in this mount namespace so the host's own values are never changed.
#
# Usage: node-setup.sh STATE_ROOT NODE_IP SERVICE_CIDR
set -euo pipefail
root=$1 node_ip=$2 service_cidr=$3

ip link set lo up
ip addr add "$node_ip/32" dev lo
# Processes on the node (the ingress) dial Service addresses: the first route lookup needs a route
# before kube-proxy's DNAT sends the packet to a pod. The namespace has no other way out.
ip route add "$service_cidr" dev lo
echo 1 > /proc/sys/net/ipv4/ip_forward
# Pod → Service traffic crosses the bridge: it must traverse kube-proxy's iptables rules.
if [ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]; then echo 1 > /proc/sys/net/bridge/bridge-nf-call-iptables; fi

# Fixed paths some components write to (CNI's result cache, kubelet's /var/log/containers links,
# iptables' lock): private and gone with the namespace.
mount -t tmpfs -o mode=0755 tmpfs /run
mount -t tmpfs -o mode=0755 tmpfs /var/lib
mount -t tmpfs -o mode=0755 tmpfs /var/log
mkdir -p /var/lib/cni /var/log/pods /var/log/containers

# kubelet (protectKernelDefaults: false) would otherwise rewrite these host-wide sysctls.
mkdir -p "$root/sysctl"
while read -r key value; do
  f="$root/sysctl/${key//\//_}"
  echo "$value" > "$f"
  mount --bind "$f" "/proc/sys/$key"
done <<'EOF'
vm/overcommit_memory 1
vm/panic_on_oom 0
kernel/panic 10
kernel/panic_on_oops 1
kernel/keys/root_maxkeys 1000000
kernel/keys/root_maxbytes 25000000
EOF
