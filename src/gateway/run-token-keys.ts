/**
 * Where the gateway gets the run-token key set it verifies tokens with. In a cluster: the Secret the
 * management API creates, watched through the API (RBAC: that one Secret, by name), so a fresh install
 * and a rotation reach the gateway within a second instead of the kubelet's Secret-volume sync (about a
 * minute). In `apphost dev` and tests: a JSON file, re-read on an interval. Either way the gateway starts
 * without a key set and is not ready until it has one; a later unreadable version keeps the previous set.
 */
import type { KubeReader } from '../shared/kube/client.ts';
import { createInformer } from '../shared/kube/informer.ts';
import { Resources, type Secret } from '../shared/kube/objects.ts';
import type { Logger } from '../shared/log.ts';
import {
  type KeySet,
  parseKeySet,
  RUN_TOKEN_KEYS_SECRET,
  RUN_TOKEN_KEYS_SECRET_KEY,
} from '../shared/run-tokens.ts';
import {
  DEFAULT_GATEWAY_KUBE_SETTINGS,
  type GatewayKubeSettings,
  gatewayInformerSettings,
} from './kube-settings.ts';
import type { KeySetSource } from './run-token-key-file.ts';

export { type KeySetSource, RUN_TOKEN_KEYS_WAIT_POLL_MS, watchKeySetFile } from './run-token-key-file.ts';

/**
 * Watches the Secret `apphost-run-token-keys` in `namespace` (a list+watch narrowed to its name, which
 * RBAC authorizes by resourceNames). Starts in the background: a failing watch is retried with backoff.
 */
export function watchKeySetSecret(opts: {
  /** The API client (the gateway's: kube-client.ts). */
  client: KubeReader;
  namespace: string;
  log: Logger;
  /** Informer bounds (default DEFAULT_GATEWAY_KUBE_SETTINGS). */
  settings?: GatewayKubeSettings;
}): KeySetSource {
  const { client, namespace, log } = opts;
  const s = opts.settings ?? DEFAULT_GATEWAY_KUBE_SETTINGS;
  const where = `secret ${namespace}/${RUN_TOKEN_KEYS_SECRET}`;
  let keys: KeySet | undefined;
  const take = (secret: Secret) => {
    try {
      const data = secret.data?.[RUN_TOKEN_KEYS_SECRET_KEY];
      if (!data) throw new Error(`${where}: no key ${RUN_TOKEN_KEYS_SECRET_KEY}`);
      const had = keys !== undefined;
      keys = parseKeySet(Buffer.from(data, 'base64').toString('utf8'), where);
      log.info(
        { secret: where, kids: keys.keys.map((k) => k.kid) },
        had ? 'run-token key set updated' : 'run-token key set loaded',
      );
    } catch (err) {
      log.warn(
        { err },
        keys ? 'unreadable run-token key set; keeping the previous one' : 'unreadable run-token key set',
      );
    }
  };
  const informer = createInformer<Secret>({
    client,
    type: Resources.Secret,
    namespace,
    fieldSelector: `metadata.name=${RUN_TOKEN_KEYS_SECRET}`,
    settings: gatewayInformerSettings(s),
    log,
    handlers: {
      onAdd: take,
      onUpdate: take,
      onDelete: () => {
        if (keys)
          log.warn({ secret: where }, 'the run-token key Secret was deleted; keeping the key set it held');
      },
    },
  });
  log.info({ secret: where }, 'waiting for the run-token key set');
  informer.start();
  return {
    current: () => keys,
    stop: () => informer.stop(),
  };
}
