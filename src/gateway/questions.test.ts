import { AggregatorRegistry, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createQuestions, type MetricsJson, mergedMetrics, type QuestionTimers } from './questions.ts';

/** Timers fired by hand: `fire()` runs every timer set and not cleared. */
function manualTimers(): QuestionTimers & { fire(): void; pending(): number } {
  const timers = new Map<number, () => void>();
  let next = 0;
  return {
    setTimeout: (fn) => {
      timers.set(next, fn);
      return next++;
    },
    clearTimeout: (h) => timers.delete(h as number),
    fire: () => {
      for (const [h, fn] of [...timers]) {
        timers.delete(h);
        fn();
      }
    },
    pending: () => timers.size,
  };
}

describe('questions to another process', () => {
  it('an answer resolves its question by id, and clears its bound', async () => {
    const timers = manualTimers();
    const q = createQuestions<string, 'a'>({ timers });
    const sent: number[] = [];
    const asked = q.ask('a', (id) => sent.push(id) > 0);
    q.answer(sent[0] as number, 'yes');
    expect(await asked).toBe('yes');
    expect(timers.pending()).toBe(0);
  });

  it('unanswered within the bound: undefined; the late answer is dropped and never answers a later question', async () => {
    const timers = manualTimers();
    const q = createQuestions<string, 'a'>({ timers });
    const sent: number[] = [];
    const first = q.ask('a', (id) => sent.push(id) > 0);
    timers.fire();
    expect(await first).toBeUndefined();
    const second = q.ask('a', (id) => sent.push(id) > 0);
    q.answer(sent[0] as number, 'stale');
    q.answer(sent[1] as number, 'fresh');
    expect(await second).toBe('fresh');
  });

  it("a forgotten owner's questions resolve undefined at once, another owner's stay", async () => {
    const q = createQuestions<string, string>({ timers: manualTimers() });
    const sent: number[] = [];
    const a = q.ask('a', (id) => sent.push(id) > 0);
    const b = q.ask('b', (id) => sent.push(id) > 0);
    q.forget('a');
    expect(await a).toBeUndefined();
    q.answer(sent[1] as number, 'b');
    expect(await b).toBe('b');
  });

  it('a question that cannot be sent is undefined at once', async () => {
    const timers = manualTimers();
    const q = createQuestions<string, 'a'>({ timers });
    expect(await q.ask('a', () => false)).toBeUndefined();
    expect(timers.pending()).toBe(0);
  });

  it('is bounded by the real timer when none is passed', async () => {
    const q = createQuestions<string, 'a'>({ boundMs: 30 });
    const t0 = Date.now();
    expect(await q.ask('a', () => true)).toBeUndefined();
    expect(Date.now() - t0).toBeGreaterThanOrEqual(25);
  });
});

