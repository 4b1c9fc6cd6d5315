/**
 * Local-mode store: everything in memory, run-token keys in a generated JSON file (mode 0600) so
 * the local gateway can read the same keys. Projects and apps are registered by local mode.
 */
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { AppSpec } from '../../apis/v1alpha1/types.ts';
import { ApiError, ErrorCode } from '../../shared/errors.ts';
import { generateSigningKey, type KeySet, rotate } from '../../shared/run-tokens.ts';
import type {
  AppRecord,
  Domain,
  ManagementStore,
  ReadySummary,
  ServiceAccount,
  StoredServiceAccount,
} from './types.ts';

export interface MemoryStore extends ManagementStore {
  addProject(projectId: string): void;
  /** Adds or replaces an app (its spec defaults to the cortex runtime). */
  addApp(projectId: string, appName: string, spec?: AppSpec): void;
  removeApp(projectId: string, appName: string): void;
  removeProject(projectId: string): void;
  /**
   * The hostnames of `projectId` assigned to an app (hostname → app), now and again after each change
   * of its domains (created, assigned, moved, unassigned, deleted; the project removed: empty), until
   * the returned function is called. Called synchronously, within the change.
   */
  watchAssignedDomains(
    projectId: string,
    onTable: (assigned: ReadonlyMap<string, string>) => void,
  ): () => void;
}

interface Project {
  apps: Map<string, AppRecord>;
  domains: Map<string, Domain>;
  accounts: Map<string, StoredServiceAccount>;
}

