/** What the management API passes to mount the dashboard, beyond its own handler dependencies. */
import type { AppLiveness } from './context.ts';
import type { SessionStore } from './sessions.ts';
import { type DashboardSettings, DEFAULT_DASHBOARD_SETTINGS } from './settings.ts';

export interface DashboardMount {
  sessions: SessionStore;
  settings: DashboardSettings;
  /** The public {api_url}, when known. */
  apiUrl: () => string | undefined;
  liveness?: AppLiveness;
}

export function dashboardSettings(over: Partial<DashboardSettings> = {}): DashboardSettings {
  return { ...DEFAULT_DASHBOARD_SETTINGS, ...over };
}
