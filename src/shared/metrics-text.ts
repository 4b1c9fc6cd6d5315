/**
 * The Prometheus text of series in prom-client's JSON form (`getMetricsAsJSON()`, or what another process
 * sent in that form), byte for byte as prom-client's `Registry.metrics()` writes it for the Prometheus
 * content type: each family's `# HELP` (name and help escaped), `# TYPE` and value lines, families apart by
 * a blank line, one newline at the end. Written into one string, with no array, label object or regular
 * expression per line: prom-client's writer allocates ~20 times the text it writes (the pod's /metrics
 * scrape, docs/benchmarks.md "The /metrics scrape (issue 16, fourteenth round)").
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
type ValueJson = MetricValue<string> & { metricName?: string };

/** prom-client's escapeString: backslashes and newlines (names, help texts, label values). */
const escapeText = (s: string): string =>
  s.includes('\\') || s.includes('\n') ? s.replace(/\\/g, '\\\\').replace(/\n/g, '\\n') : s;

/** prom-client's escapeLabelValue: a string escaped, quotes too; a number as it is. */
const labelValue = (v: string | number | undefined): string | number | undefined => {
  if (typeof v !== 'string') return v;
  const e = escapeText(v);
  return e.includes('"') ? e.replace(/"/g, '\\"') : e;
};

/** prom-client's getValueAsString. */
const valueText = (v: number): string => {
  if (Number.isNaN(v)) return 'Nan';
  if (!Number.isFinite(v)) return v < 0 ? '-Inf' : '+Inf';
  return `${v}`;
};

/** `out` with one family's lines appended (no newline after its last line). */
function appendFamily(out: string, m: MetricJson): string {
  const name = escapeText(m.name);
  out += `# HELP ${name} ${escapeText(m.help)}\n# TYPE ${name} ${m.type as unknown as string}`;
  for (const v of (m.values as ValueJson[] | undefined) ?? []) {
    // As prom-client's defaults (`metricName = name, labels = {}`): for undefined only.
    out += `\n${v.metricName === undefined ? name : v.metricName}`;
    let sep = '{';
    const labels = v.labels === undefined ? {} : v.labels;
    for (const k in labels) {
      if (!Object.hasOwn(labels, k)) continue;
      out += `${sep}${k}="${labelValue(labels[k])}"`;
      sep = ',';
    }
    if (sep === ',') out += '}';
    out += ` ${valueText(v.value)}`;
  }
  return out;
}

/** The text of `families`, in their order. */
export function metricsText(families: Iterable<MetricJson>): string {
  let out = '';
  let first = true;
  for (const m of families) {
    if (!first) out += '\n\n';
    first = false;
    out = appendFamily(out, m);
  }
  return `${out}\n`;
}

/** A registry (one without default labels) as the ops server's /metrics source, written by `metricsText`. */
export function registryText(registry: Registry): MetricsSource {
  return {
    contentType: registry.contentType,
    metrics: async () => metricsText(await registry.getMetricsAsJSON()),
  };
}
