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

export function reuseKubeConnections(
  kc: KubeConfig,
  now: () => number = Date.now,
  renewMs = KUBE_AGENT_RENEW_MS,
): KubeConfig {
  if (patched.has(kc)) return kc;
  patched.add(kc);
  const original = kc.applySecurityAuthentication.bind(kc);
  let shared: { dispatcher: Dispatcher; since: number } | undefined;
  kc.applySecurityAuthentication = async (context) => {
    await original(context);
    const fresh = context.getDispatcher();
    if (!fresh) return;
    const t = now();
    if (!shared || t - shared.since > renewMs) {
      // The old Agent finishes its in-flight requests, then closes its connections.
      const old = shared?.dispatcher;
      shared = { dispatcher: fresh, since: t };
      void old?.close().catch(() => undefined);
      return;
    }
    context.setDispatcher(shared.dispatcher);
    // The per-request Agent never connected; closing it frees nothing but keeps it tidy.
    void fresh.close().catch(() => undefined);
  };
  return kc;
}
