/**
 * Write a function, deploy it, call it — in local mode, as a person does it: `apphost init`, edit,
 * `apphost deploy` with a pip dependency (a wheel made here, installed from a local folder: no network),
 * call the function that imports it, then deploy a change and see the new answer with no failed call
 * during the switch. Every command is the real CLI as a child process against `apphost dev`.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeWheel } from '../harness/wheel.ts';
import { type DevProcess, REPO, startDevProcess } from './dev-process.ts';

/** Bound on one CLI invocation (generous: a dependency build runs pip on a shared machine). */
const CLI_TIMEOUT_MS = 180_000;
const MAIN = join(REPO, 'src', 'cli', 'main.ts');
const PYTHON = join(REPO, 'runtime', 'python', '.venv', 'bin', 'python');

let dir: string;
let dev: DevProcess;
let configFile: string;

function cliEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('APPHOST_')) env[k] = v;
  return { ...env, APPHOST_CONFIG: configFile };
}

function cli(args: string[], cwd: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child: ChildProcess = spawn(process.execPath, [MAIN, ...args], {
    cwd,
    env: cliEnv(),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr?.on('data', (c: Buffer) => (stderr += c.toString()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(
        new Error(
          `apphost ${args.join(' ')} did not finish within ${CLI_TIMEOUT_MS} ms:\n${stdout}\n${stderr}`,
        ),
      );
    }, CLI_TIMEOUT_MS);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

const lastLine = (s: string) => s.trimEnd().split('\n').at(-1) ?? '';

async function call(fn = 'run'): Promise<{ status: number; body: string }> {
  const res = await fetch(`${dev.creds.api_url}/v4/${dev.creds.project_id}/shop/${fn}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${dev.creds.run_token}`, 'content-type': 'application/json' },
    body: '{"name": "you"}',
    signal: AbortSignal.timeout(30_000),
  });
  return { status: res.status, body: await res.text() };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'apphost-e2e-deploy-'));
  const apps = join(dir, 'apps');
  mkdirSync(apps);
  // The dependency: a wheel in a local folder that pip is pointed at, and no package index at all.
  const wheels = join(dir, 'wheels');
  makeWheel(PYTHON, wheels, 'greetlib', '1.0.0', 'def greet(name):\n    return f"greetings, {name}"\n');
  const stateDir = join(dir, 'state');
  configFile = join(stateDir, 'cli-config.json');
  dev = await startDevProcess({
    appsDir: apps,
    stateDir,
    credentialsFile: join(dir, 'credentials.json'),
    env: { PIP_NO_INDEX: '1', PIP_FIND_LINKS: wheels, PIP_CONFIG_FILE: '/dev/null' },
  });
}, 240_000);

