/**
 * apphost.toml ⇄ App: the one-to-one mapping between the configuration file and the App resource
 * (the table is in docs/apphost-toml.md). `include`, `exclude` and `[app.dependencies]` say what goes into
 * the bundle and the dependency build; their results reach the App as `spec.code.artifacts`.
 */
import {
  type AppConfig,
  type CustomRuntimeConfig,
  customRuntimeOf,
  PYTHON_VERSIONS,
  type PythonVersion,
  runtimeOf,
  SCALING_KEYS,
} from './app-config.ts';
import {
  API_VERSION,
  type App,
  type AppCode,
  type AppSpec,
  type EnvVar,
  Runtime,
  type ScalingSpec,
} from './types.ts';

const defined = <T extends object>(o: T): T =>
  Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
const nonEmpty = <T extends object>(o: T): T | undefined => (Object.keys(o).length > 0 ? o : undefined);

export interface AppFromConfigOptions {
  namespace?: string;
  /** The deployed version's bundle and dependency set (absent: the App names no code of its own). */
  artifacts?: AppCode['artifacts'];
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

export function appSpecFromConfig(config: AppConfig, artifacts?: AppCode['artifacts']): AppSpec {
  const a = config.app;
  const custom = customRuntimeOf(config);
  const env: EnvVar[] = Object.entries(a.env ?? {}).map(([name, v]) =>
    typeof v === 'string'
      ? { name, value: v }
      : {
          name,
          valueFrom: {
            secretKeyRef: defined({ name: v.secret, key: v.key, optional: v.optional }),
          },
        },
  );
  const scaling: ScalingSpec = defined(
    Object.fromEntries(
      Object.entries(SCALING_KEYS).map(([key, field]) => [
        field,
        a.scaling?.[key as keyof typeof SCALING_KEYS],
      ]),
    ),
  );
  const hw = a.hardware;
  const resources = defined({
    cpu: hw?.cpu === undefined ? undefined : String(hw.cpu),
    memory: hw?.memory,
    gpu: hw?.gpu,
  });
  return defined({
    runtime: runtimeOf(config) === 'custom' ? Runtime.Custom : Runtime.Cortex,
    pythonVersion: a.python_version,
    image: custom?.image,
    port: custom?.port,
    entrypoint: custom?.entrypoint,
    healthcheckPath: custom?.healthcheck_path,
    readinessPath: custom?.readiness_path,
    code: artifacts ? { artifacts } : undefined,
    env: env.length ? env : undefined,
    envFromSecrets: a.env_from_secrets,
    resources: nonEmpty(resources),
    scaling: nonEmpty(scaling),
    responseGracePeriodSeconds: a.scaling?.response_grace_period,
  });
}

export function appFromConfig(config: AppConfig, opts: AppFromConfigOptions = {}): App {
  return {
    apiVersion: API_VERSION,
    kind: 'App',
    metadata: defined({
      name: config.app.name,
      namespace: opts.namespace,
      labels: opts.labels,
      annotations: opts.annotations,
    }),
    spec: appSpecFromConfig(config, opts.artifacts),
  };
}

export interface ConfigFromApp {
  config: AppConfig;
  /** App fields apphost.toml has no key for (e.g. `spec.code.configMapRef`, a cortex `spec.image`). */
  unmapped: string[];
}

/** The inverse: the apphost.toml an App corresponds to (migration from app.yaml, `apphost apps get --toml`). */
export function configFromApp(app: App): ConfigFromApp {
  const s = app.spec;
  const unmapped: string[] = [];
  if (s.code?.configMapRef) unmapped.push('spec.code.configMapRef');
  if (s.code?.artifacts) unmapped.push('spec.code.artifacts');
  if (s.runtime === Runtime.Cortex && s.image) unmapped.push('spec.image');
  const env: NonNullable<AppConfig['app']['env']> = {};
  for (const e of s.env ?? []) {
    const ref = e.valueFrom?.secretKeyRef;
    if (ref) env[e.name] = defined({ secret: ref.name, key: ref.key, optional: ref.optional });
    else env[e.name] = e.value ?? '';
  }
  const sc: ScalingSpec = s.scaling ?? {};
  const scaling = defined({
    ...Object.fromEntries(Object.entries(SCALING_KEYS).map(([key, field]) => [key, sc[field]])),
    response_grace_period: s.responseGracePeriodSeconds,
  });
  const hardware = defined({ cpu: s.resources?.cpu, memory: s.resources?.memory, gpu: s.resources?.gpu });
  const custom: CustomRuntimeConfig | undefined =
    s.runtime === Runtime.Custom
      ? defined({
          image: s.image,
          port: s.port ?? 0,
          entrypoint: s.entrypoint,
          healthcheck_path: s.healthcheckPath,
          readiness_path: s.readinessPath,
        })
      : undefined;
  const pythonVersion = PYTHON_VERSIONS.find((v) => v === s.pythonVersion) as PythonVersion | undefined;
  if (s.pythonVersion && !pythonVersion) unmapped.push('spec.pythonVersion');
  return {
    config: {
      app: defined({
        name: app.metadata.name,
        runtime: custom ? { custom } : undefined,
        python_version: pythonVersion,
        env_from_secrets: s.envFromSecrets,
        scaling: nonEmpty(scaling),
        hardware: nonEmpty(hardware),
        env: nonEmpty(env),
      }),
    },
    unmapped,
  };
}
