/** Builds the WEBHOOKS job for a finished call (sync or async) from what the app answered. */
import type { WebhookJob, WebhookTarget } from '../shared/contracts/messaging.ts';

export function makeWebhookJob(opts: {
  requestId: string;
  projectId: string;
  appName: string;
  target: WebhookTarget;
  status: number;
  contentType?: string | undefined;
  body: Buffer;
  runStatus: WebhookJob['runStatus'];
  completedAt: Date;
}): WebhookJob {
  return {
    v: 1,
    requestId: opts.requestId,
    projectId: opts.projectId,
    appName: opts.appName,
    target: opts.target,
    response: {
      status: opts.status,
      ...(opts.contentType ? { contentType: opts.contentType } : {}),
      bodyBase64: opts.body.toString('base64'),
    },
    runStatus: opts.runStatus,
    completedAt: opts.completedAt.toISOString(),
  };
}