export function createMemoryStore(
  opts: {
    /** Where the run-token KeySet lives; without it keys are kept in memory only. */
    keysFile?: string;
    now?: () => Date;
    projects?: Record<string, string[]>;
  } = {},
): MemoryStore {
  const now = opts.now ?? (() => new Date());
  const projects = new Map<string, Project>();
  let keys: KeySet | undefined;

  const project = (id: string): Project | undefined => projects.get(id);
  const mustProject = (id: string): Project => {
    const p = projects.get(id);
    if (!p) throw new ApiError(ErrorCode.NotFound, `project ${id} not found`);
    return p;
  };
  const domainWatchers = new Set<{ projectId: string; onTable: (t: ReadonlyMap<string, string>) => void }>();
  const assignedDomains = (projectId: string): Map<string, string> => {
    const table = new Map<string, string>();
    for (const d of project(projectId)?.domains.values() ?? [])
      if (d.appName) table.set(d.hostname, d.appName);
    return table;
  };
  const domainsChanged = (projectId: string) => {
    for (const w of domainWatchers) if (w.projectId === projectId) w.onTable(assignedDomains(projectId));
  };
  const publicAccount = ({ secretHash: _h, ...a }: StoredServiceAccount): ServiceAccount => ({ ...a });
  // No operator in local mode: the local resolver routes an assigned hostname at once.
  const withStatus = (d: Domain): Domain => {
    const status: ReadySummary = d.appName
      ? { status: 'True', reason: 'Routed', message: `routes to app ${d.appName}` }
      : { status: 'False', reason: 'Unassigned', message: 'not assigned to an app' };
    return { ...d, status };
  };

  async function loadKeys(): Promise<KeySet> {
    if (keys) return keys;
    if (opts.keysFile) {
      try {
        keys = JSON.parse(await readFile(opts.keysFile, 'utf8')) as KeySet;
        if (keys.keys.length > 0) return keys;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      }
    }
    return saveKeys({ keys: [await generateSigningKey(now())] });
  }

  async function saveKeys(set: KeySet): Promise<KeySet> {
    if (opts.keysFile) {
      await mkdir(dirname(opts.keysFile), { recursive: true });
      // Write-then-rename so a reader never sees a half-written file.
      const tmp = `${opts.keysFile}.${process.pid}.tmp`;
      await writeFile(tmp, `${JSON.stringify(set, null, 2)}\n`, { mode: 0o600 });
      await rename(tmp, opts.keysFile);
    }
    keys = set;
    return set;
  }

  const store: MemoryStore = {
    addProject(projectId) {
      if (!projects.has(projectId))
        projects.set(projectId, { apps: new Map(), domains: new Map(), accounts: new Map() });
    },
    addApp(projectId, appName, spec = { runtime: 'cortex' }) {
      store.addProject(projectId);
      const p = projects.get(projectId);
      if (!p) return;
      p.apps.set(appName, {
        name: appName,
        spec: structuredClone(spec),
        createdAt: p.apps.get(appName)?.createdAt ?? now().toISOString(),
      });
    },
    removeApp(projectId, appName) {
      projects.get(projectId)?.apps.delete(appName);
    },
    removeProject(projectId) {
      projects.delete(projectId);
      domainsChanged(projectId);
    },
    watchAssignedDomains(projectId, onTable) {
      const w = { projectId, onTable };
      domainWatchers.add(w);
      onTable(assignedDomains(projectId));
      return () => {
        domainWatchers.delete(w);
      };
    },

    async projectExists(projectId) {
      return projects.has(projectId);
    },
    async appExists(projectId, appName) {
      return project(projectId)?.apps.has(appName) ?? false;
    },
    async listApps(projectId) {
      return [...mustProject(projectId).apps.values()]
        .map((a) => structuredClone(a))
        .sort((a, b) => a.name.localeCompare(b.name));
    },

    async listDomains(projectId) {
      return [...mustProject(projectId).domains.values()]
        .map(withStatus)
        .sort((a, b) => a.domainId.localeCompare(b.domainId));
    },
    async getDomain(projectId, domainId) {
      const d = project(projectId)?.domains.get(domainId);
      return d ? withStatus(d) : undefined;
    },
    async createDomain(projectId, { domainId, hostname }) {
      const p = mustProject(projectId);
      if (p.domains.has(domainId))
        throw new ApiError(ErrorCode.Conflict, `domain ${domainId} already exists`);
      for (const other of projects.values()) {
        for (const d of other.domains.values()) {
          if (d.hostname === hostname)
            throw new ApiError(ErrorCode.Conflict, `hostname ${hostname} is already in use`);
        }
      }
      const domain: Domain = { domainId, hostname, appName: undefined, createdAt: now().toISOString() };
      p.domains.set(domainId, domain);
      domainsChanged(projectId);
      return withStatus(domain);
    },
    async assignDomain(projectId, domainId, appName) {
      const d = project(projectId)?.domains.get(domainId);
      if (!d) return undefined;
      d.appName = appName;
      domainsChanged(projectId);
      return withStatus(d);
    },
    async unassignDomain(projectId, domainId) {
      const d = project(projectId)?.domains.get(domainId);
      if (!d) return undefined;
      d.appName = undefined;
      domainsChanged(projectId);
      return withStatus(d);
    },
    async deleteDomain(projectId, domainId) {
      const deleted = project(projectId)?.domains.delete(domainId) ?? false;
      if (deleted) domainsChanged(projectId);
      return deleted;
    },

    async createServiceAccount(projectId, account) {
      const p = mustProject(projectId);
      if (p.accounts.has(account.name))
        throw new ApiError(ErrorCode.Conflict, `service account ${account.name} already exists`);
      p.accounts.set(account.name, { ...account });
      return publicAccount(account);
    },
    async listServiceAccounts(projectId) {
      return [...mustProject(projectId).accounts.values()]
        .map(publicAccount)
        .sort((a, b) => a.name.localeCompare(b.name));
    },
    async getServiceAccount(projectId, name) {
      const a = project(projectId)?.accounts.get(name);
      return a ? { ...a } : undefined;
    },
    async revokeServiceAccount(projectId, name) {
      return project(projectId)?.accounts.delete(name) ?? false;
    },
    async rotateServiceAccount(projectId, name, next) {
      const a = project(projectId)?.accounts.get(name);
      if (!a) return undefined;
      a.secretHash = next.secretHash;
      a.expiresAt = next.expiresAt;
      return publicAccount(a);
    },
    async touchServiceAccount(projectId, name, at) {
      const a = project(projectId)?.accounts.get(name);
      if (a) a.lastUsedAt = at.toISOString();
    },

    getRunTokenKeys: loadKeys,
    async rotateRunTokenKeys() {
      return saveKeys(rotate(await loadKeys(), await generateSigningKey(now())));
    },
  };
  for (const [p, apps] of Object.entries(opts.projects ?? {})) {
    store.addProject(p);
    for (const a of apps) store.addApp(p, a);
  }
  return store;
}
