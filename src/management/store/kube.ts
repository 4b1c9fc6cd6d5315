/**
 * Cluster store: a project is a namespace labelled `apphost.dev/project=<project_id>`; domains are
 * DomainAssignment CRs in it; service accounts are Secrets labelled `apphost.dev/service-account=true`
 * holding only a hash of the token; run-token keys are one Secret in the platform namespace.
 * Read-modify-write goes through `replace` with the read resourceVersion, retried on 409.
 */
import { CoreV1Api, CustomObjectsApi, type KubeConfig, type V1Secret } from '@kubernetes/client-node';
import {
  API_VERSION,
  APP_PLURAL,
  type App,
  DOMAIN_ASSIGNMENT_PLURAL,
  type DomainAssignment,
  GROUP,
  VERSION,
} from '../../apis/v1alpha1/types.ts';
import { ApiError, ErrorCode } from '../../shared/errors.ts';
import { reuseKubeConnections } from '../../shared/kube/connection.ts';
import {
  isConflict as isKubeConflict,
  isNotFound as isKubeNotFound,
  kubeErrorToApiError as mapKubeError,
} from '../../shared/kube/errors.ts';
import { createProjectNamespaces } from '../../shared/kube/projects.ts';
import {
  generateSigningKey,
  type KeySet,
  RUN_TOKEN_KEYS_SECRET,
  RUN_TOKEN_KEYS_SECRET_KEY,
  rotate,
} from '../../shared/run-tokens.ts';
import type { AppRecord, Domain, ManagementStore, ServiceAccount, StoredServiceAccount } from './types.ts';

export const SERVICE_ACCOUNT_LABEL = 'apphost.dev/service-account';
export const SERVICE_ACCOUNT_NAME_LABEL = 'apphost.dev/service-account-name';
export const SERVICE_ACCOUNT_SECRET_TYPE = 'apphost.dev/service-account-token';
export const SERVICE_ACCOUNT_SECRET_PREFIX = 'apphost-sa-';
export { RUN_TOKEN_KEYS_SECRET, RUN_TOKEN_KEYS_SECRET_KEY };

const ANNOTATION = {
  expiresAt: 'apphost.dev/expires-at',
  createdAt: 'apphost.dev/created-at',
  lastUsedAt: 'apphost.dev/last-used-at',
} as const;
const HASH_KEY = 'token-sha256';
const MANAGED_BY = { 'app.kubernetes.io/managed-by': 'apphost-management' };
/** Attempts of a read-modify-write before a persistent 409 is reported as a conflict. */
const WRITE_ATTEMPTS = 4;

export interface KubeStoreOptions {
  /** Namespace of the run-token keys Secret (the platform's own namespace). */
  keysNamespace: string;
  /** How long a project → namespace lookup is reused (a deleted project may be seen this long). */
  namespaceCacheMs?: number;
  now?: () => Date;
}

export const DEFAULT_NAMESPACE_CACHE_MS = 2_000;

const crd = { group: GROUP, version: VERSION } as const;

