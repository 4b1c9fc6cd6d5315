import { describe, expect, it } from 'vitest';
import type { App } from '../../apis/v1alpha1/types.ts';
import type { Deployment, KubeObject, Pod, Service } from '../../shared/kube/objects.ts';
import { Resources } from '../../shared/kube/objects.ts';
import { createFakeKubeClient } from '../../shared/kube/testing/fake-kube-client.ts';
import { silentLogger } from '../../shared/log.ts';
import { createFakeEventRecorder } from '../runtime/testing/fake-events.ts';
import { appliedMessage, createAppReconciler } from './reconciler.ts';
import { makeDeployment } from './resources/deployment.ts';
import { appUrl } from './resources/labels.ts';
import { makeService } from './resources/service.ts';
import { computeAppStatus } from './status.ts';

const settings = {
  runtimeImage: 'runtime:1',
  terminationGraceMarginSeconds: 10,
  appStartupTimeoutSeconds: 300,
};
const NOW = Date.parse('2026-01-01T00:00:00Z');
const clock = { now: () => NOW, sleep: async () => {} };

function app(opts: { deleting?: boolean; image?: string } = {}): App {
  return {
    apiVersion: 'apphost.dev/v1alpha1',
    kind: 'App',
    metadata: {
      name: 'hello',
      namespace: 'p1',
      uid: 'uid-1',
      generation: 3,
      resourceVersion: '10',
      ...(opts.deleting ? { deletionTimestamp: '2026-01-01T00:00:00Z' } : {}),
    },
    spec: { runtime: 'cortex', image: opts.image ?? 'hello:1' },
  };
}

const readyDeployment = (a: App): Deployment => {
  const d = makeDeployment(a, settings);
  return {
    ...d,
    metadata: { ...d.metadata, generation: 1 },
    status: {
      observedGeneration: 1,
      replicas: 1,
      updatedReplicas: 1,
      readyReplicas: 1,
      availableReplicas: 1,
    },
  };
};

interface Row {
  name: string;
  app: App | undefined;
  deployment?: Deployment;
  service?: Service;
  pods?: Pod[];
  fail?: [verb: string, resource: string];
  wantWrites: string[];
  wantEvents?: string[];
  wantReady?: { status: string; reason: string; message?: string };
  /** status.url after the reconcile (null: not published). */
  wantUrl?: string | null;
  wantErr?: RegExp;
}

/** A pod of the App as the kubelet reports it after the runtime failed to import main.py. */
const crashingPod: Pod = {
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name: 'hello-abc', namespace: 'p1', labels: { 'apphost.dev/app': 'hello' } },
  spec: { containers: [{ name: 'app', image: 'hello:1' }] },
  status: {
    phase: 'Running',
    containerStatuses: [
      {
        name: 'app',
        image: 'hello:1',
        imageID: '',
        ready: false,
        restartCount: 1,
        state: { waiting: { reason: 'CrashLoopBackOff' } },
        lastState: { terminated: { exitCode: 1, message: 'SyntaxError: invalid syntax' } },
      },
    ],
  },
};

const steady = (() => {
  const a = app();
  const dep = readyDeployment(a);
  a.status = computeAppStatus(a, { deployment: dep, url: appUrl(a), now: '2025-12-31T00:00:00Z' });
  return a;
})();

