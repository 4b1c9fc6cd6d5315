import {
  AggregatorRegistry,
  Counter,
  collectDefaultMetrics,
  Gauge,
  Histogram,
  Registry,
  Summary,
} from 'prom-client';
import { describe, expect, it } from 'vitest';
import { metricsText, registryText } from './metrics-text.ts';

/** A registry with every kind of metric and every character prom-client escapes. */
function everyKind(): Registry {
  const r = new Registry();
  const c = new Counter({
    name: 'calls_total',
    help: 'Calls by "app" \\ a help text over\ntwo lines',
    labelNames: ['project', 'app', 'status'],
    registers: [r],
  });
  c.inc({ project: 'p', app: 'a', status: 200 }, 3);
  c.inc({ project: 'p', app: 'quote " back \\ new\nline', status: '503' });
  new Counter({ name: 'never_counted_total', help: 'no series yet', labelNames: ['x'], registers: [r] });
  new Counter({ name: 'bare_total', help: 'no labels', registers: [r] }).inc(0.5);
  const g = new Gauge({ name: 'levels', help: 'odd values', labelNames: ['which'], registers: [r] });
  g.set({ which: 'nan' }, Number.NaN);
  g.set({ which: 'inf' }, Number.POSITIVE_INFINITY);
  g.set({ which: '-inf' }, Number.NEGATIVE_INFINITY);
  g.set({ which: 'tiny' }, 1.5e-9);
  g.set({ which: 'big' }, 2 ** 60);
  g.set({ which: 'negative zero' }, -0);
  new Gauge({
    name: 'collected',
    help: 'set at a scrape',
    registers: [r],
    collect() {
      this.set(7);
    },
  });
  const h = new Histogram({
    name: 'duration_seconds',
    help: 'a histogram',
    labelNames: ['app', 'mode'],
    buckets: [0.005, 0.1, 1, 2.5],
    registers: [r],
  });
  h.observe({ app: 'a', mode: 'sync' }, 0.05);
  h.observe({ app: 'a', mode: 'sync' }, 3);
  h.observe({ app: 'b', mode: 'async' }, 0.001);
  new Histogram({ name: 'unlabelled_seconds', help: 'h', buckets: [1], registers: [r] }).observe(0.5);
  const s = new Summary({
    name: 'sizes_bytes',
    help: 'a summary',
    labelNames: ['app'],
    percentiles: [0.5, 0.9],
    registers: [r],
  });
  for (const v of [1, 2, 3, 40]) s.observe({ app: 'a' }, v);
  return r;
}

describe('the /metrics text of JSON series', () => {
  it("is prom-client's own text of the same registry, every kind and escape", async () => {
    const r = everyKind();
    const text = await r.metrics();
    expect(text).toContain('calls_total{project="p",app="quote \\" back \\\\ new\\nline",status="503"} 1');
    expect(metricsText(await r.getMetricsAsJSON()).toString()).toBe(text);
    expect(String(await registryText(r).metrics())).toBe(text);
    expect(registryText(r).contentType).toBe(r.contentType);
  });

  it("is prom-client's text of the Node.js default metrics' JSON, and of a family another process sent", async () => {
    const r = new Registry();
    collectDefaultMetrics({ register: r });
    // Read once: the default metrics change from one read to the next.
    const json = await r.getMetricsAsJSON();
    expect(json.length).toBeGreaterThan(20);
    // And a family as another process may send it: a name to escape (no registry takes one), a metricName.
    json.push({
      name: 'sent\\by\nanother',
      help: 'h',
      type: 'gauge',
      aggregator: 'sum',
      values: [
        { labels: {}, value: 1 },
        { labels: { a: 1 }, value: 2, metricName: 'its_own' },
      ],
    } as unknown as (typeof json)[number]);
    // prom-client's writer over the same JSON (aggregate of one list: `omit` would drop the family).
    const kept = json.map((m) => ({ ...m, aggregator: 'first' as const }));
    expect(metricsText(json).toString()).toBe(await AggregatorRegistry.aggregate([kept]).metrics());
  });

  it('grows past its first guess, UTF-8 beyond Latin-1 included, and a smaller text after a larger one is whole', async () => {
    const big = new Registry();
    const g = new Gauge({ name: 'wide', help: 'the app’s “series”', labelNames: ['app'], registers: [big] });
    for (let i = 0; i < 3000; i++) g.set({ app: `app’${i}-${'é'.repeat(i % 7)}` }, i);
    const text = await big.metrics();
    expect(Buffer.byteLength(text)).toBeGreaterThan(100_000);
    expect(metricsText(await big.getMetricsAsJSON()).toString()).toBe(text);
    const small = everyKind();
    expect(metricsText(await small.getMetricsAsJSON()).toString()).toBe(await small.metrics());
  });

  it('escapes a newline with no backslash beside it, and a backslash with no newline, in help and label values', async () => {
    // (everyKind's strings have both: a writer escaping only when it sees the other would pass it.)
    const r = new Registry();
    const g = new Gauge({ name: 'escapes', help: 'two\nlines', labelNames: ['v'], registers: [r] });
    g.set({ v: 'a\nb' }, 1);
    g.set({ v: 'a\\b' }, 2);
    new Gauge({ name: 'escapes_back', help: 'back\\slash', registers: [r] }).set(3);
    const text = await r.metrics();
    expect(text).toContain('# HELP escapes two\\nlines\n');
    expect(text).toContain('escapes{v="a\\nb"} 1\n');
    expect(metricsText(await r.getMetricsAsJSON()).toString()).toBe(text);
  });

  it('makes room by bytes, not characters: a string of three-byte characters that fits only by its length', async () => {
    // The first guess is the last text's size plus 4 KiB: after an empty text, 2,000 ’ (6,000 bytes) fit
    // by their length alone; a buffer that grew past it must not have cut them.
    for (const n of [1_500, 2_000, 100_000]) {
      const r = new Registry();
      new Gauge({ name: 'long_help', help: '’'.repeat(n), registers: [r] }).set(1);
      const text = await r.metrics();
      metricsText([]);
      const written = metricsText(await r.getMetricsAsJSON());
      expect(written.length).toBe(Buffer.byteLength(text));
      expect(written.toString()).toBe(text);
    }
  });

  it('of no family is one newline, as an empty registry', async () => {
    expect(metricsText([]).toString()).toBe(await new Registry().metrics());
  });
});
