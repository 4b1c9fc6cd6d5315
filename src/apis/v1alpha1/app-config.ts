/**
 * `apphost.toml`, the app's configuration file: the one schema the CLI, the management API and local
 * mode read it with, its TOML parsing, and the JSON Schema published for editors. Every problem names the
 * key's path and the rule. How each key maps onto the App resource: app-config-mapping.ts and
 * docs/apphost-toml.md.
 */
import { parse, TomlError } from 'smol-toml';
import { z } from 'zod';
import { APP_NAME, DNS_SUBDOMAIN } from '../names.ts';
import { ScalingSchema } from './scaling.ts';
import { MAX_RESPONSE_GRACE_PERIOD_SECONDS, type ScalingSpec } from './types.ts';

export const APP_CONFIG_FILE = 'apphost.toml';

/** Python versions a config may name; an install serves one or more of them (checked at deploy). */
export const PYTHON_VERSIONS = ['3.11', '3.12', '3.13'] as const;
export type PythonVersion = (typeof PYTHON_VERSIONS)[number];

/** What `include`/`exclude` are when the file does not say (exclude: dotfiles and Python caches). */
export const DEFAULT_INCLUDE = ['**'] as const;
export const DEFAULT_EXCLUDE = ['.*', '__pycache__', '*.pyc'] as const;
export const DEFAULT_REQUIREMENTS_FILE = 'requirements.txt';

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const CPU = /^([0-9]+(\.[0-9]+)?m?)$/;
const MEMORY = /^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|k|M|G|T)?$/;
/** A pip distribution name (PEP 508) and a version specifier (PEP 440), kept loose: pip has the last word. */
const PIP_NAME = /^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?(\[[A-Za-z0-9._,\s-]+\])?$/;
const PIP_SPEC =
  /^\s*(\*|((===|==|!=|~=|<=|>=|<|>)\s*[A-Za-z0-9.*+!_-]+\s*)(,\s*(===|==|!=|~=|<=|>=|<|>)\s*[A-Za-z0-9.*+!_-]+\s*)*)?$/;

const intIn = (min: number, max: number, what = '') =>
  z
    .number({ error: `must be an integer${what}` })
    .int({ error: `must be an integer from ${min} to ${max}${what}` })
    .min(min, { error: `must be an integer from ${min} to ${max}${what}` })
    .max(max, { error: `must be an integer from ${min} to ${max}${what}` });
const text = (re: RegExp, rule: string, max: number) =>
  z
    .string({ error: `must be a string (${rule})` })
    .max(max, { error: `must be at most ${max} characters` })
    .regex(re, { error: rule });
