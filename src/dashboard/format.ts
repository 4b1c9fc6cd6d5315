/** How dates, durations and results read on the pages (pure; unit-tested). */

/** `2026-05-01 14:03:07 UTC`: unambiguous for every reader, whatever their time zone. */
export function formatTime(iso: string | undefined): string {
  if (!iso) return '—';
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return iso;
  return `${new Date(t).toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

export function formatDate(iso: string): string {
  const t = Date.parse(iso);
  return Number.isNaN(t) ? iso : new Date(t).toISOString().slice(0, 10);
}

export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${Math.round(s % 60)} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

export interface ShownResult {
  text: string;
  truncated: boolean;
  shownBytes: number;
}

/** JSON pretty-printed (other text as is), cut at `maxBytes` on a character boundary. */
export function formatResult(body: string, maxBytes: number): ShownResult {
  let text = body;
  try {
    text = JSON.stringify(JSON.parse(body), null, 2);
  } catch {
    // not JSON: shown as sent
  }
  return boundText(text, maxBytes);
}

/** `text` cut at `maxBytes` of UTF-8 on a character boundary (then ending in `…`). */
export function boundText(text: string, maxBytes: number): ShownResult {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= maxBytes) return { text, truncated: false, shownBytes: bytes.length };
  // Drop a partial multi-byte character at the cut.
  const cut = bytes
    .subarray(0, maxBytes)
    .toString('utf8')
    .replace(/\uFFFD$/, '');
  return { text: `${cut}\n…`, truncated: true, shownBytes: Buffer.byteLength(cut) };
}

/** `512 B`, `1.5 KiB`, `3.2 MiB`. */
export function formatBytes(n: number): string {
  if (!Number.isFinite(n) || n < 0) return '—';
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(n < 10 * 1024 ? 1 : 0)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

/** A log line as the app page shows it: `HH:MM:SS replica message` (UTC). */
export function formatLogLine(l: { time?: string; replica: string; message: string }): string {
  const ms = l.time ? Date.parse(l.time) : Number.NaN;
  const t = Number.isNaN(ms) ? '--:--:--' : new Date(ms).toISOString().slice(11, 19);
  return `${t} ${l.replica} ${l.message}`;
}

/** The next UTC day as YYYY-MM-DD: the earliest expiry a date field offers. */
export function tomorrow(now: number): string {
  return new Date(now + 86_400_000).toISOString().slice(0, 10);
}
