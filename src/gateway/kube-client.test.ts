/**
 * `apphost gateway` must not load @kubernetes/client-node at run time (~30 MiB of its idle memory), nor
 * undici's index (~6 MiB; src/shared/http/undici-agent.ts), docs/benchmarks.md: a fresh Node process
 * loads every module the gateway's main.ts loads, builds the gateway's Kubernetes client from a
 * kubeconfig, and reports which of those modules it resolved.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

const exec = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), 'apphost-gw-imports-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const kubeconfig = (user: string) => `apiVersion: v1
kind: Config
current-context: x
contexts: [{name: x, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {${user}}}]
`;

/** The client-node modules (and undici's index) a process resolved loading the gateway and building its client. */
async function clientNodeModulesLoaded(kubeconfigText: string): Promise<string[]> {
  const file = join(dir, `kubeconfig-${Math.random().toString(36).slice(2)}`);
  writeFileSync(file, kubeconfigText);
  const here = import.meta.dirname;
  const script = `
    import { registerHooks } from 'node:module';
    const seen = [];
    registerHooks({
      resolve(specifier, context, next) {
        const r = next(specifier, context);
        if (r.url.includes('/@kubernetes/client-node/') || r.url.endsWith('/undici/index.js')) seen.push(r.url);
        return r;
      },
    });
    // What main.ts loads, eagerly and in serveFromCluster.
    const mods = ['main.ts', 'kube-client.ts', 'resolver/kube.ts', 'resolver/functions.ts', 'run-token-keys.ts',
      'serve.ts', '../shared/kube/cluster-domain.ts', '../shared/kube/resolv-conf.ts'];
    for (const m of mods) await import(${JSON.stringify(`${here}/`)} + m);
    const { loadGatewayKubeReader } = await import(${JSON.stringify(`${here}/kube-client.ts`)});
    const { DEFAULT_GATEWAY_KUBE_SETTINGS } = await import(${JSON.stringify(`${here}/kube-settings.ts`)});
    const { silentLogger } = await import(${JSON.stringify(`${here}/../shared/log.ts`)});
    const client = await loadGatewayKubeReader({
      kubeconfig: ${JSON.stringify(file)}, env: {}, home: undefined,
      settings: DEFAULT_GATEWAY_KUBE_SETTINGS, log: silentLogger(),
    });
    await client.close();
    process.stdout.write(JSON.stringify(seen));
  `;
  const { stdout } = await exec(process.execPath, ['--input-type=module', '-e', script], {
    timeout: 60_000,
  });
  return JSON.parse(stdout) as string[];
}

describe("the gateway's runtime module graph", () => {
  it("does not load @kubernetes/client-node nor undici's index for a kubeconfig with a token", async () => {
    expect(await clientNodeModulesLoaded(kubeconfig('token: t'))).toEqual([]);
  });

  it('loads it only for what the small loader does not do (an exec credential plugin)', async () => {
    const loaded = await clientNodeModulesLoaded(
      kubeconfig('exec: {apiVersion: client.authentication.k8s.io/v1, command: "true"}'),
    );
    expect(loaded.filter((u) => u.includes('/@kubernetes/client-node/')).length).toBeGreaterThan(0);
  });
});