const table: Row[] = [
  {
    name: 'first reconcile creates the Deployment and Service and reports status',
    app: app(),
    wantWrites: ['apply deployments hello', 'apply services hello', 'patch-status apps hello'],
    // One Event for both objects: a new App costs one Event write, not two.
    wantEvents: ['Normal Applied created Deployment hello and Service hello'],
    wantReady: { status: 'False', reason: 'RolloutInProgress' },
    wantUrl: null,
  },
  {
    name: 'a crashing pod is named in Ready (and an Event), and no URL is published',
    app: app(),
    deployment: (() => {
      const d = readyDeployment(app());
      d.status = { observedGeneration: 1, replicas: 1, updatedReplicas: 1, unavailableReplicas: 1 };
      return d;
    })(),
    service: makeService(app()),
    pods: [crashingPod],
    wantWrites: ['patch-status apps hello'],
    wantEvents: ['Warning CrashLoopBackOff container "app" exited with code 1: SyntaxError: invalid syntax'],
    wantReady: {
      status: 'False',
      reason: 'CrashLoopBackOff',
      message: 'container "app" exited with code 1: SyntaxError: invalid syntax',
    },
    wantUrl: null,
  },
  {
    name: 'a pod cause already reported is neither written nor recorded again',
    app: (() => {
      const a = app();
      const d = readyDeployment(a);
      d.status = { observedGeneration: 1, replicas: 1, updatedReplicas: 1, unavailableReplicas: 1 };
      a.status = computeAppStatus(a, { deployment: d, pods: [crashingPod], url: appUrl(a), now: 't0' });
      return a;
    })(),
    deployment: (() => {
      const d = readyDeployment(app());
      d.status = { observedGeneration: 1, replicas: 1, updatedReplicas: 1, unavailableReplicas: 1 };
      return d;
    })(),
    service: makeService(app()),
    pods: [crashingPod],
    wantWrites: [],
    wantEvents: [],
  },
  {
    name: 'the first Ready publishes the URL',
    app: app(),
    deployment: readyDeployment(app()),
    service: makeService(app()),
    wantWrites: ['patch-status apps hello'],
    wantReady: { status: 'True', reason: 'Ready' },
    wantUrl: 'http://hello.p1.svc.cluster.local',
  },
  {
    name: 'an App that has been Ready keeps its URL while a new rollout fails',
    app: steady,
    deployment: (() => {
      const d = readyDeployment(steady);
      d.status = { ...d.status, updatedReplicas: 0, replicas: 2 };
      return d;
    })(),
    service: makeService(steady),
    pods: [crashingPod],
    wantWrites: ['patch-status apps hello'],
    wantReady: { status: 'False', reason: 'CrashLoopBackOff' },
    wantUrl: 'http://hello.p1.svc.cluster.local',
  },
  {
    name: 'a steady App makes no writes',
    app: steady,
    deployment: readyDeployment(steady),
    service: makeService(steady),
    wantWrites: [],
    wantEvents: [],
  },
  {
    name: 'drift in the Deployment is re-applied; the Service is left alone',
    app: steady,
    deployment: (() => {
      const d = readyDeployment(steady);
      d.spec.template.spec!.containers[0]!.image = 'someone-else:2';
      return d;
    })(),
    service: makeService(steady),
    wantWrites: ['apply deployments hello'],
    wantEvents: ['Normal Applied updated Deployment hello'],
  },
  {
    name: 'a changed spec is applied and status follows the new generation',
    app: {
      ...steady,
      metadata: { ...steady.metadata, generation: 4 },
      spec: { ...steady.spec, image: 'hello:2' },
    },
    deployment: readyDeployment(steady),
    service: makeService(steady),
    wantWrites: ['apply deployments hello', 'patch-status apps hello'],
  },
  {
    name: 'a Deployment of the same name that is not ours is left alone and reported',
    app: app(),
    deployment: {
      ...readyDeployment(app()),
      metadata: { name: 'hello', namespace: 'p1', ownerReferences: [] },
    },
    wantWrites: ['patch-status apps hello'],
    wantEvents: [
      expect.stringMatching(
        /^Warning NameConflict a Deployment named "hello" already exists/,
      ) as unknown as string,
    ],
    wantReady: { status: 'False', reason: 'NameConflict' },
    wantErr: /not managed by this App/,
  },
  {
    name: 'an apply failure is reported and retried',
    app: app(),
    fail: ['apply', 'deployments'],
    // The Service does not depend on the Deployment and is still applied.
    wantWrites: ['apply services hello', 'patch-status apps hello'],
    wantEvents: [
      'Normal Applied created Service hello',
      expect.stringMatching(/^Warning ApplyFailed .*injected failure/) as unknown as string,
    ],
    wantReady: { status: 'False', reason: 'ReconcileFailed' },
    wantErr: /injected failure/,
  },
  { name: 'a missing App is nothing to do', app: undefined, wantWrites: [] },
  {
    name: 'an App being deleted is left to the garbage collector',
    app: app({ deleting: true }),
    wantWrites: [],
  },
];

