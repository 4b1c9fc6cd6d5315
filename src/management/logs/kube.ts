/**
 * The cluster's log source: the `app` container of every pod of an App (label apphost.dev/app) in the
 * project's namespace, read through the Kubernetes API (pods/log, timestamps on). A follow attaches to
 * the pods there are and to new ones as they appear; it applies backpressure (a pod's stream is not read
 * while the consumer is `maxQueuedLines` behind), so nothing is buffered without bound.
 */
import { Writable } from 'node:stream';
import { CoreV1Api, type KubeConfig, Log, type LogOptions } from '@kubernetes/client-node';
import { APP_CONTAINER_NAME, APP_LABEL } from '../../apis/v1alpha1/types.ts';
import { kubeErrorToApiError, kubeStatusOf } from '../../shared/kube/errors.ts';
import { createProjectNamespaces, type ProjectNamespaces } from '../../shared/kube/projects.ts';
import { mergeByTime, parseKubeletLine } from './parse.ts';
import type { LogLine, LogQuery, LogSource } from './types.ts';

export interface KubeLogSettings {
  /** Bytes read from one pod for a non-follow read (the newest are kept via tailLines). */
  limitBytesPerPod: number;
  /** Bound on a non-follow read of every pod. */
  readTimeoutMs: number;
  /** How often a follow looks for new pods. */
  podPollMs: number;
  /** Lines a follow may hold for its consumer before it stops reading the pods. */
  maxQueuedLines: number;
}

export const DEFAULT_KUBE_LOG_SETTINGS: KubeLogSettings = {
  limitBytesPerPod: 2 * 1024 * 1024,
  readTimeoutMs: 10_000,
  podPollMs: 5_000,
  maxQueuedLines: 1_000,
};

/** Splits written bytes into lines; `onLine` returns false to hold the writer until `resume()`. */
class LineWriter extends Writable {
  private partial = '';
  private readonly onLine: (line: string) => void;
  private readonly full: () => boolean;
  private readonly waiters: Array<() => void>;
  constructor(onLine: (line: string) => void, full: () => boolean, waiters: Array<() => void>) {
    super();
    this.onLine = onLine;
    this.full = full;
    this.waiters = waiters;
  }
  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    const text = this.partial + chunk.toString('utf8');
    const parts = text.split('\n');
    this.partial = parts.pop() ?? '';
    for (const p of parts) if (p !== '') this.onLine(p);
    if (this.full()) this.waiters.push(() => cb());
    else cb();
  }
  override _final(cb: (err?: Error | null) => void): void {
    if (this.partial !== '') this.onLine(this.partial);
    cb();
  }
}

/** A replica whose logs cannot be read is shown, not skipped: one line says why (e.g. still starting). */
export function unavailable(pod: string, err: unknown): LogLine {
  const { code, message } = kubeStatusOf(err);
  const why =
    message ??
    (code !== undefined ? `the Kubernetes API answered ${code}` : ((err as Error)?.message ?? String(err)));
  return { replica: pod, message: `apphost: no logs from this replica: ${why}` };
}

export function createKubeLogSource(
  kc: KubeConfig,
  settings: KubeLogSettings = DEFAULT_KUBE_LOG_SETTINGS,
  /** Which namespace holds a project (the management API's shared, cached lookup). */
  projects: ProjectNamespaces = createProjectNamespaces(kc, { cacheMs: 0 }),
): LogSource {
  const core = kc.makeApiClient(CoreV1Api);
  const logs = new Log(kc);

  // A failed lookup is answered like every other Kubernetes failure of the API (shared/kube/errors.ts).
  async function namespaceOf(projectId: string): Promise<string | undefined> {
    try {
      return await projects.namespaceOf(projectId);
    } catch (err) {
      throw kubeErrorToApiError(err, `project ${projectId}`);
    }
  }

  async function podsOf(namespace: string, appName: string): Promise<string[]> {
    try {
      const list = await core.listNamespacedPod({ namespace, labelSelector: `${APP_LABEL}=${appName}` });
      return list.items.map((p) => p.metadata?.name).filter((n): n is string => Boolean(n));
    } catch (err) {
      throw kubeErrorToApiError(err, `the replicas of app ${appName}`);
    }
  }

  const options = (q: LogQuery, now: number): LogOptions => ({
    timestamps: true,
    ...(q.sinceMs !== undefined ? { sinceSeconds: Math.max(1, Math.ceil((now - q.sinceMs) / 1000)) } : {}),
    ...(q.tail !== undefined ? { tailLines: q.tail } : {}),
  });

  return {
    async read(projectId, appName, q, maxLines) {
      const namespace = await namespaceOf(projectId);
      if (!namespace) return [];
      const pods = await podsOf(namespace, appName);
      const abort: AbortController[] = [];
      const timer = setTimeout(() => {
        for (const a of abort) a.abort();
      }, settings.readTimeoutMs);
      try {
        const groups = await Promise.all(
          pods.map((pod) =>
            new Promise<LogLine[]>((resolve, reject) => {
              const lines: LogLine[] = [];
              const w = new LineWriter(
                (l) => lines.push(parseKubeletLine(l, pod)),
                () => false,
                [],
              );
              w.once('finish', () => resolve(lines));
              w.once('error', reject);
              logs
                .log(namespace, pod, APP_CONTAINER_NAME, w, {
                  ...options(q, Date.now()),
                  limitBytes: settings.limitBytesPerPod,
                })
                .then((a) => abort.push(a), reject);
            }).catch((err: unknown) => [unavailable(pod, err)]),
          ),
        );
        const merged = mergeByTime(groups);
        return merged.slice(Math.max(0, merged.length - maxLines));
      } finally {
        clearTimeout(timer);
      }
    },

    async *follow(projectId, appName, q, signal) {
      const namespace = await namespaceOf(projectId);
      if (!namespace) return;
      const queue: LogLine[] = [];
      const waiters: Array<() => void> = [];
      const attached = new Map<string, AbortController>();
      let wake: (() => void) | undefined;
      const full = () => queue.length >= settings.maxQueuedLines;
      const attach = async (pod: string, query: LogQuery) => {
        if (attached.has(pod) || signal.aborted) return;
        attached.set(pod, new AbortController());
        const w = new LineWriter(
          (l) => {
            queue.push(parseKubeletLine(l, pod));
            wake?.();
          },
          full,
          waiters,
        );
        try {
          const ac = await logs.log(namespace, pod, APP_CONTAINER_NAME, w, {
            ...options(query, Date.now()),
            follow: true,
          });
          attached.set(pod, ac);
          if (signal.aborted) ac.abort();
        } catch {
          attached.delete(pod); // not running yet: tried again at the next poll
        }
      };
      const poll = async (query: LogQuery) => {
        try {
          for (const pod of await podsOf(namespace, appName)) await attach(pod, query);
        } catch {
          // the API is busy: next poll
        }
      };
      await poll(q);
      // Pods that appear later are read from their start.
      const timer = setInterval(() => void poll({}), settings.podPollMs);
      const onAbort = () => wake?.();
      signal.addEventListener('abort', onAbort, { once: true });
      try {
        while (!signal.aborted) {
          const next = queue.shift();
          if (next) {
            if (!full()) for (const w of waiters.splice(0)) w();
            yield next;
            continue;
          }
          for (const w of waiters.splice(0)) w();
          await new Promise<void>((r) => {
            wake = r;
          });
          wake = undefined;
        }
      } finally {
        clearInterval(timer);
        signal.removeEventListener('abort', onAbort);
        for (const ac of attached.values()) ac.abort();
      }
    },
  };
}
