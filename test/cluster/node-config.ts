/**
 * Configuration files of the node's components. The settings that matter on this machine kind
 * (see ../../../shared/reference/real-cluster.md, summarised in docs/testing.md): containerd's
 * restrict_oom_score_adj (no CAP_SYS_RESOURCE), kubelet's failCgroupV1: false and cgroupfs, a private
 * cgroup root per run, every path under the run's state folder.
 */
import { join } from 'node:path';

export interface NodeLayout {
  root: string;
  nodeName: string;
  nodeIp: string;
  podCidr: string;
  serviceCidr: string;
  dnsIp: string;
  cgroupRoot: string;
  pauseImage: string;
  containerdSocket: string;
}

export function containerdConfig(n: NodeLayout): string {
  return `version = 3
root = '${join(n.root, 'containerd', 'root')}'
state = '${join(n.root, 'containerd', 'state')}'

[grpc]
  address = '${n.containerdSocket}'

[ttrpc]
  address = '${n.containerdSocket}.ttrpc'

[debug]
  level = 'warn'

[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = '${n.pauseImage}'
  [plugins.'io.containerd.cri.v1.runtime']
    # No CAP_SYS_RESOURCE here: runc may not lower a container's oom_score_adj below its own.
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    enable_unprivileged_ports = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = 'io.containerd.runc.v2'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = '/usr/sbin/runc'
        Root = '${join(n.root, 'containerd', 'runc')}'
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ['/usr/lib/cni']
      conf_dir = '${join(n.root, 'cni', 'net.d')}'
  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = '127.0.0.1'
`;
}

export function cniConfig(n: NodeLayout): string {
  return JSON.stringify(
    {
      cniVersion: '1.0.0',
      name: 'apphost-test',
      plugins: [
        {
          type: 'bridge',
          bridge: 'cni0',
          isGateway: true,
          ipMasq: true,
          hairpinMode: true,
          ipam: {
            type: 'host-local',
            ranges: [[{ subnet: n.podCidr }]],
            routes: [{ dst: '0.0.0.0/0' }],
            dataDir: join(n.root, 'cni', 'ipam'),
          },
        },
        { type: 'portmap', capabilities: { portMappings: true } },
      ],
    },
    null,
    2,
  );
}

export function kubeletConfig(n: NodeLayout, caCert: string): string {
  return `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# cgroup v1 on this machine kind: Kubernetes 1.35 refuses it unless told otherwise.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /${n.cgroupRoot}
failSwapOn: false
makeIPTablesUtilChains: false
containerRuntimeEndpoint: unix://${n.containerdSocket}
clusterDNS: [${n.dnsIp}]
clusterDomain: cluster.local
podLogsDir: ${join(n.root, 'pod-logs')}
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: ${caCert}}
authorization:
  mode: Webhook
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
serializeImagePulls: false
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
maxPods: 250
# Status reaches the API server without waiting out the defaults: faster Ready on a fresh node.
nodeStatusUpdateFrequency: 4s
syncFrequency: 10s
shutdownGracePeriod: 0s
`;
}

export function kubeProxyConfig(n: NodeLayout, kubeconfigPath: string): string {
  return `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clusterCIDR: ${n.podCidr}
hostnameOverride: ${n.nodeName}
bindAddress: ${n.nodeIp}
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
clientConnection:
  kubeconfig: ${kubeconfigPath}
# A network namespace cannot set the host-wide conntrack table size; leave the kernel's values.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
iptables:
  syncPeriod: 5s
  minSyncPeriod: 0s
`;
}