describe('App reconciler', () => {
  it.each(table)('$name', async (row) => {
    const client = createFakeKubeClient();
    const events = createFakeEventRecorder();
    if (row.app) client.seed(Resources.App, row.app as unknown as KubeObject);
    if (row.deployment) client.seed(Resources.Deployment, row.deployment);
    if (row.service) client.seed(Resources.Service, row.service);
    if (row.fail) client.failOn(...row.fail);
    const reconcile = createAppReconciler({
      apps: { get: () => row.app },
      deployments: { get: () => row.deployment },
      services: { get: () => row.service },
      pods: { forApp: () => row.pods ?? [] },
      client,
      events,
      settings,
      clock,
      log: silentLogger(),
    });
    const run = reconcile('p1/hello');
    if (row.wantErr) await expect(run).rejects.toThrow(row.wantErr);
    else await run;
    expect(client.writes.map((w) => `${w.verb} ${w.resource} ${w.name}`)).toEqual(row.wantWrites);
    if (row.wantEvents) {
      expect(events.events.map((e) => `${e.type} ${e.reason} ${e.message}`)).toEqual(row.wantEvents);
    }
    const status = client.writes.find((w) => w.verb === 'patch-status')?.body as
      | { status: { url?: string; conditions: Array<{ type: string; status: string; reason: string }> } }
      | undefined;
    if (row.wantReady) {
      expect(status?.status.conditions.find((c) => c.type === 'Ready')).toMatchObject(row.wantReady);
    }
    if (row.wantUrl !== undefined) expect(status?.status.url ?? null).toBe(row.wantUrl);
  });

  it('names every applied object in one Applied message, grouped by what was done', () => {
    expect(appliedMessage([{ verb: 'updated', what: 'Deployment hello' }])).toBe('updated Deployment hello');
    expect(
      appliedMessage([
        { verb: 'updated', what: 'Deployment hello' },
        { verb: 'created', what: 'Service hello' },
      ]),
    ).toBe('created Service hello; updated Deployment hello');
  });

  it('keeps lastTransitionTime when Ready does not flip', () => {
    const a = app();
    const first = computeAppStatus(a, { deployment: undefined, url: 'u', now: 't1' });
    const again = computeAppStatus({ ...a, status: first }, { deployment: undefined, url: 'u', now: 't2' });
    expect(again.conditions?.[0]?.lastTransitionTime).toBe('t1');
    const flipped = computeAppStatus(
      { ...a, status: first },
      { deployment: readyDeployment(a), url: 'u', now: 't3' },
    );
    expect(flipped.conditions?.[0]).toMatchObject({ status: 'True', lastTransitionTime: 't3' });
  });

  it.each([
    [
      'a stuck rollout',
      {
        conditions: [
          {
            type: 'Progressing',
            status: 'False',
            reason: 'ProgressDeadlineExceeded',
            message: 'ReplicaSet "x" has timed out progressing.',
          },
        ],
      },
      {
        status: 'False',
        reason: 'ProgressDeadlineExceeded',
        message: 'rollout is stuck: ReplicaSet "x" has timed out progressing.',
      },
    ],
    [
      'replicas that cannot be created',
      {
        conditions: [
          { type: 'ReplicaFailure', status: 'True', reason: 'FailedCreate', message: 'exceeded quota' },
        ],
      },
      { status: 'False', reason: 'ReplicaFailure', message: 'pods cannot be created: exceeded quota' },
    ],
    [
      'a rollout in progress',
      { observedGeneration: 1, replicas: 2, updatedReplicas: 1, readyReplicas: 1, availableReplicas: 1 },
      { status: 'False', reason: 'RolloutInProgress', message: '1 of 1 replicas ready (1 updated, 2 total)' },
    ],
  ])('explains %s in Ready', (_n, depStatus, want) => {
    const d = { ...makeDeployment(app(), settings), status: depStatus } as Deployment;
    d.metadata.generation = 1;
    expect(computeAppStatus(app(), { deployment: d, url: 'u', now: 't' }).conditions?.[0]).toMatchObject(
      want,
    );
  });
});
