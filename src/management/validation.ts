/**
 * Input shapes (zod) for path parameters, query strings and bodies (the source of the OpenAPI
 * document's request schemas), and one helper that turns a zod failure into a 400 listing every problem.
 */
import { z } from 'zod';
import { DNS_LABEL, dnsLabel, HOSTNAME } from '../apis/names.ts';
import { ApiError, ErrorCode } from '../shared/errors.ts';
import { RunStateSchema } from './present.ts';

// Name rules (DNS label, hostname) are stated once, in src/apis/names.ts, in step with the CRDs.

export const projectId = dnsLabel();
export const resourceName = dnsLabel();
/** Service-account names become Secret names `apphost-sa-<name>`, hence the shorter bound. */
export const serviceAccountName = z
  .string()
  .min(1)
  .max(52, 'must be at most 52 characters')
  .regex(DNS_LABEL, 'must be a DNS label (lowercase letters, digits, -) of at most 52 characters');
export const runId = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[A-Za-z0-9_-]+$/, 'must be a request id');
/** A build id (newBuildId(): time in base 36 and random hex). */
export const buildId = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[a-z0-9]+$/, 'must be a build id (lowercase letters and digits)');
const timestamp = z.iso.datetime({
  offset: true,
  message: 'must be an RFC 3339 date-time, e.g. 2027-01-01T00:00:00Z',
});
/** An RFC 3339 date-time or a plain date (midnight UTC). */
export const expiry = z.union([z.iso.date(), timestamp], {
  message: 'must be an RFC 3339 date-time or a date, e.g. 2027-01-01',
});

export const createDomainBody = z
  .strictObject({
    domain_id: resourceName
      .meta({
        description: 'Optional id (DNS label); derived from the hostname when absent (dots become dashes).',
      })
      .optional(),
    hostname: z
      .string()
      .max(253)
      .toLowerCase()
      .regex(HOSTNAME, 'must be a fully qualified hostname, e.g. app.example.com')
      .meta({ description: 'Fully qualified hostname; unique across all projects.' }),
  })
  .meta({ id: 'CreateDomainRequest' });
export const assignDomainBody = z
  .strictObject({ app_name: resourceName.meta({ description: 'An existing app of the project.' }) })
  .meta({ id: 'AssignDomainRequest' });
export const createServiceAccountBody = z
  .strictObject({
    name: serviceAccountName.meta({
      description: 'DNS label of at most 52 characters, unique in the project.',
    }),
    expires_at: expiry.meta({
      description:
        'Expiry: an RFC 3339 date-time or a date (midnight UTC); in the future, within the maximum lifetime (366 days by default).',
    }),
  })
  .meta({ id: 'CreateServiceAccountRequest' });
export const rotateServiceAccountBody = z
  .strictObject({
    expires_at: expiry.meta({
      description:
        "The new token's expiry: an RFC 3339 date-time or a date (midnight UTC); in the future, within the maximum lifetime.",
    }),
  })
  .meta({ id: 'RotateServiceAccountRequest' });
export const createRunTokenBody = z
  .strictObject({
    expires_at: expiry.meta({
      description:
        'Expiry: an RFC 3339 date-time or a date (midnight UTC); in the future, within the maximum lifetime.',
    }),
  })
  .meta({ id: 'CreateRunTokenRequest' });
export const listRunsQuery = z.strictObject({
  state: RunStateSchema.meta({ param: { description: 'Only runs in this state.' } }).optional(),
  mode: z
    .enum(['sync', 'async'])
    .meta({
      param: {
        description:
          'Only async runs, or only recorded sync calls (a sample: at most APPHOST_GATEWAY_SYNC_RECORDS_PER_APP_PER_SECOND per app and gateway, the newest 100 per app).',
      },
    })
    .optional(),
  limit: z.coerce
    .number()
    .int()
    .min(1)
    .max(100)
    .meta({ param: { description: 'At most this many runs (default 20).' } })
    .optional(),
});
export const listProjectRunsQuery = listRunsQuery.extend({
  app: resourceName.meta({ param: { description: 'Only runs of this app.' } }).optional(),
});

export function parseOrThrow<T>(schema: z.ZodType<T>, value: unknown, where: string): T {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const problems = r.error.issues.map((i) => ({
    path: i.path.length > 0 ? i.path.join('.') : '(root)',
    message: i.message,
  }));
  throw new ApiError(
    where === 'body' ? ErrorCode.InvalidBody : ErrorCode.BadRequest,
    `invalid ${where}: ${problems.map((p) => `${p.path}: ${p.message}`).join('; ')}`,
    { details: { problems } },
  );
}

export function toDate(value: string): Date {
  return new Date(value.length === 10 ? `${value}T00:00:00Z` : value);
}
