import { AckPolicy, jetstream, jetstreamManager, RetentionPolicy } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { describe, expect, inject, it } from 'vitest';

describe('nats-server with JetStream', () => {
  it('publishes, consumes and acks one message', async () => {
    const nc = await connect({ servers: inject('natsUrl') });
    try {
      const jsm = await jetstreamManager(nc);
      await jsm.streams.add({ name: 'SMOKE', subjects: ['smoke.>'], retention: RetentionPolicy.Workqueue });
      await jsm.consumers.add('SMOKE', { durable_name: 'smoke', ack_policy: AckPolicy.Explicit });
      const js = jetstream(nc);
      const ack = await js.publish('smoke.one', 'hello', { msgID: 'm1' });
      expect(ack.duplicate).toBe(false);
      expect((await js.publish('smoke.one', 'hello', { msgID: 'm1' })).duplicate).toBe(true);

      const consumer = await js.consumers.get('SMOKE', 'smoke');
      const msg = await consumer.next({ expires: 5_000 });
      expect(msg?.string()).toBe('hello');
      await msg?.ackAck();
      // Work-queue retention: an acked message is gone.
      expect((await jsm.streams.info('SMOKE')).state.messages).toBe(0);
    } finally {
      await nc.close();
    }
  });
});
