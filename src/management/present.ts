/** Store and run records → the API's snake_case JSON shapes (documented in openapi.ts). */
import type { RunRecord, WebhookDeliveryRecord } from '../shared/contracts/messaging.ts';
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

export function presentRun(r: RunRecord, delivery?: WebhookDeliveryRecord) {
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
    ...(delivery ? { webhook_delivery: presentDelivery(delivery) } : {}),
  };
}
