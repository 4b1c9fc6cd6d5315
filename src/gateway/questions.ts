/**
 * Questions the gateway's Node process asks another process of the pod — a gateway process its
 * primary supervises (processes.ts, over IPC), the native data plane (dataplane/supervise.ts, over
 * its control channel) — each answered within PROCESS_ANSWER_TIMEOUT_MS or given up, and the pod's
 * /metrics merged from what came back.
 *
 * A question has an id; an answer is matched to its question by that id only, so one that comes after
 * its question was given up (a stopped process resumed) is dropped and never answers a later one.
 */
import type { MetricValue, Registry } from 'prom-client';
import { type MetricJson, metricsText, type ValueJson } from '../shared/metrics-text.ts';

/** Bound on another process's answer to a readiness or metrics question (one scrape of /metrics waits this long at most). */
export const PROCESS_ANSWER_TIMEOUT_MS = 2_000;

/** A registry's series as `getMetricsAsJSON()` gives them (what crosses IPC or the control channel). */
export type MetricsJson = MetricJson[];

/** The timers a question's bound runs on (tests pass their own). */
export interface QuestionTimers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const realTimers: QuestionTimers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
};

export interface Questions<A, O> {
  /**
   * Sends a question (`send` writes it with the id given) to `owner` and resolves with its answer, or
   * with undefined after the bound, or when `owner` is forgotten first. `send` returning false means
   * the question could not be sent: undefined at once.
   */
  ask(owner: O, send: (id: number) => boolean): Promise<A | undefined>;
  /** An answer came: it resolves the question with that id, if it is still waiting (else dropped). */
  answer(id: number, answer: A): void;
  /** `owner` is gone (exited, its channel closed): its questions resolve with undefined now. */
  forget(owner: O): void;
}

export function createQuestions<A, O>(
  opts: { boundMs?: number; timers?: QuestionTimers } = {},
): Questions<A, O> {
  const boundMs = opts.boundMs ?? PROCESS_ANSWER_TIMEOUT_MS;
  const timers = opts.timers ?? realTimers;
  let nextId = 0;
  const pending = new Map<number, { owner: O; resolve: (a: A | undefined) => void }>();
  return {
    ask: (owner, send) =>
      new Promise((resolve) => {
        const id = nextId++;
        const timer = timers.setTimeout(() => {
          pending.delete(id);
          resolve(undefined);
        }, boundMs);
        pending.set(id, {
          owner,
          resolve: (a) => {
            timers.clearTimeout(timer);
            pending.delete(id);
            resolve(a);
          },
        });
        if (!send(id)) pending.get(id)?.resolve(undefined);
      }),
    answer: (id, a) => pending.get(id)?.resolve(a),
    forget(owner) {
      for (const p of [...pending.values()]) if (p.owner === owner) p.resolve(undefined);
    },
  };
}

/**
 * The pod's /metrics text (UTF-8): `own`'s series summed with every answer that came, as prom-client's
 * `AggregatorRegistry.aggregate([own, ...answers]).metrics()` writes them (each family by its aggregator);
 * an unanswered one is left out. A metric of `own` that no answer has is kept as it is, even one whose
 * aggregator is `omit` (prom-client's mark for what several processes cannot share, such as
 * `process_start_time_seconds`, which the native data plane does not report: without this, native mode's
 * /metrics would lose Node's own).
 *
 * Built as `aggregate` would, at a fraction of its allocations (`mergedFamilies`, then `metricsText`
 * rather than prom-client's writer): a scrape of the native pod allocated ~600 KiB before
 * (docs/benchmarks.md, "The /metrics scrape (issue 16, fourteenth round)").
 */
export async function mergedMetrics(
  own: Registry,
  answers: Array<Promise<MetricsJson | undefined>>,
): Promise<Buffer> {
  const others = (await Promise.all(answers)).filter((a): a is MetricsJson => a !== undefined);
  return metricsText(mergedFamilies(await own.getMetricsAsJSON(), others));
}

