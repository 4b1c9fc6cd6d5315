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

  it('counts calls by app, mode and status and observes their durations, each call once', async () => {
    const registry = new Registry();
    const m = createGatewayMetrics(registry, { inflight: () => 0 });
    m.call('shop', 'hello', 'sync', 200, 0.003);
    m.call('shop', 'hello', 'sync', 200, 0.02);
    m.call('shop', 'hello', 'sync', 502, 0.001);
    m.call('shop', 'hello', 'async', 202, 0.002);
    m.call('', '', 'sync', 401, 0.001);
    let text = await registry.metrics();
    const req = (labels: string, n: number) =>
      expect(text).toContain(`apphost_gateway_requests_total{${labels}} ${n}`);
    req('project="shop",app="hello",mode="sync",status="200"', 2);
    req('project="shop",app="hello",mode="sync",status="502"', 1);
    req('project="shop",app="hello",mode="async",status="202"', 1);
    req('project="",app="",mode="sync",status="401"', 1);
    expect(text).toContain(
      'apphost_gateway_request_duration_seconds_bucket{le="0.005",project="shop",app="hello",mode="sync"} 2',
    );
    expect(text).toContain(
      'apphost_gateway_request_duration_seconds_count{project="shop",app="hello",mode="sync"} 3',
    );

    m.call('shop', 'hello', 'sync', 200, 0.003);
    text = await registry.metrics();
    req('project="shop",app="hello",mode="sync",status="200"', 3);
    req('project="shop",app="hello",mode="sync",status="502"', 1);
    expect(text).toContain(
      'apphost_gateway_request_duration_seconds_count{project="shop",app="hello",mode="sync"} 4',
    );
  });
});
