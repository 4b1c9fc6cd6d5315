/**
 * Decides whether an object needs a server-side apply: a desired object is "in place" when the live
 * object carries every field we set with the same value (the server adds defaults, so a subset test)
 * and the hash of our last applied intent, so a field we stop setting is also noticed.
 */
import { createHash } from 'node:crypto';
import type { ObjectWithMeta } from '../../shared/kube/objects.ts';

/** Annotation holding the hash of what we last applied. */
export const APPLIED_HASH_ANNOTATION = 'apphost.dev/applied-hash';

/** Canonical JSON (sorted keys) so hashes do not depend on key order. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

export function intentHash(obj: unknown): string {
  return createHash('sha256').update(canonicalJson(obj)).digest('hex').slice(0, 16);
}

/** Stamps the intent hash (computed without the annotation itself) onto a desired object. */
export function withIntentHash<T extends ObjectWithMeta>(obj: T): T {
  const hash = intentHash(obj);
  return {
    ...obj,
    metadata: {
      ...obj.metadata,
      annotations: { ...(obj.metadata.annotations ?? {}), [APPLIED_HASH_ANNOTATION]: hash },
    },
  };
}

const QUANTITY = /^([+-]?\d+(?:\.\d+)?)(?:(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)|[eE]([+-]?\d+))?$/;
const SUFFIX: Record<string, number> = {
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

/** A resource quantity ("500m", "0.5", "1Gi") as a number, or undefined when it is not one. */
export function parseQuantity(q: string): number | undefined {
  const m = QUANTITY.exec(q);
  if (!m) return undefined;
  const base = Number(m[1]);
  if (m[2]) return base * (SUFFIX[m[2]] ?? 1);
  if (m[3]) return base * 10 ** Number(m[3]);
  return base;
}

/**
 * True when `actual` holds every field of `desired` with an equal value. Arrays must match in length
 * and element by element; quantities under `requests`/`limits` compare by value (the server
 * canonicalises "0.5" to "500m").
 */
const isQuantityMap = (key: string) => key === 'requests' || key === 'limits';

export function isSubset(desired: unknown, actual: unknown, quantity = false): boolean {
  if (desired === undefined) return true;
  if (Array.isArray(desired)) {
    if (!Array.isArray(actual) || actual.length !== desired.length) return false;
    return desired.every((d, i) => isSubset(d, actual[i]));
  }
  if (desired !== null && typeof desired === 'object') {
    if (actual === null || typeof actual !== 'object' || Array.isArray(actual)) return false;
    const a = actual as Record<string, unknown>;
    return Object.entries(desired as Record<string, unknown>).every(([k, v]) =>
      isSubset(v, a[k], quantity || isQuantityMap(k)),
    );
  }
  if (desired === actual) return true;
  if (quantity && typeof desired === 'string') {
    const d = parseQuantity(desired);
    const a =
      typeof actual === 'string' ? parseQuantity(actual) : typeof actual === 'number' ? actual : undefined;
    return d !== undefined && a !== undefined && Math.abs(d - a) <= Math.abs(d) * 1e-9;
  }
  return false;
}

/** Whether `live` already is what `desired` (stamped with withIntentHash) asks for. */
export function isInPlace(desired: ObjectWithMeta, live: ObjectWithMeta | undefined): boolean {
  if (!live) return false;
  const want = desired.metadata.annotations?.[APPLIED_HASH_ANNOTATION];
  if (want && live.metadata.annotations?.[APPLIED_HASH_ANNOTATION] !== want) return false;
  const { apiVersion: _a, kind: _k, ...rest } = desired;
  return isSubset(rest, live);
}

/** The first path where `live` differs from `desired` (for logs and debugging), or undefined. */
export function firstDifference(
  desired: unknown,
  actual: unknown,
  path = '',
  quantity = false,
): string | undefined {
  if (isSubset(desired, actual, quantity)) return undefined;
  if (Array.isArray(desired) && Array.isArray(actual) && actual.length === desired.length) {
    for (let i = 0; i < desired.length; i++) {
      const d = firstDifference(desired[i], actual[i], `${path}[${i}]`);
      if (d) return d;
    }
  }
  if (
    desired &&
    typeof desired === 'object' &&
    !Array.isArray(desired) &&
    actual &&
    typeof actual === 'object'
  ) {
    for (const [k, v] of Object.entries(desired as Record<string, unknown>)) {
      const d = firstDifference(
        v,
        (actual as Record<string, unknown>)[k],
        `${path}.${k}`,
        quantity || isQuantityMap(k),
      );
      if (d) return d;
    }
  }
  return path || '.';
}
