/** Pure helpers shared by the log sources: request ids in runtime lines, kubelet timestamps, tails. */
import type { LogLine } from './types.ts';

const REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;

/** The runtime writes one JSON object per line; a `request_id` member tags the line with its call. */
export function requestIdOf(message: string): string | undefined {
  if (!message.startsWith('{') || !message.includes('request_id')) return undefined;
  try {
    const v = (JSON.parse(message) as { request_id?: unknown }).request_id;
    return typeof v === 'string' && REQUEST_ID.test(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

/** A line as the kubelet returns it with `timestamps=true`: `<RFC 3339 nano> <message>`. */
export function parseKubeletLine(raw: string, replica: string): LogLine {
  const space = raw.indexOf(' ');
  const stamp = space > 0 ? raw.slice(0, space) : '';
  const at = Date.parse(stamp);
  const message = Number.isNaN(at) ? raw : raw.slice(space + 1);
  const requestId = requestIdOf(message);
  return {
    ...(Number.isNaN(at) ? {} : { time: new Date(at).toISOString() }),
    replica,
    message,
    ...(requestId ? { requestId } : {}),
  };
}

/** Lines of several replicas in time order (lines without a time keep their place after timed ones). */
export function mergeByTime(groups: LogLine[][]): LogLine[] {
  return groups
    .flat()
    .map((l, i) => ({ l, i, t: l.time ? Date.parse(l.time) : Number.POSITIVE_INFINITY }))
    .sort((a, b) => a.t - b.t || a.i - b.i)
    .map((x) => x.l);
}

/** `--since` as the API takes it: a duration (30s, 10m, 2h, 1d) before `now`, or an RFC 3339 time. */
export function parseSince(raw: string, now: number): number | undefined {
  const m = /^(\d+)([smhd])$/.exec(raw);
  if (m)
    return (
      now - Number(m[1]) * { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2] as 's' | 'm' | 'h' | 'd']
    );
  if (!/^\d{4}-\d{2}-\d{2}T/.test(raw)) return undefined;
  const t = Date.parse(raw);
  return Number.isNaN(t) ? undefined : t;
}
