/** An EventRecorder for reconciler table tests: keeps what would have been recorded. */
import type { EventRecorder } from '../events.ts';

export interface RecordedEvent {
  object: string;
  type: string;
  reason: string;
  message: string;
}

export function createFakeEventRecorder(): EventRecorder & { events: RecordedEvent[] } {
  const events: RecordedEvent[] = [];
  return {
    events,
    async record(obj, type, reason, message) {
      events.push({ object: `${obj.kind}/${obj.metadata.name}`, type, reason, message });
    },
  };
}
