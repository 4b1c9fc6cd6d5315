import { afterAll, beforeAll } from 'vitest';
import { createAppLogs } from '../../../src/local/app-logs.ts';
import { createServiceAccount } from '../../../src/management/service-accounts.ts';
import { createMemoryStore } from '../../../src/management/store/memory.ts';
import { type ApiEnv, apiSuite, seedRuns } from './api-contract.ts';
import { conformanceSuite } from './conformance.ts';
import { memoryDeliveries, memoryRuns } from './fixtures.ts';
import { startApi } from './server.ts';

let env: ApiEnv;
beforeAll(async () => {
  const store = createMemoryStore({ projects: { alpha: ['hello'], beta: ['hello'] } });
  const seeded = seedRuns('alpha', 'hello');
  const api = await startApi({
    store,
    runs: memoryRuns(seeded.runs),
    deliveries: memoryDeliveries(seeded.deliveries),
    logs: createAppLogs('alpha'),
  });
  const far = new Date('2099-01-01T00:00:00Z');
  env = {
    api,
    store,
    projectId: 'alpha',
    otherProjectId: 'beta',
    appName: 'hello',
    token: (await createServiceAccount(store, 'alpha', 'admin', far)).token,
    otherToken: (await createServiceAccount(store, 'beta', 'admin', far)).token,
    runs: seeded.runs,
    deliveries: seeded.deliveries,
    rawAssignedApp: async (d) => (await store.getDomain('alpha', d))?.appName,
    authCacheSeconds: 3,
  };
});
afterAll(async () => {
  await env?.api.close();
});

apiSuite('memory store', () => env);
conformanceSuite('memory store', () => env);
