/**
 * What the gateways (and the run workers in them) tell the autoscaler over core NATS: a load report
 * per process every report interval, and a wake request the moment a call is held for an app with
 * no ready replica. Changing a shape here is changing a wire format: bump `v`.
 */
import { z } from 'zod';

/** Every process publishes its reports on `apphost.load.<reporter>`. */
export const loadSubject = (reporter: string) => `apphost.load.${reporter}`;
export const LOAD_SUBJECTS = 'apphost.load.*';
export const wakeSubject = (projectId: string, appName: string) => `apphost.wake.${projectId}.${appName}`;
export const WAKE_SUBJECTS = 'apphost.wake.*.*';

const count = z.number().finite().min(0);

export const AppLoadSchema = z.object({
  projectId: z.string().min(1),
  appName: z.string().min(1),
  /** In-flight + queued calls, time-averaged over the report interval. */
  concurrency: count,
  /** Calls in flight and calls queued at the moment of the report. */
  inflight: count,
  queued: count,
  /** Async runs this process took from RUNS and has not finished (running or waiting for a slot). */
  runs: count,
  /** In-flight calls per replica (its routing id), so the autoscaler can remove idle replicas first. */
  replicas: z.record(z.string(), count).optional(),
});
export type AppLoad = z.infer<typeof AppLoadSchema>;

export const LoadReportSchema = z.object({
  v: z.literal(1),
  /** Unique per process (a restarted process is a new reporter). */
  reporter: z.string().min(1).max(200),
  /** How often this reporter publishes. */
  intervalMs: z.number().int().positive(),
  /** Apps with load in this interval; an app left out has none from this reporter. */
  apps: z.array(AppLoadSchema),
});
export type LoadReport = z.infer<typeof LoadReportSchema>;

export const WakeRequestSchema = z.object({
  v: z.literal(1),
  reporter: z.string().min(1).max(200),
  load: AppLoadSchema,
});
export type WakeRequest = z.infer<typeof WakeRequestSchema>;
