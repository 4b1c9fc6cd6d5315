/**
 * Watches the apps folder and reports which app changed, debounced per app, so an editor's burst of
 * writes restarts that app's runtime once. Bytecode caches and dotfiles are not changes.
 */
import { type FSWatcher, watch } from 'node:fs';
import { sep } from 'node:path';

export interface AppsWatcher {
  close(): void;
}

export interface WatchSettings {
  /** Quiet time after the last event before the change is reported. */
  debounceMs: number;
}

export const DEFAULT_WATCH_SETTINGS: WatchSettings = { debounceMs: 300 };

/** The app a changed path (relative to the apps folder) belongs to, or undefined when it does not count. */
export function appOfChange(relativePath: string): string | undefined {
  const parts = relativePath.split(/[\\/]/).filter(Boolean);
  if (parts.length < 2) return undefined; // a file directly in the apps folder (domains.yaml) or the folder itself
  if (parts.some((p) => p === '__pycache__' || p.startsWith('.') || p.endsWith('~'))) return undefined;
  const last = parts[parts.length - 1] ?? '';
  if (/\.(pyc|pyo|swp|swx|tmp)$/.test(last)) return undefined;
  return parts[0];
}

export function watchApps(
  appsDir: string,
  onChange: (app: string) => void,
  settings: WatchSettings = DEFAULT_WATCH_SETTINGS,
  onError: (err: Error) => void = () => {},
): AppsWatcher {
  const timers = new Map<string, NodeJS.Timeout>();
  let watcher: FSWatcher | undefined;
  try {
    watcher = watch(appsDir, { recursive: true, persistent: false }, (_event, filename) => {
      if (!filename) return;
      const app = appOfChange(filename.toString().split(sep).join('/'));
      if (!app) return;
      clearTimeout(timers.get(app));
      timers.set(
        app,
        setTimeout(() => {
          timers.delete(app);
          onChange(app);
        }, settings.debounceMs),
      );
    });
    watcher.on('error', onError);
  } catch (err) {
    onError(err as Error);
  }
  return {
    close() {
      watcher?.close();
      for (const t of timers.values()) clearTimeout(t);
      timers.clear();
    },
  };
}
