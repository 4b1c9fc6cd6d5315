/**
 * The Prometheus text of series in prom-client's JSON form (`getMetricsAsJSON()`, or what another process
 * sent in that form), byte for byte as prom-client's `Registry.metrics()` writes it for the Prometheus
 * content type: each family's `# HELP` (name and help escaped), `# TYPE` and value lines, families apart by
 * a blank line, one newline at the end. Written as UTF-8 into one buffer, a line at a time, with no array,
 * label object or regular expression per line: prom-client's writer allocates ~20 times the text it writes
 * (docs/benchmarks.md, "The /metrics scrape (issue 16, fourteenth round)").
 *
 * `registry.metrics()` and `metricsText(await registry.getMetricsAsJSON())` are the same text for a
 * registry without default labels (prom-client puts them after a histogram's `le` in its JSON, before it
 * in its text) and without exemplars (the Prometheus format has none): metrics-text.test.ts holds that.
 */
import type { MetricObjectWithValues, MetricValue, Registry } from 'prom-client';
import type { MetricsSource } from './ops.ts';

/** One family as `getMetricsAsJSON()` gives it (`type` is the type's name, prom-client's enum aside). */
export type MetricJson = MetricObjectWithValues<MetricValue<string>>;
/** One series: a histogram's bucket, sum and count lines carry their own `metricName`. */
export type ValueJson = MetricValue<string> & { metricName?: string };

/** prom-client's escapeString: backslashes and newlines (names, help texts, label values). */
const escapeText = (s: string): string =>
  s.includes('\\') || s.includes('\n') ? s.replace(/\\/g, '\\\\').replace(/\n/g, '\\n') : s;

/** prom-client's escapeLabelValue: a string escaped, quotes too; a number as it is. */
const labelValue = (v: string | number | undefined): string => {
  if (typeof v !== 'string') return `${v}`;
  const e = escapeText(v);
  return e.includes('"') ? e.replace(/"/g, '\\"') : e;
};

/** prom-client's getValueAsString. */
const valueText = (v: number): string => {
  if (Number.isNaN(v)) return 'Nan';
  if (!Number.isFinite(v)) return v < 0 ? '-Inf' : '+Inf';
  return `${v}`;
};

/** The size of the last text written: the next one's first guess (the families rarely change). */
let lastSize = 16 * 1024;

/**
 * Bytes written one string at a time, each as UTF-8 straight into the buffer: the whole text is never
 * joined (a help text with a character beyond Latin-1, such as metrics.ts's ’, would make a joined text
 * two bytes a character, copied whole again to be sent).
 */
class Out {
  buf = Buffer.allocUnsafe(lastSize + 4096);
  at = 0;
  put(s: string): void {
    // UTF-8 takes at most 3 bytes per UTF-16 unit.
    if (this.at + s.length * 3 > this.buf.length) {
      const bigger = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.at + s.length * 3));
      this.buf.copy(bigger, 0, 0, this.at);
      this.buf = bigger;
    }
    this.at += this.buf.write(s, this.at);
  }
}

function putFamily(out: Out, m: MetricJson): void {
  const name = escapeText(m.name);
  out.put(`# HELP ${name} ${escapeText(m.help)}\n# TYPE ${name} ${m.type as unknown as string}`);
  // One string per line, not one put per token: a put per token ran thousands of times a scrape, and
  // after ~7 scrapes V8's optimizing compiler took it, paging ~5 MiB of node's compiler code into an
  // idle pod (docs/benchmarks.md, "The start-up heap given back").
  for (const v of (m.values as ValueJson[] | undefined) ?? []) {
    // As prom-client's defaults (`metricName = name, labels = {}`): for undefined only.
    let line = `\n${v.metricName === undefined ? name : `${v.metricName}`}`;
    let sep = '{';
    const labels = v.labels === undefined ? {} : v.labels;
    for (const k in labels) {
      if (!Object.hasOwn(labels, k)) continue;
      line += `${sep}${k}="${labelValue(labels[k])}"`;
      sep = ',';
    }
    if (sep === ',') line += '}';
    out.put(`${line} ${valueText(v.value)}`);
  }
}

/** The text of `families`, in their order, as UTF-8. */
export function metricsText(families: Iterable<MetricJson>): Buffer {
  const out = new Out();
  let first = true;
  for (const m of families) {
    if (!first) out.put('\n\n');
    first = false;
    putFamily(out, m);
  }
  out.put('\n');
  lastSize = out.at;
  return out.buf.subarray(0, out.at);
}

/** A registry (one without default labels) as the ops server's /metrics source, written by `metricsText`. */
export function registryText(registry: Registry): MetricsSource {
  return {
    contentType: registry.contentType,
    metrics: async () => metricsText(await registry.getMetricsAsJSON()),
  };
}
