/**
 * An app's log lines, whatever produced them: pods in a cluster (logs/kube.ts), app processes in local
 * mode (local/app-logs.ts). The management API's logs route reads through this seam.
 */

export interface LogLine {
  /** RFC 3339 time the line was written, when known. */
  time?: string;
  /** Which replica wrote it: the pod name in a cluster, `local-<pid>` in local mode. */
  replica: string;
  stream?: 'stdout' | 'stderr';
  message: string;
  /** The request id the runtime tagged the line with (its JSON `request_id`), when it did. */
  requestId?: string;
}

export interface LogQuery {
  /** Only lines written at or after this time (ms since the epoch). */
  sinceMs?: number;
  /** Only the last N lines of each replica. */
  tail?: number;
}

export interface LogSource {
  /** The lines there are now, oldest first; bounded by `maxLines` (the newest kept). */
  read(projectId: string, appName: string, query: LogQuery, maxLines: number): Promise<LogLine[]>;
  /**
   * The lines there are now (as `read`), then new ones as they are written, until `signal` aborts.
   * Never buffers without bound: a consumer that stops pulling stops the producers.
   */
  follow(projectId: string, appName: string, query: LogQuery, signal: AbortSignal): AsyncIterable<LogLine>;
}
