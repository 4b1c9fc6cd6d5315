/**
 * The API's snake_case response shapes (zod, the source of the OpenAPI document's schemas) and the
 * functions that turn store and run records into them; each presenter is typed by its shape.
 */
import { z } from 'zod';
import {
  type RunRecord,
  type RunResult,
  RunState,
  type WebhookAttemptOutcome,
  type WebhookDeliveryRecord,
} from '../shared/contracts/messaging.ts';
import type { Domain, ServiceAccount } from './store/types.ts';

const dateTime = (description: string) => z.iso.datetime({ offset: true }).meta({ description });
const text = (description: string) => z.string().meta({ description });

export const DomainResponse = z
  .strictObject({
    domain_id: text('The domain id (the DomainAssignment name).'),
    hostname: text('The custom hostname, e.g. app.example.com.'),
    assigned: z.boolean().meta({ description: 'Whether the domain is assigned to an app.' }),
    app_name: text('The app the domain routes to; absent when unassigned.').optional(),
    created_at: dateTime('When the domain was created.'),
  })
  .meta({ id: 'Domain' });
export const DomainListResponse = z
  .strictObject({ domains: z.array(DomainResponse) })
  .meta({ id: 'DomainList' });

const serviceAccountFields = {
  name: text('Service account name.'),
  expires_at: dateTime('When its token stops working.'),
  created_at: dateTime('When it was created.'),
};
export const ServiceAccountResponse = z
  .strictObject({
    ...serviceAccountFields,
    last_used_at: dateTime(
      'Last authenticated use (recorded at most once a minute); absent if never used.',
    ).optional(),
  })
  .meta({ id: 'ServiceAccount' });
export const ServiceAccountListResponse = z
  .strictObject({ service_accounts: z.array(ServiceAccountResponse) })
  .meta({ id: 'ServiceAccountList' });
export const CreatedServiceAccountResponse = z
  .strictObject({
    ...serviceAccountFields,
    last_used_at: dateTime('Never present at creation.').optional(),
    token: text('The bearer token. Shown in this response only; store it as a secret.'),
  })
  .meta({ id: 'CreatedServiceAccount' });

export const RunTokenResponse = z
  .strictObject({
    token: text('JWT (EdDSA) for `Authorization: Bearer` on the run endpoint of this project.'),
    project_id: text('The project the token is valid for.'),
    expires_at: dateTime('The token expiry (second precision).'),
  })
  .meta({ id: 'RunToken' });

const ATTEMPT_OUTCOMES = [
  'success',
  'http_retryable',
  'http_permanent',
  'network_error',
  'timeout',
  'refused_by_policy',
] as const satisfies readonly WebhookAttemptOutcome[];

export const WebhookAttemptResponse = z
  .strictObject({
    attempt: z.number().int().min(1),
    at: dateTime('When the attempt was made.'),
    outcome: z.enum(ATTEMPT_OUTCOMES),
    status: z.number().int().meta({ description: 'Receiver HTTP status, when it answered.' }).optional(),
    error: text('Network or policy error, when there was one.').optional(),
    duration_ms: z.number().min(0),
  })
  .meta({ id: 'WebhookAttempt' });
export const WebhookDeliveryResponse = z
  .strictObject({
    endpoint_host: text('Host of the webhook endpoint.'),
    state: z.enum(['pending', 'delivered', 'failed']),
    updated_at: dateTime('Last change.'),
    attempts: z.array(WebhookAttemptResponse),
  })
  .meta({ id: 'WebhookDelivery' });

export const RunResultResponse = z
  .strictObject({
    state: z.enum(['complete', 'truncated', 'dropped', 'expired']).meta({
      description:
        'complete: all of it; truncated: a text response over the bound, its first kept_bytes (at a character ' +
        'boundary); dropped: none kept (a non-text response over the bound, or the store refused it: reason); ' +
        'expired: the kept bytes are gone before the record.',
    }),
    content_type: text("The response's Content-Type.").optional(),
    size_bytes: z.number().int().min(0).meta({ description: 'Size of the whole response body.' }),
    kept_bytes: z.number().int().min(0).meta({ description: 'Bytes kept.' }),
    reason: text('Why nothing (or less) was kept.').optional(),
    encoding: z
      .enum(['json', 'utf8', 'base64'])
      .meta({ description: 'How the kept bytes are given.' })
      .optional(),
    json: z.unknown().meta({ description: 'The response parsed as JSON (encoding json).' }).optional(),
    body: text('The kept bytes as text (utf8) or base64.').optional(),
  })
  .meta({
    id: 'RunResult',
    description:
      "The function's response as the run record keeps it (at most APPHOST_RUN_RESULT_MAX_BYTES, default 256 KiB; " +
      'kept as long as the record, 7 days after its last change). Lists show only the metadata; GET of one run adds ' +
      'the body: `json` (a complete JSON response, parsed), else `body` as text (`utf8`) or `base64`.',
  });

export const RunStateSchema = z.enum(Object.values(RunState) as [RunState, ...RunState[]]);

