/**
 * The `apphost` CLI as a person uses it: each command a child process against `apphost dev` (itself a
 * child process with its own NATS and free ports), finding the API through the profile `apphost dev`
 * wrote. Human output is checked for what a reader needs, `--json` output is parsed.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { APPS_SUBCOMMANDS } from '../../src/cli/apps.ts';
import { COMMANDS } from '../../src/cli/commands.ts';
import { RUNS_SUBCOMMANDS } from '../../src/cli/runs.ts';
import { TOKENS_SUBCOMMANDS } from '../../src/cli/tokens.ts';
import { type DevProcess, REPO, startDevProcess, until } from './dev-process.ts';

/** Bound on one CLI invocation (a generous one: the machine is shared). */
const CLI_TIMEOUT_MS = 60_000;
const MAIN = join(REPO, 'src', 'cli', 'main.ts');

interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

let dir: string;
let configFile: string;
let dev: DevProcess;
let receiver: Server;
let receiverUrl: string;
const deliveries: Array<{ headers: IncomingHttpHeaders; body: string }> = [];

/** Env of a CLI child: the profile apphost dev wrote, and no APPHOST_* from the machine running the tests. */
function cliEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('APPHOST_')) env[k] = v;
  return { ...env, APPHOST_CONFIG: configFile, ...extra };
}

function start(args: string[], env: NodeJS.ProcessEnv = {}): ChildProcess {
  return spawn(process.execPath, [MAIN, ...args], {
    cwd: REPO,
    env: cliEnv(env),
    stdio: ['pipe', 'pipe', 'pipe'],
  });
}