export function createKubeStore(kc: KubeConfig, opts: KubeStoreOptions): ManagementStore {
  reuseKubeConnections(kc);
  const core = kc.makeApiClient(CoreV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const now = opts.now ?? (() => new Date());

  const projects = createProjectNamespaces(kc, {
    cacheMs: opts.namespaceCacheMs ?? DEFAULT_NAMESPACE_CACHE_MS,
    now: () => now().getTime(),
  });
  async function namespaceOf(projectId: string): Promise<string | undefined> {
    try {
      return await projects.namespaceOf(projectId);
    } catch (err) {
      throw mapKubeError(err, `project ${projectId}`);
    }
  }
  async function mustNamespace(projectId: string): Promise<string> {
    const ns = await namespaceOf(projectId);
    if (!ns) throw new ApiError(ErrorCode.NotFound, `project ${projectId} not found`);
    return ns;
  }

  const toDomain = (da: DomainAssignment): Domain => {
    const ready = da.status?.conditions?.find((c) => c.type === 'Ready');
    return {
      domainId: da.metadata.name,
      hostname: da.spec.hostname,
      appName: da.spec.appName ? da.spec.appName : undefined,
      createdAt: da.metadata.creationTimestamp ?? new Date(0).toISOString(),
      // A condition about an older generation says nothing about this spec yet.
      status:
        ready && ready.observedGeneration === da.metadata.generation
          ? {
              status: ready.status,
              ...(ready.reason ? { reason: ready.reason } : {}),
              ...(ready.message ? { message: ready.message } : {}),
            }
          : {
              status: 'Unknown',
              reason: 'Pending',
              message: 'the operator has not acted on the latest change yet',
            },
    };
  };
  const toApp = (app: App): AppRecord => ({
    name: app.metadata.name,
    spec: app.spec,
    ...(app.status ? { status: app.status } : {}),
    ...(app.metadata.creationTimestamp ? { createdAt: app.metadata.creationTimestamp } : {}),
  });

  async function readDomain(namespace: string, domainId: string): Promise<DomainAssignment | undefined> {
    try {
      const da = (await custom.getNamespacedCustomObject({
        ...crd,
        namespace,
        plural: DOMAIN_ASSIGNMENT_PLURAL,
        name: domainId,
      })) as DomainAssignment;
      // Deleted but held by the operator's finalizer while it removes the routing: already gone to users.
      return da.metadata.deletionTimestamp ? undefined : da;
    } catch (err) {
      if (isKubeNotFound(err)) return undefined;
      throw mapKubeError(err, `domain ${domainId}`);
    }
  }

  /** Applies `change` to the current spec and replaces it; `change` returning false means no write. */
  async function updateDomain(
    projectId: string,
    domainId: string,
    change: (da: DomainAssignment) => boolean,
  ): Promise<Domain | undefined> {
    const namespace = await namespaceOf(projectId);
    if (!namespace) return undefined;
    for (let attempt = 1; ; attempt++) {
      const da = await readDomain(namespace, domainId);
      if (!da) return undefined;
      if (!change(da)) return toDomain(da);
      try {
        const updated = (await custom.replaceNamespacedCustomObject({
          ...crd,
          namespace,
          plural: DOMAIN_ASSIGNMENT_PLURAL,
          name: domainId,
          body: da,
        })) as DomainAssignment;
        return toDomain(updated);
      } catch (err) {
        if (isKubeNotFound(err)) return undefined;
        if (isKubeConflict(err) && attempt < WRITE_ATTEMPTS) continue;
        throw mapKubeError(err, `domain ${domainId}`);
      }
    }
  }

  const secretName = (name: string) => `${SERVICE_ACCOUNT_SECRET_PREFIX}${name}`;
  const decode = (v: string | undefined) => (v ? Buffer.from(v, 'base64').toString('utf8') : '');

  function toAccount(s: V1Secret): StoredServiceAccount | undefined {
    const a = s.metadata?.annotations ?? {};
    const name = s.metadata?.labels?.[SERVICE_ACCOUNT_NAME_LABEL];
    const secretHash = decode(s.data?.[HASH_KEY]);
    if (!name || !secretHash || !a[ANNOTATION.expiresAt]) return undefined;
    return {
      name,
      secretHash,
      expiresAt: a[ANNOTATION.expiresAt] ?? '',
      createdAt: a[ANNOTATION.createdAt] ?? s.metadata?.creationTimestamp?.toISOString() ?? '',
      lastUsedAt: a[ANNOTATION.lastUsedAt] || undefined,
    };
  }
  const publicAccount = ({ secretHash: _h, ...a }: StoredServiceAccount): ServiceAccount => a;

  async function readAccountSecret(namespace: string, name: string): Promise<V1Secret | undefined> {
    try {
      const s = await core.readNamespacedSecret({ namespace, name: secretName(name) });
      return s.metadata?.labels?.[SERVICE_ACCOUNT_LABEL] === 'true' ? s : undefined;
    } catch (err) {
      if (isKubeNotFound(err)) return undefined;
      throw mapKubeError(err, `service account ${name}`);
    }
  }

  async function readKeysSecret(): Promise<V1Secret | undefined> {
    try {
      return await core.readNamespacedSecret({ namespace: opts.keysNamespace, name: RUN_TOKEN_KEYS_SECRET });
    } catch (err) {
      if (isKubeNotFound(err)) return undefined;
      throw mapKubeError(err, 'run-token keys');
    }
  }
  const parseKeys = (s: V1Secret): KeySet =>
    JSON.parse(decode(s.data?.[RUN_TOKEN_KEYS_SECRET_KEY])) as KeySet;
  const keysData = (set: KeySet) => ({
    [RUN_TOKEN_KEYS_SECRET_KEY]: Buffer.from(JSON.stringify(set)).toString('base64'),
  });

  async function getOrCreateKeysSecret(): Promise<V1Secret> {
    const existing = await readKeysSecret();
    if (existing) return existing;
    const body: V1Secret = {
      metadata: { name: RUN_TOKEN_KEYS_SECRET, namespace: opts.keysNamespace, labels: { ...MANAGED_BY } },
      type: 'Opaque',
      data: keysData({ keys: [await generateSigningKey(now())] }),
    };
    try {
      return await core.createNamespacedSecret({ namespace: opts.keysNamespace, body });
    } catch (err) {
      // Another replica created it first: use theirs.
      if (isKubeConflict(err)) {
        const created = await readKeysSecret();
        if (created) return created;
      }
      throw mapKubeError(err, 'run-token keys');
    }
  }

  return {
    async projectExists(projectId) {
      return (await namespaceOf(projectId)) !== undefined;
    },
    async appExists(projectId, appName) {
      const namespace = await namespaceOf(projectId);
      if (!namespace) return false;
      try {
        await custom.getNamespacedCustomObject({ ...crd, namespace, plural: APP_PLURAL, name: appName });
        return true;
      } catch (err) {
        if (isKubeNotFound(err)) return false;
        throw mapKubeError(err, `app ${appName}`);
      }
    },
    async listApps(projectId) {
      const namespace = await mustNamespace(projectId);
      try {
        const list = (await custom.listNamespacedCustomObject({
          ...crd,
          namespace,
          plural: APP_PLURAL,
        })) as { items: App[] };
        return list.items
          .filter((a) => !a.metadata.deletionTimestamp)
          .map(toApp)
          .sort((a, b) => a.name.localeCompare(b.name));
      } catch (err) {
        throw mapKubeError(err, 'apps');
      }
    },

    async listDomains(projectId) {
      const namespace = await mustNamespace(projectId);
      try {
        const list = (await custom.listNamespacedCustomObject({
          ...crd,
          namespace,
          plural: DOMAIN_ASSIGNMENT_PLURAL,
        })) as { items: DomainAssignment[] };
        return list.items
          .filter((d) => !d.metadata.deletionTimestamp)
          .map(toDomain)
          .sort((a, b) => a.domainId.localeCompare(b.domainId));
      } catch (err) {
        throw mapKubeError(err, 'domains');
      }
    },
    async getDomain(projectId, domainId) {
      const namespace = await namespaceOf(projectId);
      if (!namespace) return undefined;
      const da = await readDomain(namespace, domainId);
      return da ? toDomain(da) : undefined;
    },
    async createDomain(projectId, { domainId, hostname }) {
      const namespace = await mustNamespace(projectId);
      // Hostnames are unique across projects: one project must not capture another's traffic.
      // (Check-then-create: two racing creates of one hostname in different projects can both pass.)
      let all: { items: DomainAssignment[] };
      try {
        all = (await custom.listClusterCustomObject({ ...crd, plural: DOMAIN_ASSIGNMENT_PLURAL })) as {
          items: DomainAssignment[];
        };
      } catch (err) {
        throw mapKubeError(err, 'domains');
      }
      if (all.items.some((d) => d.spec?.hostname === hostname))
        throw new ApiError(ErrorCode.Conflict, `hostname ${hostname} is already in use`);
      const body: DomainAssignment = {
        apiVersion: API_VERSION,
        kind: 'DomainAssignment',
        metadata: { name: domainId, namespace, labels: { ...MANAGED_BY } },
        spec: { hostname },
      };
      try {
        const created = (await custom.createNamespacedCustomObject({
          ...crd,
          namespace,
          plural: DOMAIN_ASSIGNMENT_PLURAL,
          body,
        })) as DomainAssignment;
        return toDomain(created);
      } catch (err) {
        if (isKubeConflict(err)) throw new ApiError(ErrorCode.Conflict, `domain ${domainId} already exists`);
        throw mapKubeError(err, `domain ${domainId}`);
      }
    },
    assignDomain(projectId, domainId, appName) {
      return updateDomain(projectId, domainId, (da) => {
        if (da.spec.appName === appName) return false;
        da.spec.appName = appName;
        return true;
      });
    },
    unassignDomain(projectId, domainId) {
      return updateDomain(projectId, domainId, (da) => {
        if (!da.spec.appName) return false;
        delete da.spec.appName;
        return true;
      });
    },
    async deleteDomain(projectId, domainId) {
      const namespace = await namespaceOf(projectId);
      if (!namespace) return false;
      try {
        await custom.deleteNamespacedCustomObject({
          ...crd,
          namespace,
          plural: DOMAIN_ASSIGNMENT_PLURAL,
          name: domainId,
        });
        return true;
      } catch (err) {
        if (isKubeNotFound(err)) return false;
        throw mapKubeError(err, `domain ${domainId}`);
      }
    },

    async createServiceAccount(projectId, account) {
      const namespace = await mustNamespace(projectId);
      const body: V1Secret = {
        metadata: {
          name: secretName(account.name),
          namespace,
          labels: {
            ...MANAGED_BY,
            [SERVICE_ACCOUNT_LABEL]: 'true',
            [SERVICE_ACCOUNT_NAME_LABEL]: account.name,
          },
          annotations: {
            [ANNOTATION.expiresAt]: account.expiresAt,
            [ANNOTATION.createdAt]: account.createdAt,
            ...(account.lastUsedAt ? { [ANNOTATION.lastUsedAt]: account.lastUsedAt } : {}),
          },
        },
        type: SERVICE_ACCOUNT_SECRET_TYPE,
        data: { [HASH_KEY]: Buffer.from(account.secretHash).toString('base64') },
      };
      try {
        const created = await core.createNamespacedSecret({ namespace, body });
        const a = toAccount(created);
        if (!a) throw new Error('created service account secret does not read back');
        return publicAccount(a);
      } catch (err) {
        if (isKubeConflict(err))
          throw new ApiError(ErrorCode.Conflict, `service account ${account.name} already exists`);
        throw mapKubeError(err, `service account ${account.name}`);
      }
    },
    async listServiceAccounts(projectId) {
      const namespace = await mustNamespace(projectId);
      try {
        const list = await core.listNamespacedSecret({
          namespace,
          labelSelector: `${SERVICE_ACCOUNT_LABEL}=true`,
        });
        return list.items
          .map(toAccount)
          .filter((a): a is StoredServiceAccount => a !== undefined)
          .map(publicAccount)
          .sort((a, b) => a.name.localeCompare(b.name));
      } catch (err) {
        throw mapKubeError(err, 'service accounts');
      }
    },
    async getServiceAccount(projectId, name) {
      const namespace = await namespaceOf(projectId);
      if (!namespace) return undefined;
      const s = await readAccountSecret(namespace, name);
      return s ? toAccount(s) : undefined;
    },
    async revokeServiceAccount(projectId, name) {
      const namespace = await namespaceOf(projectId);
      if (!namespace) return false;
      if (!(await readAccountSecret(namespace, name))) return false;
      try {
        await core.deleteNamespacedSecret({ namespace, name: secretName(name) });
        return true;
      } catch (err) {
        if (isKubeNotFound(err)) return false;
        throw mapKubeError(err, `service account ${name}`);
      }
    },
    async rotateServiceAccount(projectId, name, next) {
      const namespace = await namespaceOf(projectId);
      if (!namespace) return undefined;
      for (let attempt = 1; ; attempt++) {
        const s = await readAccountSecret(namespace, name);
        if (!s?.metadata) return undefined;
        s.metadata.annotations = { ...s.metadata.annotations, [ANNOTATION.expiresAt]: next.expiresAt };
        s.data = { ...s.data, [HASH_KEY]: Buffer.from(next.secretHash).toString('base64') };
        try {
          const a = toAccount(
            await core.replaceNamespacedSecret({ namespace, name: secretName(name), body: s }),
          );
          if (!a) throw new Error('rotated service account secret does not read back');
          return publicAccount(a);
        } catch (err) {
          if (isKubeNotFound(err)) return undefined;
          // A concurrent last-used write bumped the resourceVersion: read again and retry.
          if (isKubeConflict(err) && attempt < WRITE_ATTEMPTS) continue;
          throw mapKubeError(err, `service account ${name}`);
        }
      }
    },
    async touchServiceAccount(projectId, name, at) {
      const namespace = await namespaceOf(projectId);
      if (!namespace) return;
      const s = await readAccountSecret(namespace, name);
      if (!s?.metadata) return;
      s.metadata.annotations = { ...s.metadata.annotations, [ANNOTATION.lastUsedAt]: at.toISOString() };
      try {
        await core.replaceNamespacedSecret({ namespace, name: secretName(name), body: s });
      } catch (err) {
        // A concurrent touch or a revocation won the race; last-used is advisory.
        if (isKubeConflict(err) || isKubeNotFound(err)) return;
        throw mapKubeError(err, `service account ${name}`);
      }
    },

    async getRunTokenKeys() {
      return parseKeys(await getOrCreateKeysSecret());
    },
    async rotateRunTokenKeys() {
      for (let attempt = 1; ; attempt++) {
        const secret = await getOrCreateKeysSecret();
        const next = rotate(parseKeys(secret), await generateSigningKey(now()));
        secret.data = { ...secret.data, ...keysData(next) };
        try {
          await core.replaceNamespacedSecret({
            namespace: opts.keysNamespace,
            name: RUN_TOKEN_KEYS_SECRET,
            body: secret,
          });
          return next;
        } catch (err) {
          if (isKubeConflict(err) && attempt < WRITE_ATTEMPTS) continue;
          throw mapKubeError(err, 'run-token keys');
        }
      }
    },
  };
}
