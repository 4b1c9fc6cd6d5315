/** `apphost logs APP`: an app's log lines (every replica), --follow streams them until Ctrl-C. */

import { CliError, UsageError } from '../shared/cli/command.ts';
import { clientCommand } from './client-command.ts';
import { sseEvents } from './sse.ts';

/** One line as the management API returns it (schema LogLine). */
export interface LogLineView {
  time?: string;
  replica: string;
  stream?: string;
  message: string;
  request_id?: string;
}

/** The runtime's JSON lines read as `level msg key=value …` (their time is shown already); others as written. */
export function readable(message: string): string {
  if (!message.startsWith('{')) return message;
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(message) as Record<string, unknown>;
  } catch {
    return message;
  }
  if (typeof o.msg !== 'string') return message;
  const { time: _t, level, msg, ...rest } = o;
  const extra = Object.entries(rest).map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`);
  return [typeof level === 'string' ? level.toUpperCase() : undefined, msg, ...extra]
    .filter(Boolean)
    .join(' ');
}

export function formatLine(l: LogLineView): string {
  return `[${l.replica}] ${l.time ? `${l.time} ` : ''}${readable(l.message)}`;
}

export const logsCommand = clientCommand(
  {
    name: 'logs',
    summary: "Print an app's logs: every replica's lines, labelled by replica, oldest first.",
    description:
      "In a cluster these are the pods' logs; in local mode the app process's output. Lines the runtime logged\n" +
      'about a call carry its request id (--json shows it as request_id). --follow keeps printing new lines\n' +
      '(server-sent events) until Ctrl-C or until the server ends the follow (its bound, docs/logs.md).',
    args: [{ name: 'APP', description: 'the app' }],
    flags: {
      follow: { type: 'boolean', short: 'f', description: 'keep printing new lines as they are written' },
      since: {
        type: 'string',
        value: 'DURATION',
        description: 'only lines newer than this: 30s, 10m, 2h, or an RFC 3339 time',
      },
      tail: { type: 'string', value: 'N', description: 'only the last N lines of each replica first' },
    },
    examples: [
      'apphost logs hello',
      'apphost logs hello --follow --since 10m',
      'apphost logs hello --tail 50 --json',
    ],
  },
  async (ctx) => {
    const since = typeof ctx.values.since === 'string' ? ctx.values.since : undefined;
    if (since !== undefined && !/^\d+[smhd]$/.test(since) && Number.isNaN(Date.parse(since)))
      throw new UsageError(`--since must be a duration (30s, 10m, 2h) or an RFC 3339 time, got '${since}'`);
    const tail = typeof ctx.values.tail === 'string' ? ctx.values.tail : undefined;
    if (tail !== undefined && !/^\d+$/.test(tail)) throw new UsageError('--tail must be a number');
    const client = ctx.client();
    const path = client.projectPath('apps', ctx.args.APP as string, 'logs');
    const print = (l: LogLineView) => ctx.io.out(ctx.json ? JSON.stringify(l) : formatLine(l));
    if (!ctx.values.follow) {
      const { lines } = await client.json<{ lines: LogLineView[] }>(path, { query: { since, tail } });
      for (const l of lines) print(l);
      return 0;
    }
    const res = await client.open(path, {
      query: { since, tail, follow: 'true' },
      headers: { accept: 'text/event-stream' },
    });
    if (!res.body) return 0;
    try {
      for await (const e of sseEvents(res.body)) {
        if (e.event === 'log') print(JSON.parse(e.data) as LogLineView);
        else if (e.event === 'end') {
          const why = (JSON.parse(e.data) as { reason?: string }).reason ?? 'ended';
          ctx.io.err(`(the server ended the follow: ${why})`);
        }
      }
    } catch (err) {
      if (ctx.signal.aborted) return 0;
      throw new CliError(`the log stream broke: ${(err as Error).message}`, 'run the command again');
    }
    return 0;
  },
);