function cli(args: string[], opts: { env?: NodeJS.ProcessEnv; input?: string } = {}): Promise<CliResult> {
  const child = start(args, opts.env);
  child.stdin?.end(opts.input ?? '');
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

async function ok(args: string[], opts?: { env?: NodeJS.ProcessEnv; input?: string }): Promise<string> {
  const r = await cli(args, opts);
  if (r.code !== 0) throw new Error(`apphost ${args.join(' ')} exited ${r.code}:\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'apphost-e2e-cli-'));
  const appsDir = join(dir, 'apps');
  cpSync(join(REPO, 'examples', 'apps'), appsDir, { recursive: true });
  // An app whose answer size the test chooses, to cross the run record's result bound (256 KiB).
  mkdirSync(join(appsDir, 'sized'));
  writeFileSync(join(appsDir, 'sized', 'apphost.toml'), '[app]\nname = "sized"\n');
  writeFileSync(
    join(appsDir, 'sized', 'main.py'),
    'def text(n: int = 10) -> dict:\n    return {"s": "x" * n}\n',
  );
  configFile = join(dir, 'config.json');
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      deliveries.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(200).end('ok');
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const addr = receiver.address();
  receiverUrl = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}/hook`;
  dev = await startDevProcess({
    appsDir,
    stateDir: join(dir, 'state'),
    credentialsFile: join(dir, 'credentials.json'),
    env: { APPHOST_CONFIG: configFile },
  });
});

afterAll(async () => {
  if (dev && (await dev.stop()) === 'timeout') dev.kill();
  await new Promise((r) => receiver?.close(r));
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('apphost --help', () => {
  const lines = [
    ...COMMANDS.map((c) => [c.name]),
    ...Object.keys(RUNS_SUBCOMMANDS).map((s) => ['runs', s]),
    ...Object.keys(TOKENS_SUBCOMMANDS).map((s) => ['tokens', s]),
    ...Object.keys(APPS_SUBCOMMANDS).map((s) => ['apps', s]),
  ];

  it.each(lines)('apphost %s … --help prints its usage, flags, settings and an example', async (...words) => {
    const r = await cli([...words, '--help']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^usage: apphost ${words.join(' ')}`));
    expect(r.stdout).toMatch(/^ {2}(-h, )?--help/m);
    expect(r.stdout).toMatch(/settings|env/);
    expect(r.stdout).toMatch(/example/);
  });
});

describe('apphost dev wrote the profile', () => {
  it('is the current profile of the config file, mode 0600, with the banner credentials', () => {
    const config = JSON.parse(readFileSync(configFile, 'utf8'));
    expect(config.current).toBe('local');
    expect(config.profiles.local).toEqual({
      base_url: dev.creds.base_url,
      api_url: dev.creds.api_url,
      project: dev.creds.project_id,
      token: dev.creds.service_account_token,
      run_token: dev.creds.run_token,
    });
  });
});

describe('apphost run', () => {
  it('prints the answer of a sync call, and the request id on stderr', async () => {
    const r = await cli(['run', 'hello', 'run', '--data', '{"name": "cli"}']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ message: 'hello cli' });
    expect(r.stderr).toMatch(/request id: \S+/);
  });

  it('--json gives status, request id, content type and the parsed body', async () => {
    const out = JSON.parse(await ok(['run', 'hello', 'run', '-d', '{"name": "j"}', '--json']));
    expect(out).toMatchObject({ status: 200, body: { message: 'hello j' } });
    expect(out.request_id).toMatch(/\S+/);
    expect(out.content_type).toMatch(/application\/json/);
  });

  it('--stream prints each event as it arrives, before the stream has ended', async () => {
    const child = start([
      'run',
      'stream',
      'run',
      '--stream',
      '--json',
      '--data',
      '{"count": 3, "delay": 1.5}',
    ]);
    child.stdin?.end();
    let stdout = '';
    child.stdout?.on('data', (c: Buffer) => (stdout += c.toString()));
    const exited = new Promise<number | null>((r) => child.once('exit', r));
    // The first event is printed while the function is still yielding (the process has not exited).
    await until('the first event', () => stdout.includes('\n') && child.exitCode === null, CLI_TIMEOUT_MS);
    expect(JSON.parse(stdout.split('\n')[0] as string)).toEqual({ data: { n: 1, of: 3 } });
    expect(await exited).toBe(0);
    expect(
      stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l).data.n),
    ).toEqual([1, 2, 3]);
  });

  it('--async prints the run id; runs get --app shows the run', async () => {
    const runId = (await ok(['run', 'hello', 'run', '--async', '--data', '{"name": "a"}'])).trim();
    expect(runId).toMatch(/^[A-Za-z0-9_-]+$/);
    const run = await until(
      'the run to succeed',
      async () => {
        const r = JSON.parse(await ok(['runs', 'get', runId, '--app', 'hello', '--json']));
        return r.state === 'success' ? r : undefined;
      },
      CLI_TIMEOUT_MS,
    );
    expect(run).toMatchObject({ run_id: runId, app_name: 'hello', path: 'run', response_status: 200 });
  });

  it('--webhook forwards the result, signed with --webhook-secret', async () => {
    const out = JSON.parse(
      await ok([
        'run',
        'hello',
        'run',
        '--async',
        '--webhook',
        receiverUrl,
        '--webhook-secret',
        's3cret',
        '-d',
        '{"name": "w"}',
        '--json',
      ]),
    );
    const got = await until(
      'the webhook',
      () => deliveries.find((d) => d.headers['x-request-id'] === out.run_id),
      CLI_TIMEOUT_MS,
    );
    expect(JSON.parse(got.body)).toMatchObject({
      run_id: out.run_id,
      status: 'success',
      response: { message: 'hello w' },
    });
    expect(got.headers['x-service-webhook-signature']).toMatch(/^v1,[0-9a-f]{64}$/);
  });

  it('refuses data that is not JSON before calling anything (exit 2, pointing at --help)', async () => {
    const r = await cli(['run', 'hello', 'run', '--data', '{nope']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/apphost run: --data is not valid JSON/);
    expect(r.stderr).toMatch(/apphost run --help/);
  });

  it('reports an unknown app with the API error', async () => {
    const r = await cli(['run', 'nosuchapp', 'run']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/apphost run: 404 not_found/);
  });
});

describe('apphost runs', () => {
  it('cancel stops a running run; get shows it cancelled', async () => {
    const runId = (await ok(['run', 'slow', 'run', '--async', '--data', '{"seconds": 60}'])).trim();
    await until(
      'the run to start',
      async () => JSON.parse(await ok(['runs', 'get', runId, '--app', 'slow', '--json'])).state === 'running',
      CLI_TIMEOUT_MS,
    );
    const cancelled = JSON.parse(await ok(['runs', 'cancel', runId, '--app', 'slow', '--json']));
    expect(cancelled.cancel_requested).toBe(true);
    await until(
      'the run to be cancelled',
      async () =>
        JSON.parse(await ok(['runs', 'get', runId, '--app', 'slow', '--json'])).state === 'cancelled',
      CLI_TIMEOUT_MS,
    );
    const again = await cli(['runs', 'cancel', runId, '--app', 'slow']);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/409 conflict: run .* has already finished/);
  });

  it('list --app --state --json lists the app runs in that state', async () => {
    const list = JSON.parse(await ok(['runs', 'list', '--app', 'hello', '--state', 'success', '--json']));
    expect(list.runs.length).toBeGreaterThan(0);
    expect(
      list.runs.every(
        (r: { state: string; app_name: string }) => r.state === 'success' && r.app_name === 'hello',
      ),
    ).toBe(true);
    const text = await ok(['runs', 'list', '--app', 'hello']);
    expect(text.split('\n')[0]).toMatch(/^RUN +APP +FUNCTION +MODE +STATE/);
    // Sync calls are recorded too (a sample under load), with their mode; --mode keeps one.
    const sync = JSON.parse(await ok(['runs', 'list', '--app', 'hello', '--mode', 'sync', '--json']));
    expect(sync.runs.length).toBeGreaterThan(0);
    expect(sync.runs.every((r: { mode: string }) => r.mode === 'sync')).toBe(true);
    const asyncOnly = JSON.parse(await ok(['runs', 'list', '--app', 'hello', '--mode', 'async', '--json']));
    expect(asyncOnly.runs.every((r: { mode: string }) => r.mode === 'async')).toBe(true);
  });

  it('a bad --state or --mode is a usage error', async () => {
    const r = await cli(['runs', 'list', '--state', 'done']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/apphost runs list: --state must be one of/);
    const m = await cli(['runs', 'list', '--mode', 'batch']);
    expect(m.code).toBe(2);
    expect(m.stderr).toMatch(/--mode must be async or sync/);
  });
});

/** Runs `args` (an --async run) and waits until `runs get` shows it finished; returns the run (JSON). */
async function asyncRun(args: string[]): Promise<Record<string, unknown> & { run_id: string }> {
  const runId = (await ok([...args, '--async'])).trim();
  return until(
    `run ${runId} to finish`,
    async () => {
      const r = JSON.parse(await ok(['runs', 'get', runId, '--json']));
      return ['success', 'failure', 'timeout', 'cancelled'].includes(r.state) ? r : undefined;
    },
    CLI_TIMEOUT_MS,
  );
}

describe('run results', () => {
  it("runs get (by id alone) returns the function's JSON result; the text view prints it", async () => {
    const run = await asyncRun(['run', 'hello', 'run', '--data', '{"name": "result"}']);
    expect(run.state).toBe('success');
    expect(run.result).toMatchObject({
      state: 'complete',
      encoding: 'json',
      json: { message: 'hello result' },
    });
    expect((run.result as { content_type: string }).content_type).toMatch(/application\/json/);
    const text = await ok(['runs', 'get', run.run_id]);
    expect(text).toMatch(/^state: +success$/m);
    expect(text).toMatch(/result \(application\/json[^)]*\):\n\{\n {2}"message": "hello result"\n\}/);
  });

  it('keeps a large result that is within the bound whole', async () => {
    const n = 200_000;
    const run = await asyncRun(['run', 'sized', 'text', '--data', `{"n": ${n}}`]);
    const result = run.result as { state: string; json: { s: string }; size_bytes: number };
    expect(result.state).toBe('complete');
    expect(result.json.s.length).toBe(n);
    expect(result.size_bytes).toBe(JSON.stringify({ s: 'x'.repeat(n) }).length);
  });

  it('marks a result over the bound truncated (never silently cut), with its full size', async () => {
    const n = 400_000;
    const run = await asyncRun(['run', 'sized', 'text', '--data', `{"n": ${n}}`]);
    const result = run.result as {
      state: string;
      size_bytes: number;
      kept_bytes: number;
      encoding: string;
      body: string;
    };
    expect(result.state).toBe('truncated');
    expect(result.size_bytes).toBeGreaterThan(n);
    expect(result.kept_bytes).toBe(256 * 1024);
    expect(result.encoding).toBe('utf8');
    expect(result.body.length).toBe(256 * 1024);
    expect(await ok(['runs', 'get', run.run_id])).toMatch(/TRUNCATED/);
    // Lists carry the result's metadata only.
    const list = JSON.parse(await ok(['runs', 'list', '--app', 'sized', '--json']));
    const item = list.runs.find((r: { run_id: string }) => r.run_id === run.run_id);
    expect(item.result).toEqual({
      state: 'truncated',
      content_type: (run.result as { content_type: string }).content_type,
      size_bytes: result.size_bytes,
      kept_bytes: result.kept_bytes,
    });
  });

  it('records that a generator run streamed, with the events as its result', async () => {
    const run = await asyncRun(['run', 'stream', 'run', '--data', '{"count": 2, "delay": 0}']);
    expect(run.streamed).toBe(true);
    const result = run.result as { content_type: string; body: string };
    expect(result.content_type).toMatch(/^text\/event-stream/);
    expect(result.body).toContain('data: {"n": 1, "of": 2}');
    expect(result.body).toContain('data: {"n": 2, "of": 2}');
  });

  it('runs list without --app lists the runs of every app', async () => {
    const list = JSON.parse(await ok(['runs', 'list', '--limit', '100', '--json']));
    const apps = new Set(list.runs.map((r: { app_name: string }) => r.app_name));
    expect(apps.has('hello')).toBe(true);
    expect(apps.has('sized')).toBe(true);
  });
});

describe('apphost logs', () => {
  it("prints the app's lines labelled by replica; --json lines carry the call's request id", async () => {
    const r = await cli(['run', 'hello', 'run', '--json']);
    const requestId = JSON.parse(r.stdout).request_id as string;
    const lines = await until(
      'the call in the logs',
      async () => {
        const out = (await ok(['logs', 'hello', '--json']))
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l));
        return out.some((l) => l.request_id === requestId) ? out : undefined;
      },
      CLI_TIMEOUT_MS,
    );
    expect(lines.every((l: { replica: string }) => /^local-\d+$/.test(l.replica))).toBe(true);
    const text = await ok(['logs', 'hello', '--tail', '3']);
    expect(text.trim().split('\n')).toHaveLength(3);
    expect(text).toMatch(/^\[local-\d+\] \d{4}-\d{2}-\d{2}T/m);
  });

  it('--follow prints new lines as they are written and stops on Ctrl-C', async () => {
    const child = start(['logs', 'hello', '--follow', '--json', '--since', '1s']);
    child.stdin?.end();
    let stdout = '';
    child.stdout?.on('data', (c: Buffer) => (stdout += c.toString()));
    const exited = new Promise<number | null>((r) => child.once('exit', r));
    // A call made after the follow started shows up in it.
    let requestId = '';
    await until(
      'a followed line of a new call',
      async () => {
        if (!requestId)
          requestId = JSON.parse((await cli(['run', 'hello', 'run', '--json'])).stdout).request_id;
        return stdout.includes(`"request_id":"${requestId}"`);
      },
      CLI_TIMEOUT_MS,
    );
    child.kill('SIGINT');
    expect(await exited).toBe(0);
  });

  it('an unknown app is a 404 with the API message', async () => {
    const r = await cli(['logs', 'nosuchapp']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/404 not_found: app nosuchapp not found/);
  });
});

describe('apphost tokens', () => {
  it('create prints a token that works, list shows it, rotate replaces it, revoke stops it', async () => {
    const created = JSON.parse(await ok(['tokens', 'create', 'cli-e2e', '--expires', '2d', '--json']));
    expect(created).toMatchObject({ name: 'cli-e2e' });
    expect(created.token).toMatch(/\S{20,}/);
    const listed = JSON.parse(await ok(['tokens', 'list', '--json', '--token', created.token]));
    expect(listed.service_accounts.map((a: { name: string }) => a.name)).toContain('cli-e2e');
    expect(JSON.stringify(listed)).not.toContain(created.token);
    expect(await ok(['tokens', 'list'])).toMatch(/^NAME +EXPIRES/);
    const rotated = JSON.parse(await ok(['tokens', 'rotate', 'cli-e2e', '--expires', '3d', '--json']));
    expect(rotated.token).toMatch(/\S{20,}/);
    expect(rotated.token).not.toBe(created.token);
    expect((await cli(['tokens', 'list', '--token', created.token])).code).toBe(1);
    expect((await cli(['tokens', 'list', '--token', rotated.token])).code).toBe(0);
    await ok(['tokens', 'revoke', 'cli-e2e']);
    const r = await cli(['tokens', 'list', '--token', rotated.token]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/401 unauthenticated/);
    expect(r.stderr).toMatch(/next: check the token/);
  });
});

describe('apphost login', () => {
  it('checks the token, then saves the profile and makes it current', async () => {
    const file = join(dir, 'login.json');
    const args = [
      'login',
      '--base-url',
      dev.creds.base_url,
      '--project',
      dev.creds.project_id,
      '--token-stdin',
      '--profile',
      'mine',
    ];
    const bad = await cli(args, { env: { APPHOST_CONFIG: file }, input: 'ahsa_not_a_token\n' });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/401/);
    expect(() => readFileSync(file)).toThrow();
    const out = JSON.parse(
      await ok([...args, '--json'], {
        env: { APPHOST_CONFIG: file },
        input: `${dev.creds.service_account_token}\n`,
      }),
    );
    expect(out).toMatchObject({ profile: 'mine', project: dev.creds.project_id });
    const saved = JSON.parse(readFileSync(file, 'utf8'));
    expect(saved.current).toBe('mine');
    expect(saved.profiles.mine.token).toBe(dev.creds.service_account_token);
    expect(
      JSON.parse(await ok(['tokens', 'list', '--json'], { env: { APPHOST_CONFIG: file } })).service_accounts,
    ).toBeInstanceOf(Array);
  });
});

describe('errors say what to do next', () => {
  it('no configuration at all', async () => {
    const r = await cli(['runs', 'list'], { env: { APPHOST_CONFIG: join(dir, 'absent.json') } });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/no base URL .* and no config file at/);
    expect(r.stderr).toMatch(/next: start 'apphost dev'/);
  });

  it('a server that is not there', async () => {
    // A port that was free a moment ago: nothing listens there.
    const probe = createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    const port = (probe.address() as { port: number }).port;
    await new Promise((r) => probe.close(r));
    const r = await cli(['tokens', 'list', '--base-url', `http://127.0.0.1:${port}`]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`cannot reach http://127.0.0.1:${port}: ECONNREFUSED`);
    expect(r.stderr).toMatch(/next: is the server running\?/);
  });
});
