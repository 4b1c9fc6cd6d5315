/** `apphost tokens create|list|rotate|revoke`: the project's service accounts (their tokens) through the API. */

import { UsageError } from '../shared/cli/command.ts';
import { clientCommand } from './client-command.ts';
import { group } from './group.ts';
import { age, fields, json, table } from './output.ts';

interface ServiceAccountView {
  name: string;
  expires_at: string;
  created_at: string;
  last_used_at?: string;
  token?: string;
}

/** `--expires`: a date, an RFC 3339 time, or a lifetime such as 90d / 12h. */
export function expiresAt(raw: string, now: number): string {
  const m = /^(\d+)([hd])$/.exec(raw);
  if (m) return new Date(now + Number(m[1]) * (m[2] === 'd' ? 86_400_000 : 3_600_000)).toISOString();
  if (/^\d{4}-\d{2}-\d{2}$/.test(raw) || !Number.isNaN(Date.parse(raw))) return raw;
  throw new UsageError(
    `--expires must be a date (2027-01-01), an RFC 3339 time or a lifetime (90d, 12h), got '${raw}'`,
  );
}

const create = clientCommand(
  {
    name: 'tokens create',
    summary: 'Create a service account and print its token (shown once: store it as a secret).',
    args: [{ name: 'NAME', description: 'service-account name: a DNS label of at most 52 characters' }],
    flags: {
      expires: {
        type: 'string',
        value: 'WHEN',
        description: 'expiry: a date, an RFC 3339 time, or a lifetime such as 90d or 12h',
        default: '90d',
      },
    },
    examples: [
      'apphost tokens create ci --expires 2027-01-01',
      'TOKEN=$(apphost tokens create ci --json | jq -r .token)',
    ],
  },
  async (ctx) => {
    const client = ctx.client();
    const expires = expiresAt(typeof ctx.values.expires === 'string' ? ctx.values.expires : '90d', ctx.now());
    const sa = await client.json<ServiceAccountView>(client.projectPath('service-accounts'), {
      method: 'POST',
      body: { name: ctx.args.NAME, expires_at: expires },
    });
    if (ctx.json) ctx.io.out(json(sa));
    else {
      ctx.io.out(sa.token ?? '');
      ctx.io.err(
        `service account ${sa.name} created, expires ${sa.expires_at}; the token above is shown only once`,
      );
    }
    return 0;
  },
);

const list = clientCommand(
  {
    name: 'tokens list',
    summary: "List the project's service accounts (never their tokens).",
    examples: ['apphost tokens list', 'apphost tokens list --json'],
  },
  async (ctx) => {
    const client = ctx.client();
    const { service_accounts: accounts } = await client.json<{ service_accounts: ServiceAccountView[] }>(
      client.projectPath('service-accounts'),
    );
    if (ctx.json) ctx.io.out(json({ service_accounts: accounts }));
    else if (accounts.length === 0) ctx.io.out('no service accounts');
    else
      ctx.io.out(
        table(
          ['NAME', 'EXPIRES', 'CREATED', 'LAST USED'],
          accounts.map((a) => [
            a.name,
            a.expires_at,
            age(a.created_at, ctx.now()),
            age(a.last_used_at, ctx.now()) ?? 'never',
          ]),
        ),
      );
    return 0;
  },
);

const revoke = clientCommand(
  {
    name: 'tokens revoke',
    summary: 'Revoke a service account: its token stops working at once.',
    args: [{ name: 'NAME', description: 'the service account' }],
    examples: ['apphost tokens revoke ci'],
  },
  async (ctx) => {
    const client = ctx.client();
    const sa = await client.json<ServiceAccountView>(
      client.projectPath('service-accounts', ctx.args.NAME as string),
      {
        method: 'DELETE',
      },
    );
    ctx.io.out(
      ctx.json
        ? json(sa)
        : fields([
            ['revoked', sa.name],
            ['was valid until', sa.expires_at],
          ]),
    );
    return 0;
  },
);

const rotate = clientCommand(
  {
    name: 'tokens rotate',
    summary:
      'Give a service account a new token and expiry (the new token is shown once); the old token stops working at once.',
    args: [{ name: 'NAME', description: 'the service account' }],
    flags: {
      expires: {
        type: 'string',
        value: 'WHEN',
        description: 'new expiry: a date, an RFC 3339 time, or a lifetime such as 90d or 12h',
        default: '90d',
      },
    },
    examples: [
      'apphost tokens rotate ci --expires 90d',
      'TOKEN=$(apphost tokens rotate ci --json | jq -r .token)',
    ],
  },
  async (ctx) => {
    const client = ctx.client();
    const expires = expiresAt(typeof ctx.values.expires === 'string' ? ctx.values.expires : '90d', ctx.now());
    const sa = await client.json<ServiceAccountView>(
      `${client.projectPath('service-accounts', ctx.args.NAME as string)}/rotate`,
      { method: 'POST', body: { expires_at: expires } },
    );
    if (ctx.json) ctx.io.out(json(sa));
    else {
      ctx.io.out(sa.token ?? '');
      ctx.io.err(
        `service account ${sa.name} rotated, expires ${sa.expires_at}; the token above is shown only once, the old one is refused`,
      );
    }
    return 0;
  },
);

export const TOKENS_SUBCOMMANDS = { create, list, rotate, revoke };
export const runTokensCommand = group(
  'tokens',
  "The project's service-account tokens (for the management API and for issuing run tokens).",
  TOKENS_SUBCOMMANDS,
);
