/**
 * What a user of the installed platform does, the way the README and docs/install.md tell it: a
 * service-account token from the CLI inside the management pod, run tokens from {base_url}, Apps whose
 * code comes from a ConfigMap, calls to {api_url} — all through the ingress.
 */
import { join } from 'node:path';
import { expect } from 'vitest';
import { waitFor } from '../harness/process.ts';
import {
  API_HOST,
  ingressRequest,
  kubectl,
  kubectlApply,
  MANAGEMENT_HOST,
  PLATFORM_NAMESPACE,
} from './fixture.ts';
import { REPO } from './platform.ts';

/** Bound on an App becoming Ready and answering through the ingress (image present). */
export const APP_READY_TIMEOUT_MS = 120_000;

/** A service-account token, made as docs/install.md says: the CLI inside the management pod. */
export async function serviceAccountToken(project: string, name = 'e2e'): Promise<string> {
  const out = await kubectl(
    '-n',
    PLATFORM_NAMESPACE,
    'exec',
    'deploy/apphost-management',
    '--',
    'node',
    'dist/cli/main.js',
    'create-service-account',
    '--project',
    project,
    '--name',
    name,
    '--expires',
    new Date(Date.now() + 2 * 86_400_000).toISOString().slice(0, 10),
  );
  return JSON.parse(out.trim().split('\n').at(-1) as string).token;
}

/** A call to the management API ({base_url}) through the ingress; returns status and parsed body. */
export async function management(
  saToken: string,
  method: 'GET' | 'POST' | 'PUT' | 'DELETE',
  path: string,
  body?: unknown,
): Promise<{ status: number; body: unknown; text: string }> {
  const res = await ingressRequest(MANAGEMENT_HOST, path, {
    method,
    headers: { authorization: `Bearer ${saToken}`, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.body.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: res.statusCode, body: parsed, text };
}

export async function runToken(project: string, saToken: string): Promise<string> {
  const r = await management(saToken, 'POST', `/v2/projects/${project}/run-tokens`, {
    expires_at: new Date(Date.now() + 86_400_000).toISOString(),
  });
  expect(r.status, r.text).toBe(201);
  return (r.body as { token: string }).token;
}

/** An App running examples/apps/<example>/main.py from a ConfigMap, as the README's "Cluster install" shows. */
export async function deployConfigMapApp(
  project: string,
  name: string,
  example: string,
  spec: Record<string, unknown> = {},
): Promise<void> {
  await kubectl(
    '-n',
    project,
    'create',
    'configmap',
    `${name}-code`,
    `--from-file=main.py=${join(REPO, 'examples', 'apps', example, 'main.py')}`,
  );
  await kubectlApply(
    project,
    JSON.stringify({
      apiVersion: 'apphost.dev/v1alpha1',
      kind: 'App',
      metadata: { name },
      spec: { runtime: 'cortex', code: { configMapRef: { name: `${name}-code` } }, ...spec },
    }),
  );
  await kubectl(
    '-n',
    project,
    'wait',
    '--for=condition=Ready',
    `app/${name}`,
    `--timeout=${APP_READY_TIMEOUT_MS / 1000}s`,
  );
}

/** POST {api_url}/v4/<project>/<app>/<fn> through the ingress. */
export async function call(
  token: string,
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
  host = API_HOST,
) {
  return ingressRequest(host, path, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
}

/** Calls until the first 200 (an App just Ready may still be settling behind its Service); returns the body. */
export async function firstOk(token: string, path: string, body: unknown): Promise<string> {
  let last = '';
  await waitFor(
    `200 from ${path} through the ingress`,
    async () => {
      const res = await call(token, path, body);
      last = `${res.statusCode} ${await res.body.text()}`;
      return res.statusCode === 200;
    },
    APP_READY_TIMEOUT_MS,
    250,
  ).catch((err) => {
    throw new Error(`${err}; last answer ${last}`);
  });
  return last.slice(4);
}
