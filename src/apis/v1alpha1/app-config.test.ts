import { readFileSync } from 'node:fs';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import {
  AppConfigError,
  appConfigJsonSchema,
  appConfigJsonSchemaText,
  parseAppConfig,
  validateAppConfig,
} from './app-config.ts';
import { appFromConfig, configFromApp } from './app-config-mapping.ts';

const FULL = `
[app]
name = "shop-api"
python_version = "3.11"
include = ["**"]
exclude = [".*", "tests"]
env_from_secrets = ["shop-env"]

[app.scaling]
min_replicas = 0
max_replicas = 5
replica_concurrency = 4
cooldown = 120
scaling_buffer = 1
target_utilization = 80
response_grace_period = 60

[app.hardware]
cpu = 0.5
memory = "512Mi"
gpu = 1

[app.dependencies]
requirements = "requirements.txt"
pip = { requests = ">=2.31", mylib = "==0.1.0", anything = "*" }

[app.env]
GREETING = "hi"
API_KEY = { secret = "shop-keys", key = "api", optional = true }
`;

const CUSTOM = `
[app]
name = "srv"

[app.runtime.custom]
image = "me/srv:1"
port = 9000
entrypoint = ["/srv", "--fast"]
healthcheck_path = "/hz"
readiness_path = "/ready"
`;

function problems(text: string): Array<{ path: string; message: string }> {
  try {
    parseAppConfig(text);
  } catch (err) {
    expect(err).toBeInstanceOf(AppConfigError);
    return (err as AppConfigError).problems;
  }
  throw new Error('expected the config to be rejected');
}

