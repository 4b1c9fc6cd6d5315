/** Upload progress: a bar on a terminal (rewriting one line), a few plain lines otherwise. */

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

/** `[##########..........]  50%  1.0/2.0 MiB` */
export function progressBar(done: number, total: number, width = 30): string {
  const ratio = total > 0 ? Math.min(1, done / total) : 1;
  const filled = Math.round(ratio * width);
  const pct = `${Math.floor(ratio * 100)}%`.padStart(4);
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${pct}  ${formatBytes(done)}/${formatBytes(total)}`;
}

export interface Progress {
  advance(bytes: number): void;
  done(): void;
}

/**
 * Reports `total` bytes going out: `status` (a terminal) gets the bar at every step; without one, `line`
 * gets the start and the end only, so a CI log is not flooded.
 */
export function createProgress(
  label: string,
  total: number,
  out: { line: (text: string) => void; status?: ((text: string) => void) | undefined },
): Progress {
  let sent = 0;
  let finished = false;
  if (!out.status) out.line(`${label}: ${formatBytes(total)}…`);
  return {
    advance(bytes) {
      sent += bytes;
      out.status?.(`${label} ${progressBar(sent, total)}`);
    },
    done() {
      if (finished) return;
      finished = true;
      if (out.status) {
        out.status(`${label} ${progressBar(total, total)}`);
        out.status('');
      }
      out.line(`${label}: ${formatBytes(total)} sent`);
    },
  };
}

/** A stream of `data` in chunks that reports each chunk as it is taken (by fetch, as it sends). */
export function progressStream(
  data: Uint8Array,
  progress: Progress,
  chunkBytes = 64 * 1024,
): ReadableStream<Uint8Array> {
  let offset = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (offset >= data.length) {
        progress.done();
        controller.close();
        return;
      }
      const chunk = data.subarray(offset, offset + chunkBytes);
      offset += chunk.length;
      progress.advance(chunk.length);
      controller.enqueue(chunk);
    },
  });
}
