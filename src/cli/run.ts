/**
 * `apphost run APP FUNCTION`: one call of the run API, sync by default; --async queues it (prints the
 * run id), --webhook forwards the result, --stream prints each server-sent event as it arrives.
 */
import { readFileSync } from 'node:fs';
import { CliError, UsageError } from '../shared/cli/command.ts';
import type { ApiClient } from './api-client.ts';
import { type ClientContext, clientCommand } from './client-command.ts';
import { json } from './output.ts';
import { sseEvents } from './sse.ts';

/** Lifetime of a run token the CLI issues for itself when none is configured. */
export const CLI_RUN_TOKEN_TTL_MS = 3600_000;

/** `--data`: inline JSON, `@file`, or `-` for standard input; always checked to be JSON here. */
export function readData(raw: string | undefined, readStdin: () => string): string {
  if (raw === undefined) return '{}';
  const text = raw === '-' ? readStdin() : raw.startsWith('@') ? readFileSync(raw.slice(1), 'utf8') : raw;
  try {
    JSON.parse(text);
  } catch (err) {
    throw new UsageError(`--data is not valid JSON (${(err as Error).message}): pass e.g. '{"name": "you"}'`);
  }
  return text;
}

async function runToken(client: ApiClient, now: number): Promise<string> {
  if (client.conn.runToken) return client.conn.runToken;
  const issued = await client.json<{ token: string }>(client.projectPath('run-tokens'), {
    method: 'POST',
    body: { expires_at: new Date(now + CLI_RUN_TOKEN_TTL_MS).toISOString() },
  });
  return issued.token;
}

function parseBody(text: string, contentType: string | null): unknown {
  if (contentType?.includes('json')) {
    try {
      return JSON.parse(text);
    } catch {
      // fall through: print as text
    }
  }
  return text;
}

export const runCommand = clientCommand(
  {
    name: 'run',
    summary: 'Call a function of an app through the run API and print what it answers.',
    description:
      'Sync by default: prints the response body (request id on stderr). --async queues the run and prints its id\n' +
      "(then 'apphost runs get ID' shows its result); --webhook also POSTs the result to URL, signed with\n" +
      '--webhook-secret. --stream asks for server-sent events and prints each one as it arrives (a generator).\n' +
      'Without a run token configured, one valid for an hour is issued with the service-account token.',
    runApi: true,
    args: [
      { name: 'APP', description: 'the app' },
      { name: 'FUNCTION', description: 'the function (the path after /v4/<project>/<app>/)' },
    ],
    flags: {
      data: {
        type: 'string',
        short: 'd',
        value: 'JSON',
        description: "keyword arguments as a JSON object; @FILE reads a file, '-' standard input",
        default: '{}',
      },
      async: { type: 'boolean', description: 'queue the run and print its run id (202)' },
      webhook: { type: 'string', value: 'URL', description: 'POST the result to URL when the run finishes' },
      'webhook-secret': {
        type: 'string',
        value: 'SECRET',
        description: 'sign webhook deliveries with this secret [APPHOST_WEBHOOK_SECRET]',
      },
      stream: { type: 'boolean', description: 'Accept: text/event-stream; print each event as it arrives' },
    },
    settings: [{ name: 'APPHOST_WEBHOOK_SECRET', description: 'default for --webhook-secret' }],
    examples: [
      `apphost run hello run --data '{"name": "you"}'`,
      `apphost run slow run --async --data '{"seconds": 3}'`,
      `apphost run stream run --stream --data '{"count": 5}'`,
      `apphost run slow run --webhook https://example.com/hook --webhook-secret s3cret --data @args.json`,
    ],
  },
  async (ctx) => run(ctx),
);

async function run(ctx: ClientContext): Promise<number> {
  const { values, args, io } = ctx;
  const data = readData(typeof values.data === 'string' ? values.data : undefined, () =>
    readFileSync(0, 'utf8'),
  );
  const webhook = typeof values.webhook === 'string' ? values.webhook : undefined;
  const secret =
    (typeof values['webhook-secret'] === 'string' ? values['webhook-secret'] : undefined) ??
    ctx.env.APPHOST_WEBHOOK_SECRET;
  if (values.stream && values.async) throw new UsageError('--stream and --async exclude each other');
  if (secret && !webhook) throw new UsageError('--webhook-secret needs --webhook URL');
  const client = ctx.client();
  const apiUrl = client.conn.apiUrl;
  if (!apiUrl)
    throw new CliError(
      'no run API URL',
      "pass --api-url or set APPHOST_API_URL ('apphost dev' saves it; 'apphost login --api-url URL' does too)",
    );
  const token = await runToken(client, ctx.now());
  const path = `/v4/${encodeURIComponent(client.conn.project)}/${encodeURIComponent(args.APP as string)}/${(
    args.FUNCTION as string
  )
    .split('/')
    .map(encodeURIComponent)
    .join('/')}`;
  const res = await client.open(path, {
    method: 'POST',
    base: apiUrl,
    token,
    body: data,
    query: { ...(values.async ? { async: 'true' } : {}), ...(webhook ? { webhookEndpoint: webhook } : {}) },
    headers: {
      ...(values.stream ? { accept: 'text/event-stream' } : {}),
      ...(secret ? { 'x-webhook-secret': secret } : {}),
    },
  });
  const requestId = res.headers.get('x-request-id') ?? undefined;
  const contentType = res.headers.get('content-type');

  if (contentType?.startsWith('text/event-stream') && res.body) {
    if (!ctx.json && requestId) io.err(`request id: ${requestId}`);
    let count = 0;
    try {
      for await (const e of sseEvents(res.body)) {
        count++;
        if (ctx.json)
          io.out(
            JSON.stringify({
              ...(e.event ? { event: e.event } : {}),
              ...(e.id ? { id: e.id } : {}),
              data: parseBody(e.data, 'json'),
            }),
          );
        else io.out(e.event && e.event !== 'message' ? `${e.event}: ${e.data}` : e.data);
      }
    } catch (err) {
      if (ctx.signal.aborted) return 130;
      throw new CliError(`the stream broke after ${count} events: ${(err as Error).message}`);
    }
    return 0;
  }

  const text = await res.text();
  const body = parseBody(text, contentType);
  if (values.async) {
    const runId = (body as { run_id?: string }).run_id ?? requestId;
    if (ctx.json) io.out(json({ run_id: runId, app: args.APP, ...(webhook ? { webhook } : {}) }));
    else {
      io.out(runId ?? '');
      io.err(`queued; see it with: apphost runs get ${runId} --app ${args.APP}`);
    }
    return 0;
  }
  if (ctx.json)
    io.out(json({ status: res.status, request_id: requestId, content_type: contentType ?? undefined, body }));
  else {
    io.out(typeof body === 'string' ? body : json(body));
    if (requestId) io.err(`request id: ${requestId}`);
  }
  return 0;
}