describe('apphost.toml schema', () => {
  it('accepts every key and maps it onto the App one to one', () => {
    const config = parseAppConfig(FULL);
    const app = appFromConfig(config, {
      namespace: 'shop',
      artifacts: { bundle: `sha256:${'a'.repeat(64)}`, dependencies: `sha256:${'b'.repeat(64)}` },
    });
    expect(app).toEqual({
      apiVersion: 'apphost.dev/v1alpha1',
      kind: 'App',
      metadata: { name: 'shop-api', namespace: 'shop' },
      spec: {
        runtime: 'cortex',
        pythonVersion: '3.11',
        code: { artifacts: { bundle: `sha256:${'a'.repeat(64)}`, dependencies: `sha256:${'b'.repeat(64)}` } },
        env: [
          { name: 'GREETING', value: 'hi' },
          { name: 'API_KEY', valueFrom: { secretKeyRef: { name: 'shop-keys', key: 'api', optional: true } } },
        ],
        envFromSecrets: ['shop-env'],
        resources: { cpu: '0.5', memory: '512Mi', gpu: 1 },
        scaling: {
          minReplicas: 0,
          maxReplicas: 5,
          replicaConcurrency: 4,
          cooldownSeconds: 120,
          scalingBuffer: 1,
          targetUtilization: 80,
        },
        responseGracePeriodSeconds: 60,
      },
    });
  });

  it('the custom runtime is chosen by [app.runtime.custom], its keys map onto the App', () => {
    const app = appFromConfig(parseAppConfig(CUSTOM));
    expect(app.spec).toEqual({
      runtime: 'custom',
      image: 'me/srv:1',
      port: 9000,
      entrypoint: ['/srv', '--fast'],
      healthcheckPath: '/hz',
      readinessPath: '/ready',
    });
  });

  it('a minimal file is a cortex app with platform defaults', () => {
    expect(appFromConfig(parseAppConfig('[app]\nname = "hello"\n')).spec).toEqual({ runtime: 'cortex' });
    expect(appFromConfig(parseAppConfig('[app]\nname = "hello"\nruntime = "cortex"\n')).spec).toEqual({
      runtime: 'cortex',
    });
  });

  it('App → apphost.toml → App is the identity on every mapped field', () => {
    for (const text of [FULL, CUSTOM]) {
      const app = appFromConfig(parseAppConfig(text));
      const back = configFromApp(app);
      expect(back.unmapped).toEqual([]);
      expect(appFromConfig(validateAppConfig(back.config))).toEqual(app);
    }
  });

  it('configFromApp names the App fields the file has no key for', () => {
    const back = configFromApp({
      apiVersion: 'apphost.dev/v1alpha1',
      kind: 'App',
      metadata: { name: 'old' },
      spec: { runtime: 'cortex', image: 'me/app:1', code: { configMapRef: { name: 'c' } } },
    });
    expect(back.unmapped).toEqual(['spec.code.configMapRef', 'spec.image']);
    expect(back.config).toEqual({ app: { name: 'old' } });
  });

  it.each([
    [
      'unknown key, with the keys allowed there',
      '[app]\nname = "a"\n[app.scaling]\nmin_replica = 1\n',
      [
        {
          path: 'app.scaling.min_replica',
          message: expect.stringContaining('unknown key (app.scaling accepts: min_replicas, max_replicas'),
        },
      ],
    ],
    [
      'unknown top-level table',
      '[app]\nname = "a"\n[deployment]\nx = 1\n',
      [{ path: 'deployment', message: 'unknown key (the file accepts: app)' }],
    ],
    ['missing name', '[app]\n', [{ path: 'app.name', message: 'is required' }]],
    [
      'missing [app]',
      'name = "a"\n',
      [
        { path: 'app', message: 'is required' },
        { path: 'name', message: expect.stringContaining('unknown key') },
      ],
    ],
    [
      'bad name',
      '[app]\nname = "Hello_World"\n',
      [{ path: 'app.name', message: expect.stringContaining('must start with a lowercase letter') }],
    ],
    [
      'float where an integer is needed',
      '[app]\nname = "a"\n[app.scaling]\nmin_replicas = 1.5\n',
      [{ path: 'app.scaling.min_replicas', message: 'must be an integer from 0 to 1000' }],
    ],
    [
      'out of range',
      '[app]\nname = "a"\n[app.scaling]\nresponse_grace_period = 50000\n',
      [
        {
          path: 'app.scaling.response_grace_period',
          message: 'must be an integer from 1 to 43200 (seconds)',
        },
      ],
    ],
    [
      'min above max',
      '[app]\nname = "a"\n[app.scaling]\nmin_replicas = 3\nmax_replicas = 2\n',
      [{ path: 'app.scaling.min_replicas', message: 'min_replicas must not be greater than max_replicas' }],
    ],
    [
      'a scaling buffer not below max_replicas (the CRD rule, in key names)',
      '[app]\nname = "a"\n[app.scaling]\nmax_replicas = 2\nscaling_buffer = 2\n',
      [{ path: 'app.scaling.scaling_buffer', message: 'scaling_buffer must be less than max_replicas' }],
    ],
    [
      'runtime = "custom" without its table',
      '[app]\nname = "a"\nruntime = "custom"\n',
      [{ path: 'app.runtime', message: expect.stringContaining('[app.runtime.custom]') }],
    ],
    [
      'custom runtime without a port',
      '[app]\nname = "a"\n[app.runtime.custom]\nimage = "x"\n',
      [{ path: 'app.runtime.custom.port', message: 'is required' }],
    ],
    [
      'both runtimes',
      '[app]\nname = "a"\n[app.runtime.cortex]\n[app.runtime.custom]\nport = 1\n',
      [{ path: 'app.runtime', message: expect.stringContaining('choose one runtime') }],
    ],
    [
      'bad memory',
      '[app]\nname = "a"\n[app.hardware]\nmemory = 2\n',
      [{ path: 'app.hardware.memory', message: expect.stringContaining('"512Mi"') }],
    ],
    [
      'bad cpu',
      '[app]\nname = "a"\n[app.hardware]\ncpu = "lots"\n',
      [{ path: 'app.hardware.cpu', message: expect.stringContaining('number of cores') }],
    ],
    [
      'negative cpu',
      '[app]\nname = "a"\n[app.hardware]\ncpu = -1\n',
      [{ path: 'app.hardware.cpu', message: expect.stringContaining('number of cores') }],
    ],
    [
      'bad pip specifier',
      '[app]\nname = "a"\n[app.dependencies.pip]\nrequests = "latest"\n',
      [{ path: 'app.dependencies.pip.requests', message: expect.stringContaining('version specifier') }],
    ],
    [
      'bad pip name',
      '[app]\nname = "a"\n[app.dependencies.pip]\n"no spaces" = "*"\n',
      [{ path: 'app.dependencies.pip."no spaces"', message: expect.stringContaining('pip package name') }],
    ],
    [
      'bad env name',
      '[app]\nname = "a"\n[app.env]\n"1X" = "v"\n',
      [{ path: 'app.env.1X', message: expect.stringContaining('environment variable name') }],
    ],
    [
      'secret ref without key',
      '[app]\nname = "a"\n[app.env]\nK = { secret = "s" }\n',
      [{ path: 'app.env.K.key', message: 'is required' }],
    ],
    [
      'env value of the wrong type',
      '[app]\nname = "a"\n[app.env]\nK = 3\n',
      [{ path: 'app.env.K', message: expect.stringContaining('must be a string or a secret reference') }],
    ],
    [
      'include is not a list',
      '[app]\nname = "a"\ninclude = "*.py"\n',
      [{ path: 'app.include', message: expect.stringContaining('must be a list of glob patterns') }],
    ],
    [
      'python version not offered',
      '[app]\nname = "a"\npython_version = "2.7"\n',
      [{ path: 'app.python_version', message: 'must be one of "3.11", "3.12", "3.13"' }],
    ],
  ])('%s → the key path and the rule', (_name, text, expected) => {
    expect(problems(text)).toEqual(expected);
  });

  it('a TOML syntax error names the line and column', () => {
    const err = (() => {
      try {
        parseAppConfig('[app]\nname = "a"\nname = "b"\n', 'my/apphost.toml');
      } catch (e) {
        return e as AppConfigError;
      }
    })();
    expect(err?.message).toMatch(/^my\/apphost\.toml:3:1: invalid TOML: /);
  });

  it('refuses keys that could pollute prototypes', () => {
    expect(problems('[app]\nname = "a"\n[app.env]\n__proto__ = "x"\n')[0]?.message).toMatch(/invalid TOML/);
  });

  it('the published JSON Schema agrees with the schema on good and bad files', () => {
    const validate = new Ajv2020({ strict: false }).compile(appConfigJsonSchema());
    for (const text of [FULL, CUSTOM, '[app]\nname = "a"\n'])
      expect(validate(JSON.parse(JSON.stringify(parseAppConfig(text))))).toBe(true);
    const bad = [
      { app: { name: 'a', scaling: { min_replica: 1 } } },
      { app: { name: 'Bad' } },
      { app: { name: 'a', runtime: 'custom' } },
      { app: { name: 'a', runtime: { custom: {} } } },
      { app: { name: 'a', hardware: { memory: 2 } } },
      { app: { name: 'a', env: { K: { secret: 's' } } } },
      { app: {} },
    ];
    for (const doc of bad) {
      expect(() => validateAppConfig(doc)).toThrow(AppConfigError);
      expect(validate(doc)).toBe(false);
    }
  });
});

describe('schemas/apphost.schema.json', () => {
  it('is the JSON Schema generated from the zod schema now', () => {
    const committed = readFileSync(new URL('../../../schemas/apphost.schema.json', import.meta.url), 'utf8');
    expect(committed, 'schemas/apphost.schema.json is stale: run node hack/write-app-config-schema.ts').toBe(
      appConfigJsonSchemaText(),
    );
  });
});
