/**
 * Leader election over a coordination.k8s.io/v1 Lease, as client-go does it: the holder renews
 * every `retryPeriodMs`; a candidate takes the Lease only after it has seen the same record unchanged
 * for `leaseDurationMs` (local observation time, so clock skew between replicas does not matter);
 * optimistic concurrency (resourceVersion) decides races. A leader that cannot renew within
 * `renewDeadlineMs` steps down before anyone else may take over.
 */
import type { Clock } from '../../shared/clock.ts';
import type { KubeClient } from '../../shared/kube/client.ts';
import { isConflict } from '../../shared/kube/errors.ts';
import { type Lease, type LeaseSpec, Resources } from '../../shared/kube/objects.ts';
import type { Logger } from '../../shared/log.ts';

export interface LeaderElectionSettings {
  namespace: string;
  leaseName: string;
  identity: string;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  /** Hand the Lease back on stop so a successor need not wait for it to expire. */
  releaseOnStop: boolean;
}

export interface LeaderElector {
  start(): void;
  stop(): Promise<void>;
  isLeader(): boolean;
}

/** Lease times are MicroTime: RFC 3339 with microseconds. */
export const microTime = (ms: number): string => new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');

export function createLeaderElector(opts: {
  client: KubeClient;
  settings: LeaderElectionSettings;
  clock: Clock;
  log: Logger;
  onStartedLeading: () => void | Promise<void>;
  /** Awaited before the Lease is released or retaken, so two leaders never write at once. */
  onStoppedLeading: () => void | Promise<void>;
}): LeaderElector {
  const { client, settings: s, clock } = opts;
  const log = opts.log.child({ lease: `${s.namespace}/${s.leaseName}`, identity: s.identity });
  const ref = { namespace: s.namespace, name: s.leaseName };
  let leader = false;
  let lastRenew = 0;
  let observed: { key: string; at: number } | undefined;
  let stopping = false;
  let wake: (() => void) | undefined;
  let loop: Promise<void> | undefined;

  const leaseSpec = (prev: LeaseSpec | undefined, now: number): LeaseSpec => {
    const wasMine = prev?.holderIdentity === s.identity;
    return {
      holderIdentity: s.identity,
      leaseDurationSeconds: Math.max(1, Math.ceil(s.leaseDurationMs / 1000)),
      acquireTime: wasMine && prev?.acquireTime ? prev.acquireTime : microTime(now),
      renewTime: microTime(now),
      leaseTransitions: (prev?.leaseTransitions ?? 0) + (wasMine || !prev?.holderIdentity ? 0 : 1),
    };
  };

  const tryAcquireOrRenew = async (): Promise<boolean> => {
    const now = clock.now();
    const lease = await client.get<Lease>(Resources.Lease, ref);
    if (!lease) {
      await client.create(Resources.Lease, {
        apiVersion: Resources.Lease.apiVersion,
        kind: Resources.Lease.kind,
        metadata: { name: s.leaseName, namespace: s.namespace },
        spec: leaseSpec(undefined, now),
      });
      return true;
    }
    const spec: LeaseSpec = lease.spec ?? {};
    const recordKey = `${spec.holderIdentity}|${spec.renewTime}|${lease.metadata.resourceVersion}`;
    if (observed?.key !== recordKey) observed = { key: recordKey, at: now };
    const holder = spec.holderIdentity ?? '';
    const durationMs = (spec.leaseDurationSeconds ?? Math.ceil(s.leaseDurationMs / 1000)) * 1000;
    if (holder && holder !== s.identity && observed.at + durationMs > now) return false;
    await client.replace(Resources.Lease, { ...lease, spec: leaseSpec(spec, now) });
    return true;
  };

  const setLeader = async (value: boolean) => {
    if (value === leader) return;
    leader = value;
    log.info({ leader: value }, value ? 'became leader' : 'stopped leading');
    try {
      if (value) await opts.onStartedLeading();
      else await opts.onStoppedLeading();
    } catch (err) {
      log.error({ err: String(err) }, 'leadership callback failed');
    }
  };

  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const t = setTimeout(resolve, ms);
      wake = () => {
        clearTimeout(t);
        resolve();
      };
    });

  /** One attempt, bounded by the renew deadline: a hung request must not keep a stale leader writing. */
  const attempt = async (): Promise<boolean> => {
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('lease request timed out')), s.renewDeadlineMs);
    });
    try {
      return await Promise.race([tryAcquireOrRenew(), bound]);
    } finally {
      clearTimeout(timer);
    }
  };

  const run = async () => {
    while (!stopping) {
      try {
        if (await attempt()) {
          lastRenew = clock.now();
          await setLeader(true);
        } else {
          await setLeader(false);
        }
      } catch (err) {
        if (!isConflict(err)) log.warn({ err: String(err) }, 'lease acquire/renew failed');
        if (leader && clock.now() - lastRenew > s.renewDeadlineMs) await setLeader(false);
      }
      if (!stopping) await pause(s.retryPeriodMs);
    }
  };

  return {
    start() {
      loop ??= run();
    },
    async stop() {
      stopping = true;
      wake?.();
      await loop;
      const wasLeader = leader;
      await setLeader(false);
      if (wasLeader && s.releaseOnStop) {
        try {
          const lease = await client.get<Lease>(Resources.Lease, ref);
          if (lease && lease.spec?.holderIdentity === s.identity) {
            await client.replace(Resources.Lease, {
              ...lease,
              spec: {
                ...lease.spec,
                holderIdentity: '',
                leaseDurationSeconds: 1,
                renewTime: microTime(clock.now()),
              },
            });
          }
        } catch (err) {
          log.warn({ err: String(err) }, 'could not release the lease');
        }
      }
    },
    isLeader: () => leader,
  };
}
