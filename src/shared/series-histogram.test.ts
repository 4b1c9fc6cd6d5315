import { AggregatorRegistry, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { SeriesHistogram } from './series-histogram.ts';

const BUCKETS = [0.005, 0.01, 0.1, 1];
const OBSERVED: Array<[Record<'project' | 'app', string>, number]> = [
  [{ project: 'shop', app: 'hello' }, 0.003],
  [{ project: 'shop', app: 'hello' }, 0.01],
  [{ project: 'shop', app: 'hello' }, 2.5],
  [{ project: 'shop', app: 'other' }, 0.05],
  [{ project: '', app: '' }, 0.0001],
];

/** The same observations in prom-client's Histogram and in a SeriesHistogram, each on its own registry. */
function both() {
  const theirs = new Registry();
  const ours = new Registry();
  const cfg = {
    name: 'x_seconds',
    help: 'h "quoted"',
    labelNames: ['project', 'app'] as const,
    buckets: BUCKETS,
  };
  const h = new Histogram({ ...cfg, labelNames: [...cfg.labelNames], registers: [theirs] });
  const s = new SeriesHistogram({ ...cfg, registers: [ours] });
  for (const [labels, v] of OBSERVED) {
    h.observe(labels, v);
    s.series(labels).observe(v);
  }
  return { theirs, ours, s };
}

describe('SeriesHistogram', () => {
  it("exposes exactly what prom-client's Histogram exposes for the same observations", async () => {
    const { theirs, ours } = both();
    expect(await ours.metrics()).toBe(await theirs.metrics());
    expect(await ours.getMetricsAsJSON()).toEqual(
      (await theirs.getMetricsAsJSON()).map((m) => ({
        ...m,
        values: (m.values as Array<{ labels: object; value: number; metricName?: string }>).map(
          ({ labels, value, metricName }) => ({ labels, value, metricName }),
        ),
      })),
    );
  });

  it('adds up across processes as prom-client does (AggregatorRegistry)', async () => {
    const a = both();
    const b = both();
    const theirs = AggregatorRegistry.aggregate([
      await a.theirs.getMetricsAsJSON(),
      await b.theirs.getMetricsAsJSON(),
    ]);
    const ours = AggregatorRegistry.aggregate([
      await a.ours.getMetricsAsJSON(),
      await b.ours.getMetricsAsJSON(),
    ]);
    expect(await ours.metrics()).toBe(await theirs.metrics());
    expect(await ours.metrics()).toContain('x_seconds_count{project="shop",app="hello"} 6');
  });

  it('keeps one series per label set, and its handles valid across a reset', async () => {
    const { ours, s } = both();
    const h = s.series({ project: 'shop', app: 'hello' });
    h.observe(0.2);
    expect(await ours.metrics()).toContain('x_seconds_count{project="shop",app="hello"} 4');
    ours.resetMetrics();
    h.observe(0.2);
    const text = await ours.metrics();
    expect(text).toContain('x_seconds_count{project="shop",app="hello"} 1');
    expect(text).toContain('x_seconds_bucket{le="1",project="shop",app="hello"} 1');
    expect(text).toContain('x_seconds_bucket{le="0.1",project="shop",app="hello"} 0');
    expect(() => h.observe(Number.NaN)).toThrow(TypeError);
  });
});
