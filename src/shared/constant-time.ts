/**
 * Whether two strings are equal, in a time that depends on their length and not on where they first
 * differ: for a secret held in memory (a bearer token) compared against what a caller sent. Unlike
 * `crypto.timingSafeEqual` it needs no Buffer per comparison, which matters on a per-call path. The
 * length is not hidden: the strings compared here have public, fixed-format lengths.
 */
export function sameStringInConstantTime(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}
