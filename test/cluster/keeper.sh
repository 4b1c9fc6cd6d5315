#!/usr/bin/env bash
# Holds the cluster suite's node: one network + mount + PID namespace that every cluster process runs in,
# and the teardown that leaves nothing behind, run whether the test runner stopped the cluster
# (touch $root/stop) or died (even by SIGKILL: this keeper runs in its own session and polls the runner).
#
# Killing the namespace's init kills every process in it (kubelet, containerd, shims, containers);
# the mount namespace (overlay rootfs, tmpfs volumes, pod netns bind mounts) and the network namespace
# (bridge, veths, iptables chains, conntrack) go with the last of them. What outlives processes is
# removed here: the cgroups under /<cgroup-root> and the state folder. The host's /proc/sys is never
# written (see node-setup.sh).
#
# Usage: keeper.sh RUNNER_PID STATE_ROOT CGROUP_ROOT     (prints "holder <pid>" once the namespaces exist)
set -uo pipefail
runner=$1 root=$2 cgroot=$3

# kubelet's cgroup root must exist in every v1 hierarchy; cpuset needs its CPUs and memory nodes set.
for ctl in /sys/fs/cgroup/*/; do
  [ "$ctl" = /sys/fs/cgroup/unified/ ] && continue
  mkdir -p "$ctl$cgroot"
  if [ -e "$ctl$cgroot/cpuset.cpus" ]; then
    cat "${ctl}cpuset.cpus" > "$ctl$cgroot/cpuset.cpus"
    cat "${ctl}cpuset.mems" > "$ctl$cgroot/cpuset.mems"
  fi
done

# PID 1 of the new PID namespace: bash reaps the orphans (shims) reparented to it.
unshare --net --mount --pid --fork --mount-proc --propagation private --kill-child \
  bash -c 'trap "exit 0" TERM; while :; do sleep 3600 & wait $!; done' &
unshare_pid=$!

holder=""
for _ in $(seq 100); do
  holder=$(cat "/proc/$unshare_pid/task/$unshare_pid/children" 2>/dev/null | awk '{print $1}')
  [ -n "$holder" ] && break
  sleep 0.05
done
if [ -z "$holder" ]; then echo "keeper: unshare did not start a namespace" >&2; exit 1; fi
echo "$holder" > "$root/holder.pid"
echo "holder $holder"

while kill -0 "$runner" 2>/dev/null && [ ! -e "$root/stop" ] && kill -0 "$holder" 2>/dev/null; do sleep 0.5; done

t0=$SECONDS
kill -KILL "$holder" 2>/dev/null
wait "$unshare_pid" 2>/dev/null

# Every process of the namespace is gone once no cgroup under the root has a task; then remove them
# deepest first (a cgroup v1 directory can be removed once empty of tasks and children).
remove_cgroups() {
  local left=0 d
  for ctl in /sys/fs/cgroup/*/; do
    [ -d "$ctl$cgroot" ] || continue
    while IFS= read -r d; do
      rmdir "$d" 2>/dev/null || left=1
    done < <(find "$ctl$cgroot" -depth -type d 2>/dev/null)
  done
  return $left
}
for _ in $(seq 120); do
  remove_cgroups && break
  sleep 0.5
done

if [ -z "${APPHOST_TEST_KEEP_DIRS:-}" ]; then rm -rf "$root"; else rm -f "$root/stop" "$root/holder.pid"; fi
echo "keeper: torn down in $((SECONDS - t0)) s" >&2
