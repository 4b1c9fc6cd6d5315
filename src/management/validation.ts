/**
 * Input shapes (zod) for path parameters, query strings and bodies, and one helper that turns a
 * zod failure into a 400 with every problem listed.
 */
import { z } from 'zod';
import { RunState } from '../shared/contracts/messaging.ts';
import { ApiError, ErrorCode } from '../shared/errors.ts';

/** DNS-1123 label: what a namespace label value, a CR name and a token segment can all hold. */
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const HOSTNAME = /^(?=.{1,253}$)([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)+$/;

export const projectId = z
  .string()
  .max(63)
  .regex(DNS_LABEL, 'must be a DNS label (lowercase letters, digits, -)');
export const resourceName = z
  .string()
  .max(63)
  .regex(DNS_LABEL, 'must be a DNS label (lowercase letters, digits, -)');
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
const timestamp = z.iso.datetime({
  offset: true,
  message: 'must be an RFC 3339 date-time, e.g. 2027-01-01T00:00:00Z',
});
/** An RFC 3339 date-time or a plain date (midnight UTC). */
export const expiry = z.union([z.iso.date(), timestamp], {
  message: 'must be an RFC 3339 date-time or a date, e.g. 2027-01-01',
});

export const createDomainBody = z.strictObject({
  domain_id: resourceName.optional(),
  hostname: z
    .string()
    .toLowerCase()
    .regex(HOSTNAME, 'must be a fully qualified hostname, e.g. app.example.com'),
});
export const assignDomainBody = z.strictObject({ app_name: resourceName });
export const createServiceAccountBody = z.strictObject({ name: serviceAccountName, expires_at: expiry });
export const createRunTokenBody = z.strictObject({ expires_at: expiry });
export const listRunsQuery = z.strictObject({
  state: z.enum(Object.values(RunState) as [RunState, ...RunState[]]).optional(),
  limit: z.coerce.number().int().min(1).max(100).optional(),
});
export const listProjectRunsQuery = listRunsQuery.extend({ app: resourceName.optional() });

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
