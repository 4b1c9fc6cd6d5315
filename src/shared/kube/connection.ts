/**
 * @kubernetes/client-node 2.x builds a new undici Agent for every request, so every API call pays a
 * fresh TCP+TLS handshake. This keeps one Agent per KubeConfig and reuses it (kept-alive connections),
 * renewing it every `renewMs` so rotated client certificates are picked up.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import type { Dispatcher } from 'undici';

/** How long one pooled Agent is reused before a fresh one (with freshly read credentials) replaces it. */
export const KUBE_AGENT_RENEW_MS = 5 * 60_000;

const patched = new WeakSet<KubeConfig>();

type CreateDispatcher = (cluster: unknown, agentOptions: unknown) => Dispatcher | undefined;

export function reuseKubeConnections(
  kc: KubeConfig,
  now: () => number = Date.now,
  renewMs = KUBE_AGENT_RENEW_MS,
): KubeConfig {
  if (patched.has(kc)) return kc;
  patched.add(kc);
  // client-node 2.0.x asks its private `createDispatcher` once per request (from
  // applySecurityAuthentication, which every request and watch goes through): answering the shared
  // Agent there means no per-request Agent is built and closed (that cost ~3% of the operator's CPU:
  // docs/benchmarks.md, "Operator convergence, third round"). connection.test.ts fails if the hook moves.
  const hooked = kc as unknown as { createDispatcher: CreateDispatcher };
  const original = hooked.createDispatcher.bind(kc);
  let shared: { dispatcher: Dispatcher; since: number } | undefined;
  hooked.createDispatcher = (cluster, agentOptions) => {
    const t = now();
    if (shared && t - shared.since <= renewMs) return shared.dispatcher;
    const fresh = original(cluster, agentOptions);
    if (!fresh) return fresh;
    // The old Agent finishes its in-flight requests, then closes its connections.
    const old = shared?.dispatcher;
    shared = { dispatcher: fresh, since: t };
    void old?.close().catch(() => undefined);
    return fresh;
  };
  return kc;
}
