import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createGatewayMetrics } from './metrics.ts';

describe('createGatewayMetrics', () => {
  it('exposes the in-flight count and the sync records skipped as of each scrape', async () => {
    const registry = new Registry();
    let inflight = 3;
    const m = createGatewayMetrics(registry, { inflight: () => inflight });
    m.syncRecordSkipped('rate');
    m.syncRecordSkipped('rate');
    m.syncRecordSkipped('disconnected');
    let text = await registry.metrics();
    expect(text).toContain('apphost_gateway_inflight_requests 3');
    expect(text).toContain('apphost_gateway_sync_records_skipped_total{reason="rate"} 2');
    expect(text).toContain('apphost_gateway_sync_records_skipped_total{reason="disconnected"} 1');

    // Counted once each: a second scrape adds only what happened since.
    inflight = 0;
    m.syncRecordSkipped('rate');
    text = await registry.metrics();
    expect(text).toContain('apphost_gateway_inflight_requests 0');
    expect(text).toContain('apphost_gateway_sync_records_skipped_total{reason="rate"} 3');
    expect(text).toContain('apphost_gateway_sync_records_skipped_total{reason="disconnected"} 1');
  });
});
