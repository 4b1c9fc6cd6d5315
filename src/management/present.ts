/** Store and run records → the API's snake_case JSON shapes (documented in openapi.ts). */
import type { RunRecord, RunResult, WebhookDeliveryRecord } from '../shared/contracts/messaging.ts';
import type { Domain, ServiceAccount } from './store/types.ts';

export function presentDomain(d: Domain) {
  return {
    domain_id: d.domainId,
    hostname: d.hostname,
    assigned: d.appName !== undefined,
    ...(d.appName !== undefined ? { app_name: d.appName } : {}),
    created_at: d.createdAt,
  };
}

export function presentServiceAccount(a: ServiceAccount) {
  return {
    name: a.name,
    expires_at: a.expiresAt,
    created_at: a.createdAt,
    ...(a.lastUsedAt ? { last_used_at: a.lastUsedAt } : {}),
  };
}

export function presentDelivery(d: WebhookDeliveryRecord) {
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
export function presentResult(r: RunResult, bytes?: Uint8Array | null) {
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
export function presentRun(r: RunRecord, delivery?: WebhookDeliveryRecord, result?: Uint8Array | null) {
  return {
    run_id: r.runId,
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
    ...(r.streamed ? { streamed: true } : {}),
    ...(r.result ? { result: presentResult(r.result, result) } : {}),
    ...(delivery ? { webhook_delivery: presentDelivery(delivery) } : {}),
  };
}