afterAll(async () => {
  if (dev && (await dev.stop()) === 'timeout') dev.kill();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('apphost init → deploy → call → deploy a change (local mode, e2e)', () => {
  let app: string;

  it('init scaffolds a folder that deploy accepts as it is', async () => {
    const r = await cli(['init', 'shop'], dir);
    expect(r.code, r.stderr).toBe(0);
    app = join(dir, 'shop');
    expect(readFileSync(join(app, 'apphost.toml'), 'utf8')).toMatch(/^name = "shop"$/m);
    expect(readFileSync(join(app, 'main.py'), 'utf8')).toMatch(/^def run\(/m);
    expect(readFileSync(join(app, '.gitignore'), 'utf8')).toContain('__pycache__/');
    expect(r.stdout).toContain('next: cd shop && apphost deploy');
  });

  it('deploys the edited app with a pip dependency; the function that imports it answers', async () => {
    writeFileSync(
      join(app, 'main.py'),
      'import greetlib\n\n\ndef run(name: str = "world") -> dict:\n    return {"message": greetlib.greet(name), "version": 1}\n',
    );
    writeFileSync(join(app, 'requirements.txt'), 'greetlib==1.0.0\n');
    const r = await cli(['deploy'], app);
    expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(0);
    expect(lastLine(r.stdout)).toMatch(/^deployed shop: build [a-z0-9]+ is ready$/);
    expect(r.stdout).toContain(`url:  ${dev.creds.api_url}/v4/${dev.creds.project_id}/shop`);
    expect(r.stdout).toMatch(/curl: curl -X POST '.*\/shop\/run'/);
    // The build log streamed: pip installed the wheel from the local folder.
    expect(r.stderr).toMatch(/upload: .* sent/);
    expect(r.stderr).toMatch(/Successfully installed greetlib-1\.0\.0/);
    const answer = await call();
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body)).toEqual({ message: 'greetings, you', version: 1 });
  });

  it('deploys a change: the new answer comes, and no call fails during the switch', async () => {
    writeFileSync(
      join(app, 'main.py'),
      'import greetlib\n\n\ndef run(name: str = "world") -> dict:\n    return {"message": greetlib.greet(name), "version": 2}\n',
    );
    const results: Array<{ status: number; body: string }> = [];
    let calling = true;
    const caller = (async () => {
      while (calling) results.push(await call().catch((err: Error) => ({ status: 0, body: err.message })));
    })();
    const r = await cli(['deploy'], app);
    // Keep calling a little after the switch, while the old process drains.
    const after = results.length;
    while (results.length < after + 20) await new Promise((res) => setTimeout(res, 50));
    calling = false;
    await caller;
    expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(0);
    expect(lastLine(r.stdout)).toMatch(/^deployed shop: build [a-z0-9]+ is ready$/);
    // Same requirements and wheel: the dependency set was reused.
    expect(r.stderr).toMatch(/reusing the set built before/);
    const failed = results.filter((x) => x.status !== 200);
    expect(failed).toEqual([]);
    const versions = results.map((x) => (JSON.parse(x.body) as { version: number }).version);
    expect(versions[0]).toBe(1);
    expect(versions.at(-1)).toBe(2);
    // Never back to the old version once the new one answered.
    expect(versions.slice(versions.indexOf(2)).every((v) => v === 2)).toBe(true);
  });

  it("a change that fails (a missing dependency) fails the deploy with pip's error; the app keeps answering", async () => {
    writeFileSync(join(app, 'requirements.txt'), 'greetlib==1.0.0\nnot-there==3.0\n');
    const r = await cli(['deploy'], app);
    expect(r.code).toBe(1);
    expect(lastLine(r.stdout)).toMatch(/^failed shop: build [a-z0-9]+ pip_failed: pip install failed/);
    expect(r.stderr).toMatch(/ERROR: .*not-there/);
    expect(JSON.parse((await call()).body)).toMatchObject({ version: 2 });
  });

  it('apps list and get show the app and the build that runs; apps delete removes it', async () => {
    const list = await cli(['apps', 'list', '--json'], app);
    expect(list.code).toBe(0);
    const apps = (
      JSON.parse(list.stdout) as { apps: Array<{ name: string; ready: boolean; build_id: string }> }
    ).apps;
    expect(apps.find((a) => a.name === 'shop')).toMatchObject({ ready: true });
    const get = await cli(['apps', 'get', 'shop'], app);
    expect(get.stdout).toMatch(/recent builds:[\s\S]*failed[\s\S]*ready/);
    expect(get.stdout).toMatch(/name = "shop"/);
    const del = await cli(['apps', 'delete', 'shop'], app);
    expect(del.code).toBe(0);
    expect(del.stdout.trim()).toBe('deleted shop');
    expect((await call()).status).toBe(404);
  });

  it('a bad apphost.toml is refused before anything is sent, naming the key and the rule', async () => {
    writeFileSync(join(app, 'apphost.toml'), '[app]\nname = "shop"\n[app.scaling]\nmin_replica = 1\n');
    const r = await cli(['deploy'], app);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/app\.scaling\.min_replica: unknown key/);
    expect(lastLine(r.stdout)).toMatch(/^failed \.: /);
  });
});
