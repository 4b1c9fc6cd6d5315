/** Human output (aligned columns, key: value blocks) and JSON output for scripts. */

/** Columns padded to their widest cell; `-` for an empty cell. */
export function table(
  header: readonly string[],
  rows: ReadonlyArray<ReadonlyArray<string | number | undefined>>,
): string {
  const cells = [header, ...rows.map((r) => r.map((c) => (c === undefined || c === '' ? '-' : String(c))))];
  const widths = header.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  return cells
    .map((r) =>
      r
        .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** `key: value` lines, keys aligned; undefined values are left out. */
export function fields(entries: ReadonlyArray<[string, string | number | boolean | undefined]>): string {
  const shown = entries.filter(([, v]) => v !== undefined && v !== '');
  const width = Math.max(0, ...shown.map(([k]) => k.length)) + 1;
  return shown.map(([k, v]) => `${`${k}:`.padEnd(width + 1)}${String(v)}`).join('\n');
}

export function json(value: unknown): string {
  return JSON.stringify(value, null, 2);
}

/** "3s ago" style age of an ISO time relative to `now`. */
export function age(iso: string | undefined, now: number): string | undefined {
  if (!iso) return undefined;
  const s = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  if (s < 120) return `${s}s ago`;
  if (s < 7200) return `${Math.round(s / 60)}m ago`;
  if (s < 172_800) return `${Math.round(s / 3600)}h ago`;
  return `${Math.round(s / 86_400)}d ago`;
}
