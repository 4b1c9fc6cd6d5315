/**
 * A Prometheus histogram whose series are handles: `series(labels)` once per label set, then
 * `observe(value)` per event, with no label set built, validated and hashed per event as
 * prom-client's Histogram does on every `observe` (~1.5% of the gateway's CPU on sync calls,
 * docs/benchmarks.md). It is read like prom-client's Histogram — the same text exposition and the same
 * JSON (`get()`), so a registry, and the processes' AggregatorRegistry, treat it as one.
 */
import type { Metric, Registry } from 'prom-client';

export interface HistogramSeries {
  observe(value: number): void;
}

class Series implements HistogramSeries {
  readonly labels: Readonly<Record<string, string>>;
  readonly #bounds: readonly number[];
  /** Observations per bucket (not cumulative); the +Inf bucket is `count`. */
  readonly buckets: Float64Array;
  sum = 0;
  count = 0;

  constructor(labels: Readonly<Record<string, string>>, bounds: readonly number[]) {
    this.labels = labels;
    this.#bounds = bounds;
    this.buckets = new Float64Array(bounds.length);
  }

  observe(value: number): void {
    if (!Number.isFinite(value)) throw new TypeError(`Value is not a valid number: ${value}`);
    const bounds = this.#bounds;
    for (let i = 0; i < bounds.length; i++) {
      if (value <= (bounds[i] as number)) {
        (this.buckets[i] as number)++;
        break;
      }
    }
    this.sum += value;
    this.count++;
  }
}

interface ExportedValue {
  labels: Record<string, string | number>;
  value: number;
  metricName: string;
}

export class SeriesHistogram<L extends string> {
  readonly name: string;
  readonly help: string;
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly #labelNames: readonly L[];
  readonly #bounds: readonly number[];
  readonly #series = new Map<string, Series>();

  constructor(cfg: {
    name: string;
    help: string;
    labelNames: readonly L[];
    buckets: readonly number[];
    registers: Registry[];
  }) {
    this.name = cfg.name;
    this.help = cfg.help;
    this.#labelNames = cfg.labelNames;
    this.#bounds = [...cfg.buckets].sort((a, b) => a - b);
    for (const r of cfg.registers) r.registerMetric(this as unknown as Metric);
  }

  /** The series of one label set (every label named); keep it and observe through it. */
  series(labels: Readonly<Record<L, string>>): HistogramSeries {
    const key = this.#labelNames.map((n) => labels[n]).join('\u0000');
    let s = this.#series.get(key);
    if (!s) {
      const own: Record<string, string> = {};
      for (const n of this.#labelNames) own[n] = String(labels[n]);
      s = new Series(own, this.#bounds);
      this.#series.set(key, s);
    }
    return s;
  }

  /** As prom-client's Histogram.get(): per series its cumulative buckets, +Inf, sum and count. */
  async get(): Promise<{
    name: string;
    help: string;
    type: 'histogram';
    aggregator: 'sum';
    values: ExportedValue[];
  }> {
    const values: ExportedValue[] = [];
    const bucket = `${this.name}_bucket`;
    for (const s of this.#series.values()) {
      let acc = 0;
      this.#bounds.forEach((le, i) => {
        acc += s.buckets[i] as number;
        values.push({ labels: { le, ...s.labels }, value: acc, metricName: bucket });
      });
      values.push({ labels: { le: '+Inf', ...s.labels }, value: s.count, metricName: bucket });
      values.push({ labels: { ...s.labels }, value: s.sum, metricName: `${this.name}_sum` });
      values.push({ labels: { ...s.labels }, value: s.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  /** Zeroes every series (a handle stays valid). */
  reset(): void {
    for (const s of this.#series.values()) {
      s.buckets.fill(0);
      s.sum = 0;
      s.count = 0;
    }
  }
}
