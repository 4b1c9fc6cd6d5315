/**
 * A JetStream publish that rides out a failover: while a stream's leader is re-elected (a NATS node lost)
 * JetStream answers "no responders", "temporarily unavailable" or nothing for a few seconds. The message
 * carries a `Nats-Msg-Id`, so publishing it again is stored once; we keep trying until `timeoutMs` is
 * used up instead of failing at the first refusal.
 */
import type { PubAck } from '@nats-io/jetstream';
import type { JetStreamPublisher } from './nats/ack-inbox.ts';

/** Bound on one attempt inside the overall bound (a dead server's request would use all of it). */
const ATTEMPT_TIMEOUT_MS = 2_000;
const FIRST_PAUSE_MS = 100;
const MAX_PAUSE_MS = 1_000;

export async function publishIdempotent(
  js: JetStreamPublisher,
  subject: string,
  payload: string | Uint8Array,
  opts: { msgID: string; timeoutMs: number; now?: () => number },
): Promise<PubAck> {
  const now = opts.now ?? Date.now;
  const deadline = now() + opts.timeoutMs;
  let pause = FIRST_PAUSE_MS;
  for (;;) {
    const left = deadline - now();
    try {
      return await js.publish(subject, payload, {
        msgID: opts.msgID,
        timeout: Math.max(1, Math.min(left, ATTEMPT_TIMEOUT_MS)),
      });
    } catch (err) {
      if (deadline - now() <= pause) throw err;
      await new Promise((r) => setTimeout(r, pause));
      pause = Math.min(pause * 2, MAX_PAUSE_MS);
    }
  }
}
