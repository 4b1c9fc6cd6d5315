/**
 * Reads a local apps folder: `DIR/<app>/apphost.toml` (the app's configuration file) beside the app's
 * code, and `DIR/domains.yaml` (DomainAssignment manifests). Every problem names the file and field.
 * A folder with only the older `app.yaml` (an App manifest) still loads, with a warning that shows the
 * same settings as apphost.toml; a folder with both is an error.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { stringify as toToml } from 'smol-toml';
import { parseAllDocuments } from 'yaml';
import { z } from 'zod';
import { dnsLabel as dnsLabelRule, hostname as hostnameRule } from '../apis/names.ts';
import {
  APP_CONFIG_FILE,
  type AppConfig,
  AppConfigError,
  parseAppConfig,
} from '../apis/v1alpha1/app-config.ts';
import { appFromConfig, configFromApp } from '../apis/v1alpha1/app-config-mapping.ts';
import { ScalingSchema } from '../apis/v1alpha1/scaling.ts';
import {
  API_VERSION,
  type App,
  DEFAULT_RESPONSE_GRACE_PERIOD_SECONDS,
  type DomainAssignment,
  MAX_RESPONSE_GRACE_PERIOD_SECONDS,
} from '../apis/v1alpha1/types.ts';

export { APP_CONFIG_FILE };
/** The App manifest local mode read before apphost.toml (deprecated). */
export const LEGACY_APP_FILE = 'app.yaml';
export const DOMAINS_FILE = 'domains.yaml';

export class ManifestError extends Error {
  override readonly name = 'ManifestError';
}

// The same name rules as the API and the CRDs (src/apis/names.ts): a hostname has two labels or more and
// no wildcard, as the DomainAssignment CRD requires.
const dnsLabel = dnsLabelRule();
const hostname = hostnameRule('must be a lowercase DNS name of two labels or more, e.g. app.localhost');

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
    scaling: ScalingSchema.optional(),
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
  /** Absolute folder holding apphost.toml and the code. */
  dir: string;
  /** The file the settings came from (apphost.toml, or a deprecated app.yaml). */
  file: string;
  config: AppConfig;
  manifest: App;
  gracePeriodSeconds: number;
  /** The app's dependency folder (pip --target of its requirements), when it has requirements. */
  depsDir?: string;
}

/** Whether a folder holds an app (an apphost.toml, or a deprecated app.yaml). */
export function isAppFolder(dir: string): boolean {
  return existsSync(join(dir, APP_CONFIG_FILE)) || existsSync(join(dir, LEGACY_APP_FILE));
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

/** Parses and validates one app folder; the app's name must be the folder's name. */
export function loadApp(
  dir: string,
  folderName: string,
  warn: (message: string) => void = () => {},
): LocalApp {
  const tomlFile = join(dir, APP_CONFIG_FILE);
  const yamlFile = join(dir, LEGACY_APP_FILE);
  const hasToml = existsSync(tomlFile);
  if (hasToml && existsSync(yamlFile))
    throw new ManifestError(
      `${dir}: has both ${APP_CONFIG_FILE} and ${LEGACY_APP_FILE}; ${APP_CONFIG_FILE} replaces ${LEGACY_APP_FILE}: remove ${LEGACY_APP_FILE}`,
    );
  const { config, manifest, file } = hasToml ? loadToml(tomlFile) : loadLegacyYaml(yamlFile, warn);
  if (manifest.metadata.name !== folderName)
    throw new ManifestError(
      hasToml
        ? `${file}: app.name '${manifest.metadata.name}' must match its folder name '${folderName}'`
        : `${file}: metadata.name '${manifest.metadata.name}' must match its folder name '${folderName}'`,
    );
  if (manifest.spec.runtime === 'cortex' && !existsSync(join(dir, 'main.py')))
    throw new ManifestError(`${dir}: a cortex app needs a main.py`);
  if (manifest.spec.runtime === 'custom' && !manifest.spec.entrypoint)
    throw new ManifestError(
      hasToml
        ? `${file}: app.runtime.custom.entrypoint is required in local mode (the command that starts your server)`
        : `${file}: spec.entrypoint is required for a custom app in local mode`,
    );
  return {
    name: folderName,
    dir,
    file,
    config,
    manifest,
    gracePeriodSeconds: manifest.spec.responseGracePeriodSeconds ?? DEFAULT_RESPONSE_GRACE_PERIOD_SECONDS,
  };
}

function loadToml(file: string): { config: AppConfig; manifest: App; file: string } {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ManifestError(`${file}: cannot read: ${(err as Error).message}`);
  }
  try {
    const config = parseAppConfig(text, file);
    return { config, manifest: appFromConfig(config), file };
  } catch (err) {
    if (err instanceof AppConfigError) throw new ManifestError(err.message);
    throw err;
  }
}

function loadLegacyYaml(
  file: string,
  warn: (message: string) => void,
): { config: AppConfig; manifest: App; file: string } {
  const docs = parseYamlDocs(file);
  if (docs.length !== 1)
    throw new ManifestError(`${file}: expected exactly one App document, found ${docs.length}`);
  const parsed = appSchema.safeParse(docs[0]);
  if (!parsed.success) throw new ManifestError(`${file}: not a valid App: ${describe(parsed.error.issues)}`);
  const manifest = parsed.data as App;
  const { config } = configFromApp(manifest);
  warn(
    `${file} is deprecated: apphost dev now reads ${APP_CONFIG_FILE}. The same settings as ${APP_CONFIG_FILE}:\n\n${toToml(config)}`,
  );
  return { config, manifest, file };
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

/** Every subfolder with an apphost.toml (or app.yaml) is an app; other folders (e.g. __pycache__) are ignored. */
export function loadAppsFolder(appsDir: string, warn: (message: string) => void = () => {}): AppsFolder {
  if (!existsSync(appsDir) || !statSync(appsDir).isDirectory())
    throw new ManifestError(`${appsDir}: apps folder does not exist`);
  const apps = readdirSync(appsDir, { withFileTypes: true })
    .filter((e) => e.isDirectory() && isAppFolder(join(appsDir, e.name)))
    .map((e) => e.name)
    .sort()
    .map((name) => loadApp(join(appsDir, name), name, warn));
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