type Aggregator = MetricJson['aggregator'];
/** prom-client's aggregators (metricAggregators.js), each over the values of one series in the order met. */
const combine: Record<Exclude<Aggregator, 'omit'>, (values: number[]) => number> = {
  sum: (v) => v.reduce((p, c) => p + c, 0),
  first: (v) => v[0] as number,
  average: (v) => v.reduce((p, c) => p + c, 0) / v.length,
  min: (v) => v.reduce((p, c) => Math.min(p, c), Number.POSITIVE_INFINITY),
  max: (v) => v.reduce((p, c) => Math.max(p, c), Number.NEGATIVE_INFINITY),
};
/** A family's aggregator, refused with prom-client's message when it has no such aggregator. */
function aggregatorOf(m: MetricJson): Aggregator {
  const a: string = m.aggregator;
  if (a !== 'omit' && !Object.hasOwn(combine, a)) throw new Error(`'${a}' is not a defined aggregator.`);
  return a as Aggregator;
}

/**
 * The families `AggregatorRegistry.aggregate([mine, ...others])` would list, in its order (by name, in
 * the order first met), `mine`'s `omit` aside (above). A family only one list has is passed on as it is:
 * a registry's JSON names each series once, so prom-client's grouping by labels gives its values back
 * unchanged. Only a family several lists have is grouped (series by metric name and label set, values
 * combined by the first list's aggregator; `omit` leaves the family out).
 */
export function mergedFamilies(mine: MetricsJson, others: MetricsJson[]): MetricsJson {
  // The others' families by name, in the order first met (at most a few: the data plane's).
  const theirs = new Map<string, MetricJson[]>();
  for (const list of others)
    for (const m of list) {
      const had = theirs.get(m.name);
      if (had) had.push(m);
      else theirs.set(m.name, [m]);
    }
  const out: MetricsJson = [];
  const add = (family: MetricJson[]) => {
    const first = family[0] as MetricJson;
    const aggregator = aggregatorOf(first);
    if (aggregator === 'omit') return;
    out.push(family.length === 1 ? first : combined(family, aggregator));
  };
  for (const m of mine) {
    const same = theirs.get(m.name);
    if (!same) {
      aggregatorOf(m);
      out.push(m);
      continue;
    }
    theirs.delete(m.name);
    add([m, ...same]);
  }
  for (const family of theirs.values()) add(family);
  return out;
}

/** One family of several lists, as prom-client's AggregatorFactory combines it. */
function combined(family: MetricJson[], aggregator: Exclude<Aggregator, 'omit'>): MetricJson {
  const first = family[0] as MetricJson;
  // (Idle: most of the data plane's families have no series yet, nor have Node's.)
  if (family.every((m) => m.values.length === 0)) return { ...first, aggregator, values: [] };
  const series = new Map<string, { first: ValueJson; values: number[] }>();
  for (const m of family)
    for (const v of m.values as ValueJson[]) {
      const key = `${v.metricName}_${labelsKey(v.labels)}`;
      const s = series.get(key);
      if (s) s.values.push(v.value);
      else series.set(key, { first: v, values: [v.value] });
    }
  const values: ValueJson[] = [];
  for (const { first: v, values: vs } of series.values())
    values.push({
      value: combine[aggregator](vs),
      labels: v.labels,
      ...(v.metricName ? { metricName: v.metricName } : {}),
    });
  return { ...first, aggregator, values };
}

/** prom-client's hashObject: a label set's key, its names sorted, undefined values left out. */
function labelsKey(labels: MetricValue<string>['labels']): string {
  const names = Object.keys(labels);
  if (names.length > 1) names.sort();
  let key = '';
  for (const n of names) {
    const v = labels[n];
    if (v !== undefined) key += `${n}:${v},`;
  }
  return key;
}
