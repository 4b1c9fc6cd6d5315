/**
 * The run-token key set from a JSON file, re-read on an interval (`apphost dev`, tests, the benchmarks).
 * Its own module so a gateway reading keys from a file does not load the Kubernetes client
 * (run-token-keys.ts watches the Secret in a cluster).
 */
import { readFileSync } from 'node:fs';
import type { Logger } from '../shared/log.ts';
import { type KeySet, parseKeySet } from '../shared/run-tokens.ts';

export interface KeySetSource {
  /** The key set, once there is one. */
  current(): KeySet | undefined;
  stop(): Promise<void>;
}

/** How often a gateway without its key set looks at the file again. */
export const RUN_TOKEN_KEYS_WAIT_POLL_MS = 1_000;

/** Reads `path` now, every second until it holds a key set, then every `reloadMs`. */
export function watchKeySetFile(opts: { path: string; reloadMs: number; log: Logger }): KeySetSource {
  const { path, log } = opts;
  let keys: KeySet | undefined;
  const load = (quiet: boolean) => {
    try {
      keys = parseKeySet(readFileSync(path, 'utf8'), path);
    } catch (err) {
      if (keys) log.warn({ err }, 'could not reload the run-token key set; keeping the previous one');
      else if (!quiet) log.info({ file: path }, 'waiting for the run-token key set');
    }
  };
  load(false);
  const reload = setInterval(() => load(true), opts.reloadMs);
  reload.unref();
  const first = setInterval(() => {
    if (!keys) load(true);
    if (keys) clearInterval(first);
  }, RUN_TOKEN_KEYS_WAIT_POLL_MS);
  first.unref();
  return {
    current: () => keys,
    async stop() {
      clearInterval(reload);
      clearInterval(first);
    },
  };
}
