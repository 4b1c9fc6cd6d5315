/**
 * `apphost ensure-platform-key`: creates the platform key Secret when it does not exist, and never
 * changes an existing one. The plain-YAML install (manifests/) runs it as a Job, because a rendered file
 * cannot hold a generated secret; the Helm chart generates the key itself (lookup + keep).
 */
import { randomBytes } from 'node:crypto';
import { CoreV1Api } from '@kubernetes/client-node';
import { isDnsSubdomain } from '../apis/names.ts';
import { type CommandSpec, type LineIo, parseOrHelp, STDIO, UsageError } from '../shared/cli/command.ts';
import { loadKubeConfig } from '../shared/kube/config.ts';
import { isConflict } from '../shared/kube/errors.ts';

export const PLATFORM_KEY_SECRET_KEY = 'platform-key';
export const DEFAULT_PLATFORM_KEY_SECRET = 'apphost-platform-key';

/** 36 random bytes → 48 URL-safe characters. */
export function newPlatformKey(): string {
  return randomBytes(36).toString('base64url');
}

export const ENSURE_PLATFORM_KEY_SPEC: CommandSpec = {
  name: 'ensure-platform-key',
  summary:
    'Create the platform key Secret (it seals webhook secrets) when it is missing; an existing one is left unchanged.\nThe plain-YAML install runs this as a Job.',
  flags: {
    namespace: { type: 'string', value: 'NS', description: 'namespace of the Secret [POD_NAMESPACE]' },
    secret: {
      type: 'string',
      value: 'NAME',
      description: 'Secret name',
      default: DEFAULT_PLATFORM_KEY_SECRET,
    },
    kubeconfig: {
      type: 'string',
      value: 'FILE',
      description: 'kubeconfig [KUBECONFIG] (default: in-cluster)',
    },
  },
  settings: [
    { name: 'POD_NAMESPACE', description: 'default for --namespace' },
    { name: 'KUBECONFIG', description: 'kubeconfig file' },
  ],
  examples: ['apphost ensure-platform-key --namespace apphost-system'],
};

export async function runEnsurePlatformKeyCommand(
  argv: string[],
  env: NodeJS.ProcessEnv,
  io: LineIo = STDIO,
): Promise<number> {
  const parsed = parseOrHelp(ENSURE_PLATFORM_KEY_SPEC, argv, io);
  if (!parsed) return 0;
  const values = parsed.values as { namespace?: string; secret?: string; kubeconfig?: string };
  const namespace = values.namespace ?? env.POD_NAMESPACE;
  if (!namespace) throw new UsageError('--namespace is required (or POD_NAMESPACE)');
  const name = values.secret ?? DEFAULT_PLATFORM_KEY_SECRET;
  if (!isDnsSubdomain(name) || !isDnsSubdomain(namespace))
    throw new UsageError('--secret and --namespace must be DNS names');

  const kc = loadKubeConfig(values.kubeconfig ?? env.KUBECONFIG);
  const core = kc.makeApiClient(CoreV1Api);
  try {
    await core.createNamespacedSecret({
      namespace,
      body: {
        metadata: {
          name,
          namespace,
          labels: { 'app.kubernetes.io/part-of': 'apphost', 'app.kubernetes.io/component': 'platform-key' },
        },
        type: 'Opaque',
        stringData: { [PLATFORM_KEY_SECRET_KEY]: newPlatformKey() },
      },
    });
    io.out(`created Secret ${namespace}/${name}`);
  } catch (err) {
    if (!isConflict(err)) {
      io.err(
        `apphost ensure-platform-key: cannot create Secret ${namespace}/${name}: ${(err as Error).message}`,
      );
      return 1;
    }
    io.out(`Secret ${namespace}/${name} exists; left unchanged`);
  }
  return 0;
}