describe('the merged /metrics', () => {
  const requests = (r: Registry, n: number, status = '200') => {
    const c = new Counter({
      name: 'apphost_gateway_requests_total',
      help: 'h',
      labelNames: ['project', 'app', 'mode', 'status'],
      registers: [r],
    });
    c.inc({ project: 'p', app: 'a', mode: 'sync', status }, n);
  };

  it("sums the same series, keeps each side's own, and leaves an unanswered one out", async () => {
    const node = new Registry();
    requests(node, 1);
    new Gauge({ name: 'process_start_time_seconds', help: 's', aggregator: 'omit', registers: [node] }).set(
      1_700_000_000,
    );
    const dp = new Registry();
    requests(dp, 41);
    const other = new Registry();
    requests(other, 5, '503');
    const text = String(
      await mergedMetrics(node, [
        dp.getMetricsAsJSON(),
        Promise.resolve(undefined),
        other.getMetricsAsJSON() as Promise<MetricsJson>,
      ]),
    );
    expect(text).toContain('apphost_gateway_requests_total{project="p",app="a",mode="sync",status="200"} 42');
    expect(text).toContain('apphost_gateway_requests_total{project="p",app="a",mode="sync",status="503"} 5');
    // Only Node reports its start time: kept, though prom-client omits it when several do.
    expect(text).toContain('process_start_time_seconds 1700000000');
    // Unanswered everywhere: Node's text alone.
    expect(String(await mergedMetrics(node, [Promise.resolve(undefined)]))).toContain(
      'apphost_gateway_requests_total{project="p",app="a",mode="sync",status="200"} 1',
    );
  });

  /** What mergedMetrics wrote before session 34: prom-client's aggregate and writer, `omit` kept for Node alone. */
  const prometheusClients = async (own: Registry, others: MetricsJson[]) => {
    const named = new Set(others.flatMap((a) => a.map((m) => m.name)));
    const mine = (await own.getMetricsAsJSON()).map((m) =>
      m.aggregator === 'omit' && !named.has(m.name) ? { ...m, aggregator: 'first' as const } : m,
    );
    return AggregatorRegistry.aggregate([mine, ...others]).metrics();
  };

  it("writes what prom-client's aggregate writes: every aggregator, shared and one-sided families, label orders", async () => {
    const node = new Registry();
    requests(node, 1);
    (node.getSingleMetric('apphost_gateway_requests_total') as Counter).inc(
      { project: 'p', app: 'a', mode: 'sync', status: '503' },
      2,
    );
    const durations = (r: Registry, values: number[]) => {
      const h = new Histogram({
        name: 'apphost_gateway_request_duration_seconds',
        help: 'd',
        labelNames: ['project', 'app', 'mode'],
        buckets: [0.1, 1],
        registers: [r],
      });
      for (const v of values) h.observe({ project: 'p', app: 'a', mode: 'sync' }, v);
    };
    durations(node, [0.05, 2]);
    const gauge = (r: Registry, name: string, aggregator: MetricsJson[number]['aggregator'], v: number) =>
      new Gauge({ name, help: `${aggregator} \\ "h"`, aggregator, labelNames: ['k'], registers: [r] }).set(
        { k: 'v"1' },
        v,
      );
    for (const [name, aggregator] of [
      ['g_first', 'first'],
      ['g_min', 'min'],
      ['g_max', 'max'],
      ['g_average', 'average'],
      ['g_omit_both', 'omit'],
    ] as const)
      gauge(node, name, aggregator, 3);
    new Gauge({ name: 'process_start_time_seconds', help: 's', aggregator: 'omit', registers: [node] }).set(
      1,
    );
    new Counter({ name: 'node_only_empty_total', help: 'e', registers: [node] });
    new Counter({ name: 'both_empty_total', help: "Node's help", labelNames: ['x'], registers: [node] });

    const dp = new Registry();
    requests(dp, 40);
    durations(dp, [0.5]);
    for (const name of ['g_first', 'g_min', 'g_max', 'g_average', 'g_omit_both'] as const)
      gauge(dp, name, 'sum', 11);
    new Counter({
      name: 'dp_only_total',
      help: 'only the data plane',
      labelNames: ['r'],
      registers: [dp],
    }).inc({ r: 'x' }, 4);
    new Counter({
      name: 'both_empty_total',
      help: "the data plane's help",
      labelNames: ['x'],
      registers: [dp],
    });
    const dpJson = await dp.getMetricsAsJSON();
    // A third process: the same series with its labels in another order, a new series, a family of its own
    // shared with no one but the data plane, and one it alone has that says omit.
    // (As JSON crosses the channel: no collect function, `type` by its name.)
    const third = [
      {
        name: 'apphost_gateway_requests_total',
        help: 'other help',
        type: 'counter',
        aggregator: 'sum',
        values: [
          { labels: { status: '200', mode: 'sync', app: 'a', project: 'p' }, value: 100 },
          { labels: { project: 'p', app: 'b', mode: 'sync', status: '200' }, value: 7 },
        ],
      },
      {
        name: 'dp_only_total',
        help: 'x',
        type: 'counter',
        aggregator: 'max',
        values: [{ labels: { r: 'x' }, value: 1 }],
      },
      {
        name: 'third_omit',
        help: 'o',
        type: 'gauge',
        aggregator: 'omit',
        values: [{ labels: {}, value: 1 }],
      },
    ] as unknown as MetricsJson;
    const expected = await prometheusClients(node, [dpJson, third]);
    const text = String(
      await mergedMetrics(node, [
        Promise.resolve(dpJson),
        Promise.resolve(undefined),
        Promise.resolve(third),
      ]),
    );
    expect(text).toBe(expected);
    expect(text).toContain(
      'apphost_gateway_requests_total{project="p",app="a",mode="sync",status="200"} 141',
    );
    expect(text).toContain(
      'apphost_gateway_request_duration_seconds_bucket{le="1",project="p",app="a",mode="sync"} 2',
    );
    expect(text).toContain('g_average{k="v\\"1"} 7');
    expect(text).toContain('dp_only_total{r="x"} 5');
    expect(text).toContain('process_start_time_seconds 1');
    expect(text).toContain("# HELP both_empty_total Node's help\n# TYPE both_empty_total counter\n\n");
    expect(text).not.toContain('g_omit_both');
    expect(text).not.toContain('third_omit');
    // Node alone (nothing answered): its registry's own text.
    expect(String(await mergedMetrics(node, [Promise.resolve(undefined)]))).toBe(
      await prometheusClients(node, []),
    );
  });

  it("combines a series three sides report over all three, by the first side's aggregator", async () => {
    // Two sides cannot tell an average over the sides from one over two, nor the first from the last.
    const levels = (aggregator: MetricsJson[number]['aggregator'], values: number[]) =>
      values.map((v, i) => ({
        name: `g_${aggregator}`,
        help: 'h',
        type: 'gauge',
        aggregator: i === 0 ? aggregator : 'sum',
        values: [{ labels: { k: 'v' }, value: v }],
      }));
    const sides: MetricsJson[] = [[], [], []];
    for (const [aggregator, values] of [
      ['average', [3, 11, 1]],
      ['first', [3, 11, 1]],
      ['min', [3, 1, 11]],
      ['max', [3, 11, 1]],
      ['sum', [3, 11, 1]],
    ] as const)
      levels(aggregator, [...values]).forEach((m, i) => {
        (sides[i] as unknown[]).push(m);
      });
    const node = new Registry();
    const [, dp, third] = sides as [MetricsJson, MetricsJson, MetricsJson];
    // Node's own side as JSON (a registry cannot be built from JSON): its families through `mine`.
    node.getMetricsAsJSON = async () => sides[0] as MetricsJson;
    const text = String(await mergedMetrics(node, [Promise.resolve(dp), Promise.resolve(third)]));
    expect(text).toBe(await prometheusClients(node, [dp, third]));
    expect(text).toContain('g_average{k="v"} 5\n');
    expect(text).toContain('g_first{k="v"} 3\n');
    expect(text).toContain('g_min{k="v"} 1\n');
    expect(text).toContain('g_max{k="v"} 11\n');
    expect(text).toContain('g_sum{k="v"} 15\n');
  });

  it('refuses an aggregator prom-client does not have, as its aggregate did (a scrape answers 500)', async () => {
    const odd = (name: string): MetricsJson[number] =>
      ({
        name,
        help: 'h',
        type: 'gauge',
        aggregator: 'median',
        values: [],
      }) as unknown as MetricsJson[number];
    const node = new Registry();
    // Node's alone, and one several sides list whose first side names it.
    node.getMetricsAsJSON = async () => [odd('mine_only')];
    await expect(mergedMetrics(node, [])).rejects.toThrow("'median' is not a defined aggregator.");
    await expect(prometheusClients(node, [])).rejects.toThrow("'median' is not a defined aggregator.");
    node.getMetricsAsJSON = async () => [odd('shared')];
    const other = [{ ...odd('shared'), aggregator: 'sum' }] as MetricsJson;
    await expect(mergedMetrics(node, [Promise.resolve(other)])).rejects.toThrow(
      "'median' is not a defined aggregator.",
    );
    // And one only another side lists.
    await expect(mergedMetrics(new Registry(), [Promise.resolve([odd('theirs')])])).rejects.toThrow(
      "'median' is not a defined aggregator.",
    );
  });

  it('omits a series every side reports whose aggregator says so (several processes, processes.ts)', async () => {
    const regs = [new Registry(), new Registry()];
    for (const r of regs)
      new Gauge({ name: 'process_start_time_seconds', help: 's', aggregator: 'omit', registers: [r] }).set(1);
    const text = String(await mergedMetrics(regs[0] as Registry, [(regs[1] as Registry).getMetricsAsJSON()]));
    expect(text).not.toContain('process_start_time_seconds');
  });
});
