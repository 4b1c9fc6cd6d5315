/** The dashboard's bounds and display settings (env names and defaults in docs/dashboard.md). */
export interface DashboardSettings {
  /** Longest a sign-in lasts; a session also ends when its token expires, whichever comes first. */
  sessionMaxSeconds: number;
  /** Public URL of the run endpoint ({api_url}), for app URLs and curl lines; unknown when unset. */
  apiUrl: string | undefined;
  /** Largest form body accepted; larger → 413. */
  maxFormBytes: number;
  /** Runs shown per page (all apps merged, newest first). */
  runsPageSize: number;
  /** A run's result is shown up to this many bytes of formatted JSON. */
  maxResultBytes: number;
  /** How often a page with unfinished runs refreshes its run table. */
  refreshSeconds: number;
  /** Log lines an app page shows (and its live tail starts with); the tail keeps at most this many. */
  logTailLines: number;
  /** Longest a live tail runs before the page stops it (reload to follow again); also ends with its session. */
  logTailMaxMs: number;
  /** How often a live tail re-checks its session (a revoked or expired token ends the tail). */
  logTailSessionCheckMs: number;
}

export const DEFAULT_DASHBOARD_SETTINGS: DashboardSettings = {
  sessionMaxSeconds: 12 * 3600,
  apiUrl: undefined,
  maxFormBytes: 16 * 1024,
  runsPageSize: 50,
  maxResultBytes: 16 * 1024,
  refreshSeconds: 1,
  logTailLines: 200,
  logTailMaxMs: 15 * 60_000,
  logTailSessionCheckMs: 5_000,
};
