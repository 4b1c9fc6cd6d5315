/**
 * Records core/v1 Events on our objects ("kubectl describe app x" shows what the operator did).
 * Best effort: an Event that cannot be written is logged, never fails a reconcile.
 */
import { randomBytes } from 'node:crypto';
import type { Clock } from '../../shared/clock.ts';
import type { KubeClient } from '../../shared/kube/client.ts';
import { type ObjectWithMeta, Resources } from '../../shared/kube/objects.ts';
import type { Logger } from '../../shared/log.ts';

export const EventType = { Normal: 'Normal', Warning: 'Warning' } as const;
export type EventType = (typeof EventType)[keyof typeof EventType];

export interface EventRecorder {
  record(obj: ObjectWithMeta, type: EventType, reason: string, message: string): Promise<void>;
}

export const REPORTING_COMPONENT = 'apphost-operator';
/** Bound on Event writes in flight at once. */
export const MAX_EVENTS_IN_FLIGHT = 64;

export function createEventRecorder(opts: {
  client: KubeClient;
  clock: Clock;
  log: Logger;
  identity: string;
}): EventRecorder {
  let inFlight = 0;
  const send = async (obj: ObjectWithMeta, type: EventType, reason: string, message: string) => {
    const now = new Date(opts.clock.now()).toISOString().replace(/\.\d{3}Z$/, 'Z');
    const ns = obj.metadata.namespace ?? 'default';
    await opts.client.create(Resources.Event, {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name: `${obj.metadata.name}.${randomBytes(8).toString('hex')}`, namespace: ns },
      involvedObject: {
        apiVersion: obj.apiVersion,
        kind: obj.kind,
        name: obj.metadata.name,
        namespace: ns,
        uid: obj.metadata.uid,
        resourceVersion: obj.metadata.resourceVersion,
      },
      type,
      reason,
      message: message.slice(0, 1024),
      source: { component: REPORTING_COMPONENT },
      reportingComponent: REPORTING_COMPONENT,
      reportingInstance: opts.identity,
      firstTimestamp: now,
      lastTimestamp: now,
      count: 1,
    });
  };
  return {
    // Fire and forget: an Event never delays a reconcile. Past the bound, Events are dropped (and logged).
    async record(obj, type, reason, message) {
      if (inFlight >= MAX_EVENTS_IN_FLIGHT) {
        opts.log.debug({ reason }, 'too many events in flight: dropping one');
        return;
      }
      inFlight++;
      send(obj, type, reason, message)
        .catch((err) => opts.log.debug({ err: String(err), reason }, 'could not record event'))
        .finally(() => {
          inFlight--;
        });
    },
  };
}
