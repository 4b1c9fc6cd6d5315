/**
 * Where the gateway gets the run-token key set it verifies tokens with. In a cluster: the Secret the
 * management API creates, watched through the API (RBAC: that one Secret, by name), so a fresh install
 * and a rotation reach the gateway within a second instead of the kubelet's Secret-volume sync (about a
 * minute). In `apphost dev` and tests: a JSON file, re-read on an interval. Either way the gateway starts
 * without a key set and is not ready until it has one; a later unreadable version keeps the previous set.
 */
import { CoreV1Api, type KubeConfig, ListWatch, type V1Secret, Watch } from '@kubernetes/client-node';
import { restartOnError } from '../shared/kube/informer-restart.ts';
import type { Logger } from '../shared/log.ts';
import {
  type KeySet,
  parseKeySet,
  RUN_TOKEN_KEYS_SECRET,
  RUN_TOKEN_KEYS_SECRET_KEY,
} from '../shared/run-tokens.ts';

import type { KeySetSource } from './run-token-key-file.ts';

export { type KeySetSource, RUN_TOKEN_KEYS_WAIT_POLL_MS, watchKeySetFile } from './run-token-key-file.ts';

/**
 * Watches the Secret `apphost-run-token-keys` in `namespace` (a list+watch narrowed to its name, which
 * RBAC authorizes by resourceNames). Starts in the background: a failing watch is restarted.
 */
export function watchKeySetSecret(opts: { kc: KubeConfig; namespace: string; log: Logger }): KeySetSource {
  const { kc, namespace, log } = opts;
  const core = kc.makeApiClient(CoreV1Api);
  const fieldSelector = `metadata.name=${RUN_TOKEN_KEYS_SECRET}`;
  const where = `secret ${namespace}/${RUN_TOKEN_KEYS_SECRET}`;
  const informer = new ListWatch<V1Secret>(
    `/api/v1/namespaces/${namespace}/secrets`,
    new Watch(kc),
    () => core.listNamespacedSecret({ namespace, fieldSelector }),
    false,
    undefined,
    fieldSelector,
  );
  let keys: KeySet | undefined;
  const take = (secret: V1Secret) => {
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
  informer.on('add', take);
  informer.on('update', take);
  informer.on('delete', () => {
    if (keys)
      log.warn({ secret: where }, 'the run-token key Secret was deleted; keeping the key set it held');
  });
  let stopped = false;
  restartOnError(informer, { name: where, log, stopped: () => stopped });
  log.info({ secret: where }, 'waiting for the run-token key set');
  informer.start().catch((err) => log.error({ err, secret: where }, 'run-token key watch did not start'));
  return {
    current: () => keys,
    async stop() {
      stopped = true;
      await informer.stop();
    },
  };
}
