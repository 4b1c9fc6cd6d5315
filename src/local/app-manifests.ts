/**
 * Reads a local apps folder: `DIR/<app>/app.yaml` (an App manifest, the CRD's schema) beside the app's
 * code, and `DIR/domains.yaml` (DomainAssignment manifests). Every problem names the file and field.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { z } from 'zod';
import {
  API_VERSION,
  type App,
  DEFAULT_RESPONSE_GRACE_PERIOD_SECONDS,
  type DomainAssignment,
  MAX_RESPONSE_GRACE_PERIOD_SECONDS,
} from '../apis/v1alpha1/types.ts';

export const APP_FILE = 'app.yaml';
export const DOMAINS_FILE = 'domains.yaml';

export class ManifestError extends Error {
  override readonly name = 'ManifestError';
}

const dnsLabel = z
  .string()
  .regex(/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/, 'must be a DNS label (lowercase letters, digits, -)');
const hostname = z
  .string()
  .max(253)
  .regex(
    /^(\*\.)?[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/,
    'must be a lowercase DNS hostname',
  );

const metadata = z.object({
  name: dnsLabel,
  namespace: z.string().optional(),
  labels: z.record(z.string(), z.string()).optional(),
  annotations: z.record(z.string(), z.string()).optional(),
});

const envVar = z.object({
  name: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name'),
  value: z.string().optional(),
  valueFrom: z.unknown().optional(),
});

const appSchema = z.object({
  apiVersion: z.literal(API_VERSION),
  kind: z.literal('App'),
  metadata,
  spec: z.object({
    runtime: z.enum(['cortex', 'custom']),
    image: z.string().optional(),
    code: z.unknown().optional(),
    port: z.number().int().min(1).max(65_535).optional(),
    entrypoint: z.array(z.string()).min(1).optional(),
    healthcheckPath: z.string().startsWith('/').optional(),
    readinessPath: z.string().startsWith('/').optional(),
    env: z.array(envVar).optional(),
    envFromSecrets: z.array(z.string()).optional(),
    resources: z.unknown().optional(),
    scaling: z.unknown().optional(),
    responseGracePeriodSeconds: z.number().int().min(1).max(MAX_RESPONSE_GRACE_PERIOD_SECONDS).optional(),
  }),
});

const domainSchema = z.object({
  apiVersion: z.literal(API_VERSION),
  kind: z.literal('DomainAssignment'),
  metadata,
  spec: z.object({
    hostname,
    appName: z.union([dnsLabel, z.literal('')]).optional(),
    tlsSecretName: z.string().optional(),
  }),
});

export interface LocalApp {
  name: string;
  /** Absolute folder holding app.yaml and the code. */
  dir: string;
  manifest: App;
  gracePeriodSeconds: number;
}

function describe(issues: z.core.$ZodIssue[]): string {
  return issues.map((i) => `${i.path.length ? i.path.join('.') : '(document)'}: ${i.message}`).join('; ');
}

function parseYamlDocs(file: string): unknown[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ManifestError(`${file}: cannot read: ${(err as Error).message}`);
  }
  const docs = parseAllDocuments(text);
  const list = Array.isArray(docs) ? docs : [docs];
  const out: unknown[] = [];
  for (const doc of list) {
    if (doc.errors.length > 0) throw new ManifestError(`${file}: invalid YAML: ${doc.errors[0]?.message}`);
    const value: unknown = doc.toJS();
    if (value !== null && value !== undefined) out.push(value);
  }
  return out;
}

/** Parses and validates one app folder; the folder's name must be the App's metadata.name. */
export function loadApp(dir: string, folderName: string): LocalApp {
  const file = join(dir, APP_FILE);
  const docs = parseYamlDocs(file);
  if (docs.length !== 1)
    throw new ManifestError(`${file}: expected exactly one App document, found ${docs.length}`);
  const parsed = appSchema.safeParse(docs[0]);
  if (!parsed.success) throw new ManifestError(`${file}: not a valid App: ${describe(parsed.error.issues)}`);
  const manifest = parsed.data as App;
  if (manifest.metadata.name !== folderName)
    throw new ManifestError(
      `${file}: metadata.name '${manifest.metadata.name}' must match its folder name '${folderName}'`,
    );
  if (manifest.spec.runtime === 'cortex' && !existsSync(join(dir, 'main.py')))
    throw new ManifestError(`${dir}: a cortex app needs a main.py`);
  if (manifest.spec.runtime === 'custom' && !manifest.spec.entrypoint)
    throw new ManifestError(`${file}: spec.entrypoint is required for a custom app in local mode`);
  return {
    name: folderName,
    dir,
    manifest,
    gracePeriodSeconds: manifest.spec.responseGracePeriodSeconds ?? DEFAULT_RESPONSE_GRACE_PERIOD_SECONDS,
  };
}

export function loadDomains(file: string): DomainAssignment[] {
  if (!existsSync(file)) return [];
  const seen = new Set<string>();
  return parseYamlDocs(file).map((doc, i) => {
    const parsed = domainSchema.safeParse(doc);
    if (!parsed.success)
      throw new ManifestError(
        `${file}: document ${i + 1} is not a valid DomainAssignment: ${describe(parsed.error.issues)}`,
      );
    const da = parsed.data as DomainAssignment;
    if (seen.has(da.metadata.name))
      throw new ManifestError(`${file}: domain '${da.metadata.name}' appears twice`);
    seen.add(da.metadata.name);
    return da;
  });
}

export interface AppsFolder {
  apps: LocalApp[];
  domains: DomainAssignment[];
}

/** Every subfolder with an app.yaml is an app; other folders (e.g. __pycache__) are ignored. */
export function loadAppsFolder(appsDir: string): AppsFolder {
  if (!existsSync(appsDir) || !statSync(appsDir).isDirectory())
    throw new ManifestError(`${appsDir}: apps folder does not exist`);
  const apps = readdirSync(appsDir, { withFileTypes: true })
    .filter((e) => e.isDirectory() && existsSync(join(appsDir, e.name, APP_FILE)))
    .map((e) => e.name)
    .sort()
    .map((name) => loadApp(join(appsDir, name), name));
  const domains = loadDomains(join(appsDir, DOMAINS_FILE));
  const names = new Set(apps.map((a) => a.name));
  const hosts = new Set<string>();
  for (const d of domains) {
    if (d.spec.appName && !names.has(d.spec.appName))
      throw new ManifestError(
        `${join(appsDir, DOMAINS_FILE)}: domain '${d.metadata.name}' names unknown app '${d.spec.appName}'`,
      );
    if (hosts.has(d.spec.hostname))
      throw new ManifestError(
        `${join(appsDir, DOMAINS_FILE)}: hostname '${d.spec.hostname}' is claimed twice`,
      );
    hosts.add(d.spec.hostname);
  }
  return { apps, domains };
}