const path = (rule: string) =>
  z
    .string({ error: `must be a string (${rule})` })
    .min(1, { error: rule })
    .max(1024, { error: 'must be at most 1024 characters' })
    .regex(/^\//, { error: rule });
const globs = (what: string) =>
  z
    .array(z.string({ error: 'must be a glob pattern string' }).min(1, { error: 'must not be empty' }), {
      error: `must be a list of glob patterns (${what})`,
    })
    .max(256, { error: 'at most 256 patterns' });

/** `[app.scaling]` keys and the App `spec.scaling` fields they are (scaling.ts states their ranges and rules). */
export const SCALING_KEYS = {
  min_replicas: 'minReplicas',
  max_replicas: 'maxReplicas',
  replica_concurrency: 'replicaConcurrency',
  cooldown: 'cooldownSeconds',
  scaling_buffer: 'scalingBuffer',
  target_utilization: 'targetUtilization',
} as const satisfies Record<string, keyof ScalingSpec>;
type ScalingKey = keyof typeof SCALING_KEYS;

/** A `[app.scaling]` key with the range ScalingSchema gives its App field. */
function scalingKey(key: ScalingKey, unit: string, description: string) {
  const n = ScalingSchema.shape[SCALING_KEYS[key]].unwrap();
  return intIn(n.minValue ?? 0, n.maxValue ?? Number.MAX_SAFE_INTEGER, unit)
    .optional()
    .meta({ description });
}

/** ScalingSchema's messages name App fields; the file's user knows the keys. */
const toKeys = (message: string) =>
  Object.entries(SCALING_KEYS).reduce((m, [key, field]) => m.replaceAll(field, key), message);

export const ScalingConfig = z
  .strictObject({
    min_replicas: scalingKey(
      'min_replicas',
      '',
      'Replicas kept running even when idle (default 1; 0 scales to zero).',
    ),
    max_replicas: scalingKey('max_replicas', '', 'Upper bound on replicas (default 10).'),
    replica_concurrency: scalingKey(
      'replica_concurrency',
      '',
      'Calls one replica serves at once (default 100).',
    ),
    cooldown: scalingKey(
      'cooldown',
      ' (seconds)',
      'Seconds the load must stay lower before replicas are removed (default 60).',
    ),
    scaling_buffer: scalingKey(
      'scaling_buffer',
      '',
      'Extra replicas kept above what the load needs (default 0).',
    ),
    target_utilization: scalingKey(
      'target_utilization',
      ' (percent)',
      'Percent of replica_concurrency the autoscaler aims for per replica (default 70).',
    ),
    response_grace_period: intIn(1, MAX_RESPONSE_GRACE_PERIOD_SECONDS, ' (seconds)').optional().meta({
      description:
        'Seconds a call (or async run) may take, and how long a stopping replica keeps serving (default 900, at most 43200).',
    }),
  })
  .superRefine((s, ctx) => {
    // The cross-field rules are ScalingSchema's (the CRD's CEL rules), told in the file's key names.
    const spec = Object.fromEntries(
      Object.entries(SCALING_KEYS).map(([key, field]) => [field, s[key as ScalingKey]]),
    );
    const r = ScalingSchema.safeParse(spec);
    for (const issue of r.error?.issues ?? []) {
      if (issue.code !== 'custom') continue;
      const field = String(issue.path[0] ?? '');
      const key = Object.entries(SCALING_KEYS).find(([, f]) => f === field)?.[0];
      ctx.addIssue({ code: 'custom', path: key ? [key] : [], message: toKeys(issue.message) });
    }
  });

const CPU_RULE = 'must be a number of cores from 0 to 256 (e.g. 0.5, 2) or a CPU quantity (e.g. "500m")';

export const HardwareConfig = z.strictObject({
  cpu: z
    .union(
      [
        z.number().positive({ error: CPU_RULE }).max(256, { error: CPU_RULE }),
        z.string().regex(CPU, { error: CPU_RULE }),
      ],
      { error: CPU_RULE },
    )
    .optional()
    .meta({ description: 'CPU request: cores (0.5, 2) or a quantity ("500m").' }),
  memory: text(MEMORY, 'must be a memory size such as "512Mi" or "2Gi"', 32)
    .optional()
    .meta({ description: 'Memory request and limit, e.g. "512Mi", "2Gi".' }),
  gpu: intIn(0, 16).optional().meta({ description: 'Number of nvidia.com/gpu.' }),
});

export const DependenciesConfig = z.strictObject({
  pip: z
    .record(
      z
        .string()
        .regex(PIP_NAME, { error: 'must be a pip package name, e.g. "requests" or "uvicorn[standard]"' }),
      z
        .string({ error: 'must be a version specifier string, e.g. ">=2.31", "==1.0.0" or "*" for any' })
        .max(256, { error: 'must be at most 256 characters' })
        .regex(PIP_SPEC, {
          error: 'must be a version specifier, e.g. ">=2.31", "==1.0.0", ">=1,<2" or "*" for any',
        }),
      { error: 'must be a table of package = "version specifier"' },
    )
    .optional()
    .meta({ description: 'pip packages: name = "version specifier" ("*" for any version).' }),
  requirements: z
    .string({ error: 'must be a path (string) inside the app folder' })
    .min(1, { error: 'must be a path inside the app folder' })
    .max(1024, { error: 'must be at most 1024 characters' })
    .optional()
    .meta({
      description: `A pip requirements file inside the app folder (default ${DEFAULT_REQUIREMENTS_FILE} when it exists).`,
    }),
});

export const CustomRuntimeConfig = z.strictObject({
  image: z
    .string({ error: 'must be a container image reference' })
    .min(1, { error: 'must be a container image reference' })
    .max(512, { error: 'must be at most 512 characters' })
    .optional()
    .meta({ description: 'Your container image (needed on a cluster; local mode runs entrypoint instead).' }),
  port: intIn(1, 65_535).meta({ description: 'The port your server listens on.' }),
  entrypoint: z
    .array(z.string({ error: 'must be a string' }), {
      error: 'must be a list of strings (the command and its arguments)',
    })
    .min(1, { error: 'must not be empty' })
    .max(64, { error: 'at most 64 items' })
    .optional()
    .meta({
      description:
        'Command starting your server (cluster: defaults to the image entrypoint; local mode: required).',
    }),
  healthcheck_path: path('must be an HTTP path starting with /')
    .optional()
    .meta({ description: 'Liveness probe path (default /).' }),
  readiness_path: path('must be an HTTP path starting with /')
    .optional()
    .meta({ description: 'Readiness probe path (default healthcheck_path).' }),
});

export const SecretRef = z.strictObject({
  secret: text(
    DNS_SUBDOMAIN,
    'must be the name of a Secret in the project (lowercase letters, digits, - and .)',
    253,
  ),
  key: z
    .string({ error: 'must be the key inside the Secret' })
    .min(1, { error: 'must not be empty' })
    .max(253),
  optional: z.boolean({ error: 'must be true or false' }).optional(),
});

const EnvValue = z.union([z.string(), SecretRef], {
  error: 'must be a string or a secret reference { secret = "name", key = "key" }',
});

/** `[app.runtime.custom]` selects the custom runtime; `runtime = "cortex"` (or nothing) the Python one. */
export const RuntimeConfig = z
  .strictObject({
    cortex: z
      .strictObject({})
      .optional()
      .meta({ description: 'The Python (cortex) runtime: no settings yet.' }),
    custom: CustomRuntimeConfig.optional(),
  })
  .refine((r) => !(r.cortex && r.custom), {
    error: 'choose one runtime: [app.runtime.cortex] or [app.runtime.custom], not both',
  });

export const AppSection = z.strictObject({
  name: text(
    APP_NAME,
    'must start with a lowercase letter and contain only lowercase letters, digits and - (at most 63)',
    63,
  ).meta({ description: 'The app name: the <app_name> of /v4/<project_id>/<app_name>/<function>.' }),
  runtime: z
    .union([z.literal('cortex'), RuntimeConfig], {
      error:
        'must be "cortex", or a table [app.runtime.custom] with your server\'s settings (port, image, entrypoint)',
    })
    .optional()
    .meta({
      description:
        'Which runtime serves the app: "cortex" (default; the functions of main.py) or a [app.runtime.custom] table (your own HTTP server).',
    }),
  python_version: z
    .enum(PYTHON_VERSIONS, { error: `must be one of ${PYTHON_VERSIONS.map((v) => `"${v}"`).join(', ')}` })
    .optional()
    .meta({ description: "Python for the app and its dependencies (default: the install's)." }),
  include: globs('files to bundle')
    .optional()
    .meta({
      description: `Glob patterns of files to bundle, relative to the folder (default ${JSON.stringify(DEFAULT_INCLUDE)}).`,
    }),
  exclude: globs('files and folders to leave out')
    .optional()
    .meta({
      description: `Glob patterns left out of the bundle; a pattern without / matches a name at any depth (default ${JSON.stringify(DEFAULT_EXCLUDE)}).`,
    }),
  env_from_secrets: z
    .array(text(DNS_SUBDOMAIN, 'must be the name of a Secret in the project', 253), {
      error: 'must be a list of Secret names',
    })
    .max(32, { error: 'at most 32 Secrets' })
    .optional()
    .meta({ description: 'Secrets whose keys all become environment variables.' }),
  scaling: ScalingConfig.optional(),
  hardware: HardwareConfig.optional(),
  dependencies: DependenciesConfig.optional(),
  env: z
    .record(
      z.string().regex(ENV_NAME, { error: 'must be an environment variable name (letters, digits, _)' }),
      EnvValue,
      { error: 'must be a table of NAME = "value" or NAME = { secret = "...", key = "..." }' },
    )
    .optional()
    .meta({
      description: 'Environment variables: NAME = "value" or NAME = { secret = "name", key = "key" }.',
    }),
});

/** The whole file: one `[app]` table. */
export const AppConfig = z
  .strictObject({ app: AppSection })
  .meta({ title: 'apphost.toml', description: "An apphost app's configuration file." });
export type AppConfig = z.infer<typeof AppConfig>;
export type CustomRuntimeConfig = z.infer<typeof CustomRuntimeConfig>;

/** One problem in a config: the key's dotted path (`app.scaling.min_replicas`) and the rule it breaks. */
export interface ConfigProblem {
  path: string;
  message: string;
}

export class AppConfigError extends Error {
  override readonly name = 'AppConfigError';
  readonly problems: ConfigProblem[];
  constructor(file: string, problems: ConfigProblem[]) {
    super(`${file}: ${problems.map((p) => (p.path ? `${p.path}: ${p.message}` : p.message)).join('; ')}`);
    this.problems = problems;
  }
}

type Issue = z.core.$ZodIssue;

/** The keys an object schema at `path` accepts (for "unknown key" messages). */
function knownKeys(path: readonly PropertyKey[]): string[] {
  let schema: z.core.$ZodType | undefined = AppConfig;
  for (const segment of path) {
    schema = unwrap(schema);
    const shape = (schema as { shape?: Record<string, z.core.$ZodType> } | undefined)?.shape;
    if (shape) schema = shape[String(segment)];
    else {
      // A union (app.runtime): look for an object branch.
      const options = (schema as { options?: z.core.$ZodType[] } | undefined)?.options ?? [];
      const obj = options.map(unwrap).find((o) => (o as { shape?: unknown }).shape);
      schema = (obj as { shape?: Record<string, z.core.$ZodType> } | undefined)?.shape?.[String(segment)];
    }
    if (!schema) return [];
  }
  schema = unwrap(schema);
  const shape = (schema as { shape?: Record<string, unknown> } | undefined)?.shape;
  if (shape) return Object.keys(shape);
  const options = (schema as { options?: z.core.$ZodType[] } | undefined)?.options ?? [];
  const obj = options.map(unwrap).find((o) => (o as { shape?: unknown }).shape);
  return Object.keys((obj as { shape?: Record<string, unknown> } | undefined)?.shape ?? {});
}

function unwrap(schema: z.core.$ZodType | undefined): z.core.$ZodType | undefined {
  let s = schema;
  while (s && 'unwrap' in s && typeof (s as { unwrap?: unknown }).unwrap === 'function')
    s = (s as unknown as { unwrap(): z.core.$ZodType }).unwrap();
  return s;
}

const isTypeMismatch = (branch: Issue[]) =>
  branch.length === 1 &&
  branch[0]?.path.length === 0 &&
  (branch[0].code === 'invalid_type' || branch[0].code === 'invalid_value');

/** zod issues → problems naming the full key path and the rule, unions and records unwrapped. */
export function describeIssues(
  issues: readonly Issue[],
  prefix: readonly PropertyKey[] = [],
): ConfigProblem[] {
  const out: ConfigProblem[] = [];
  for (const issue of issues) {
    const at = [...prefix, ...issue.path];
    if (issue.code === 'invalid_union') {
      // The branch whose type matched tells what is wrong inside it; otherwise the union's own rule.
      const matched = issue.errors.find((b) => !isTypeMismatch(b));
      if (matched) out.push(...describeIssues(matched, at));
      else out.push({ path: dotted(at), message: issue.message });
    } else if (issue.code === 'invalid_key') {
      out.push(...describeIssues(issue.issues, at).map((p) => ({ ...p, path: dotted(at) })));
    } else if (issue.code === 'invalid_element') {
      out.push(...describeIssues(issue.issues, at));
    } else if (issue.code === 'unrecognized_keys') {
      const allowed = knownKeys(at);
      for (const key of issue.keys)
        out.push({
          path: dotted([...at, key]),
          message: `unknown key${allowed.length ? ` (${dotted(at) || 'the file'} accepts: ${allowed.join(', ')})` : ''}`,
        });
    } else if (issue.code === 'invalid_type' && issue.input === undefined) {
      out.push({ path: dotted(at), message: 'is required' });
    } else {
      out.push({ path: dotted(at), message: issue.message });
    }
  }
  return out;
}

/** `app.env.MY_VAR`, `app.include[2]`; keys that are not bare TOML keys are quoted. */
function dotted(path: readonly PropertyKey[]): string {
  let s = '';
  for (const p of path) {
    if (typeof p === 'number') s += `[${p}]`;
    else {
      const k = String(p);
      const part = /^[A-Za-z0-9_-]+$/.test(k) ? k : JSON.stringify(k);
      s += s ? `.${part}` : part;
    }
  }
  return s;
}

/** Validates an already-parsed document (e.g. JSON from the API). Throws AppConfigError. */
export function validateAppConfig(doc: unknown, file = APP_CONFIG_FILE): AppConfig {
  const r = AppConfig.safeParse(doc, { reportInput: true });
  if (!r.success) throw new AppConfigError(file, describeIssues(r.error.issues));
  return r.data;
}

/** Parses and validates the text of an apphost.toml. Throws AppConfigError (syntax errors carry line:column). */
export function parseAppConfig(text: string, file = APP_CONFIG_FILE): AppConfig {
  let doc: unknown;
  try {
    doc = parse(text, { unsafeKeyBehaviour: 'throw' });
  } catch (err) {
    if (err instanceof TomlError)
      throw new AppConfigError(`${file}:${err.line}:${err.column}`, [
        { path: '', message: `invalid TOML: ${err.message.split('\n')[0]}` },
      ]);
    throw new AppConfigError(file, [{ path: '', message: `invalid TOML: ${(err as Error).message}` }]);
  }
  return validateAppConfig(doc, file);
}

/** The JSON Schema (draft 2020-12) of apphost.toml, for editors (Taplo / Even Better TOML) and tools. */
export function appConfigJsonSchema(): Record<string, unknown> {
  return {
    ...z.toJSONSchema(AppConfig, { io: 'input', target: 'draft-2020-12' }),
    $id: 'https://apphost.dev/schemas/apphost.schema.json',
  };
}

/** Which runtime the config selects. */
export function runtimeOf(config: AppConfig): 'cortex' | 'custom' {
  const r = config.app.runtime;
  return r !== undefined && r !== 'cortex' && r.custom ? 'custom' : 'cortex';
}

export function customRuntimeOf(config: AppConfig): CustomRuntimeConfig | undefined {
  const r = config.app.runtime;
  return r !== undefined && r !== 'cortex' ? r.custom : undefined;
}

/** schemas/apphost.schema.json as committed (and served at {base_url}/schemas/apphost.schema.json). */
export function appConfigJsonSchemaText(): string {
  return `${JSON.stringify(appConfigJsonSchema(), null, 2)}\n`;
}
