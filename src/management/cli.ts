/**
 * Bootstrap commands for an operator with a kubeconfig (no service-account token exists yet):
 *   apphost create-service-account --project P --name N --expires 2027-01-01 [--kubeconfig FILE]
 *   apphost rotate-run-token-keys [--namespace apphost-system] [--kubeconfig FILE]
 */
import { type CommandSpec, type LineIo, parseOrHelp, STDIO, UsageError } from '../shared/cli/command.ts';
import { ApiError } from '../shared/errors.ts';
import { loadKubeConfig } from '../shared/kube/config.ts';
import { DEFAULT_SETTINGS } from './context.ts';
import { createServiceAccount } from './service-accounts.ts';
import { createKubeStore } from './store/kube.ts';
import { expiry, projectId as projectIdSchema, serviceAccountName, toDate } from './validation.ts';

const DEFAULT_KEYS_NAMESPACE = 'apphost-system';

/** The same cap the API applies (APPHOST_MANAGEMENT_MAX_SERVICE_ACCOUNT_DAYS), so the CLI is no way round it. */
function maxServiceAccountDays(env: NodeJS.ProcessEnv): number {
  const raw = env.APPHOST_MANAGEMENT_MAX_SERVICE_ACCOUNT_DAYS;
  if (raw === undefined || raw === '') return DEFAULT_SETTINGS.maxServiceAccountDays;
  const days = Number(raw);
  if (!Number.isInteger(days) || days < 1)
    throw new UsageError('APPHOST_MANAGEMENT_MAX_SERVICE_ACCOUNT_DAYS must be a whole number of days ≥ 1');
  return days;
}

function check<T>(
  schema: { safeParse(v: unknown): { success: true; data: T } | { success: false } },
  v: unknown,
  flag: string,
  hint: string,
): T {
  const r = schema.safeParse(v);
  if (!r.success) throw new UsageError(`--${flag}: ${hint}`);
  return r.data;
}

const KUBE_FLAGS = {
  kubeconfig: { type: 'string', value: 'FILE', description: 'kubeconfig [KUBECONFIG] (default: in-cluster)' },
} as const;

export const CREATE_SERVICE_ACCOUNT_SPEC: CommandSpec = {
  name: 'create-service-account',
  summary:
    "Create a service account with your kubeconfig (the first one: no token exists yet) and print its token as JSON.\nWith a token, 'apphost tokens create' does the same through the API.",
  flags: {
    project: {
      type: 'string',
      value: 'ID',
      description: 'the project (a namespace labelled apphost.dev/project)',
    },
    name: { type: 'string', value: 'NAME', description: 'DNS label of at most 52 characters' },
    expires: { type: 'string', value: 'DATE', description: 'expiry: a date (2027-01-01) or RFC 3339 time' },
    ...KUBE_FLAGS,
  },
  settings: [
    { name: 'KUBECONFIG', description: 'kubeconfig file' },
    { name: 'APPHOST_RUN_TOKEN_KEYS_NAMESPACE', description: 'namespace of the platform (apphost-system)' },
  ],
  examples: ['apphost create-service-account --project shop --name ci --expires 2027-01-01'],
};

export const ROTATE_RUN_TOKEN_KEYS_SPEC: CommandSpec = {
  name: 'rotate-run-token-keys',
  summary:
    'Put a fresh run-token signing key in front of the key set; earlier tokens stay valid until they expire.\nPrints the key ids as JSON.',
  flags: {
    namespace: {
      type: 'string',
      value: 'NS',
      description: 'namespace of the key Secret [APPHOST_RUN_TOKEN_KEYS_NAMESPACE]',
      default: DEFAULT_KEYS_NAMESPACE,
    },
    ...KUBE_FLAGS,
  },
  settings: [
    { name: 'KUBECONFIG', description: 'kubeconfig file' },
    { name: 'APPHOST_RUN_TOKEN_KEYS_NAMESPACE', description: 'default for --namespace' },
  ],
  examples: ['apphost rotate-run-token-keys --namespace apphost-system'],
};

const str = (v: string | boolean | undefined) => (typeof v === 'string' ? v : undefined);

/** Prints `{"project_id","name","expires_at","token"}` on stdout; returns the exit code. */
export async function runCreateServiceAccountCommand(
  argv: string[],
  env: NodeJS.ProcessEnv,
  io: LineIo = STDIO,
): Promise<number> {
  const parsed = parseOrHelp(CREATE_SERVICE_ACCOUNT_SPEC, argv, io);
  if (!parsed) return 0;
  const { values } = parsed;
  const project = check(projectIdSchema, values.project, 'project', 'required, a project id (DNS label)');
  const name = check(
    serviceAccountName,
    values.name,
    'name',
    'required, a DNS label of at most 52 characters',
  );
  const expires = check(
    expiry,
    values.expires,
    'expires',
    'required, a date (2027-01-01) or RFC 3339 date-time',
  );
  const kc = loadKubeConfig(str(values.kubeconfig) ?? env.KUBECONFIG);
  const store = createKubeStore(kc, {
    keysNamespace: env.APPHOST_RUN_TOKEN_KEYS_NAMESPACE ?? DEFAULT_KEYS_NAMESPACE,
  });
  try {
    const { account, token } = await createServiceAccount(store, project, name, toDate(expires), new Date(), {
      maxDays: maxServiceAccountDays(env),
    });
    io.out(JSON.stringify({ project_id: project, name: account.name, expires_at: account.expiresAt, token }));
    io.err(`service account ${name} created in project ${project}; the token above is shown only once`);
    return 0;
  } catch (err) {
    if (err instanceof ApiError) {
      io.err(`apphost create-service-account: ${err.message}`);
      return 1;
    }
    throw err;
  }
}

/** Puts a fresh signing key in front of the run-token key set; earlier tokens stay valid until they expire. */
export async function runRotateRunTokenKeysCommand(
  argv: string[],
  env: NodeJS.ProcessEnv,
  io: LineIo = STDIO,
): Promise<number> {
  const parsed = parseOrHelp(ROTATE_RUN_TOKEN_KEYS_SPEC, argv, io);
  if (!parsed) return 0;
  const { values } = parsed;
  const kc = loadKubeConfig(str(values.kubeconfig) ?? env.KUBECONFIG);
  const store = createKubeStore(kc, {
    keysNamespace: str(values.namespace) ?? env.APPHOST_RUN_TOKEN_KEYS_NAMESPACE ?? DEFAULT_KEYS_NAMESPACE,
  });
  const set = await store.rotateRunTokenKeys();
  io.out(JSON.stringify({ kids: set.keys.map((k) => k.kid) }));
  return 0;
}