export const RunResponse = z
  .strictObject({
    run_id: text('The run id (the X-Request-Id of the call).'),
    mode: z.enum(['sync', 'async']).meta({
      description:
        'async: a queued run (?async=true); sync: a recorded sync call (no kept result, cannot be cancelled).',
    }),
    project_id: text('Project.'),
    app_name: text('App.'),
    path: text('The path the run was invoked with (the function name for the Cortex runtime).'),
    state: RunStateSchema,
    created_at: dateTime('When the run was accepted.'),
    started_at: dateTime('When a worker last started it.').optional(),
    finished_at: dateTime('When it reached a final state.').optional(),
    executions: z
      .number()
      .int()
      .min(0)
      .meta({ description: 'Executions started (more than 1 after a redelivery).' }),
    response_status: z.number().int().meta({ description: "The function's HTTP status." }).optional(),
    error: z.strictObject({ code: z.string(), message: z.string() }).optional(),
    cancel_requested: z.boolean(),
    webhook_host: text('Host of the webhook endpoint the result is forwarded to.').optional(),
    streamed: z
      .literal(true)
      .meta({
        description:
          'Present (true) when the function answered text/event-stream: the result holds the events as sent.',
      })
      .optional(),
    result: RunResultResponse.optional(),
    webhook_delivery: WebhookDeliveryResponse.optional(),
  })
  .meta({ id: 'Run' });
export const RunListResponse = z.strictObject({ runs: z.array(RunResponse) }).meta({ id: 'RunList' });

export function presentDomain(d: Domain): z.output<typeof DomainResponse> {
  return {
    domain_id: d.domainId,
    hostname: d.hostname,
    assigned: d.appName !== undefined,
    ...(d.appName !== undefined ? { app_name: d.appName } : {}),
    created_at: d.createdAt,
  };
}

export function presentServiceAccount(a: ServiceAccount): z.output<typeof ServiceAccountResponse> {
  return {
    name: a.name,
    expires_at: a.expiresAt,
    created_at: a.createdAt,
    ...(a.lastUsedAt ? { last_used_at: a.lastUsedAt } : {}),
  };
}

export function presentDelivery(d: WebhookDeliveryRecord): z.output<typeof WebhookDeliveryResponse> {
  return {
    endpoint_host: d.endpointHost,
    state: d.state,
    updated_at: d.updatedAt,
    attempts: d.attempts.map((a) => ({
      attempt: a.attempt,
      at: a.at,
      outcome: a.outcome,
      ...(a.status !== undefined ? { status: a.status } : {}),
      ...(a.error !== undefined ? { error: a.error } : {}),
      duration_ms: a.durationMs,
    })),
  };
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * A run's result: its metadata, and (with `bytes`, i.e. on GET of one run) the kept body — parsed as
 * `json` when the whole JSON response was kept, else `body` as UTF-8 text, or base64 for bytes that are
 * not UTF-8. Kept bytes that are gone before their record (retention) are reported as `expired`.
 */
export function presentResult(r: RunResult, bytes?: Uint8Array | null): z.output<typeof RunResultResponse> {
  const base = {
    state: r.kept,
    ...(r.contentType ? { content_type: r.contentType } : {}),
    size_bytes: r.sizeBytes,
    kept_bytes: r.keptBytes,
    ...(r.reason ? { reason: r.reason } : {}),
  };
  if (bytes === undefined || r.kept === 'dropped') return base;
  if (bytes === null)
    return { ...base, state: 'expired' as const, reason: 'the kept bytes are no longer stored' };
  let text: string | undefined;
  try {
    text = utf8.decode(bytes);
  } catch {
    return { ...base, encoding: 'base64' as const, body: Buffer.from(bytes).toString('base64') };
  }
  const type = (r.contentType ?? '').toLowerCase().split(';')[0]?.trim() ?? '';
  if (r.kept === 'complete' && (type === 'application/json' || type.endsWith('+json'))) {
    try {
      return { ...base, encoding: 'json' as const, json: JSON.parse(text) as unknown };
    } catch {
      // not JSON after all: return it as text
    }
  }
  return { ...base, encoding: 'utf8' as const, body: text };
}

/**
 * `result`: omitted → the result's metadata only (lists); bytes → with the body; null → the bytes
 * were looked for and are gone.
 */
export function presentRun(
  r: RunRecord,
  delivery?: WebhookDeliveryRecord,
  result?: Uint8Array | null,
): z.output<typeof RunResponse> {
  return {
    run_id: r.runId,
    mode: r.mode === 'sync' ? 'sync' : 'async',
    project_id: r.projectId,
    app_name: r.appName,
    path: r.path,
    state: r.state,
    created_at: r.createdAt,
    ...(r.startedAt ? { started_at: r.startedAt } : {}),
    ...(r.finishedAt ? { finished_at: r.finishedAt } : {}),
    executions: r.executions,
    ...(r.responseStatus !== undefined ? { response_status: r.responseStatus } : {}),
    ...(r.error ? { error: { code: r.error.code, message: r.error.message } } : {}),
    cancel_requested: r.cancelRequested === true,
    ...(r.webhookHost ? { webhook_host: r.webhookHost } : {}),
    ...(r.streamed ? { streamed: true as const } : {}),
    ...(r.result ? { result: presentResult(r.result, result) } : {}),
    ...(delivery ? { webhook_delivery: presentDelivery(delivery) } : {}),
  };
}
