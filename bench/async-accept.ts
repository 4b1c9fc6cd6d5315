/**
 * (2) Async accept: `?async=true` calls through the gateway under load. Each 202 is sent only after
 * real JetStream (file storage) has acknowledged the run, so accepted runs/s is the durable-queueing
 * rate. The run worker is off in the benchmark gateway, so the figure is the accept path alone; the RUNS
 * stream's message count is checked against the 202s counted by the load generator. Then a second
 * gateway process with its run worker on executes the queued runs against the runtime, timed until
 * RUNS is empty: executed runs/s. The same accept load through the gateway with the Rust data plane on
 * its port (the default install; an async-first connection handed to Node whole, design §3a) has two rows:
 * - on a nats-server of its own with an empty store, the state the node-mode row starts from, so the two
 *   modes are compared on the same NATS (this is the row issue 16's goal reads);
 * - on the node-mode row's server after the worker's drain, which holds what ~250k kept runs leave (run
 *   records, the duplicate-id window, block buffers: a Go heap at its GOMEMLIMIT, whose collection cycles
 *   land in the row's tail; docs/benchmarks.md, "The native 202's tail"). Measured after the worker's row,
 *   so the worker's backlog is the node-mode gateway's alone.
 */
import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { DEFAULT_RUN_WORKER_SETTINGS } from '../src/runs/settings.ts';
import { RUNS_STREAM } from '../src/shared/contracts/messaging.ts';
import { type BenchContext, errorNote } from './support/context.ts';
import { APP, PROJECT, STOP_GRACE_MS, treeCpuSeconds } from './support/parts.ts';
import { fmtMs, fmtRate, sleep } from './support/stats.ts';

/** Bound on draining the queued runs with the run worker (a partial figure is reported after it). */
export const ASYNC_DRAIN_BOUND_MS = 60_000;
/** How often the RUNS stream's message count is read while it drains. */
export const ASYNC_DRAIN_POLL_MS = 250;

import { ECHO_BODY } from './sync-overhead.ts';

/** `apphost_runs_finished_total` of the worker process by state, e.g. "success 11866". */
async function finishedStates(opsUrl: string): Promise<string> {
  try {
    const text = await (await fetch(`${opsUrl}/metrics`)).text();
    const parts = text
      .split('\n')
      .filter((l) => l.startsWith('apphost_runs_finished_total{'))
      .map((l) => `${/state="([^"]*)"/.exec(l)?.[1] ?? '?'} ${l.slice(l.lastIndexOf(' ') + 1)}`);
    return parts.length ? parts.join(', ') : 'none reported';
  } catch (err) {
    return `unknown (${(err as Error).message})`;
  }
}

interface AcceptTarget {
  url: string;
  pid: number;
}

/** Warm-up, then one measured accept load on `gw`: its row, checked against the RUNS stream's count. */
async function measureAccept(
  ctx: BenchContext,
  gw: AcceptTarget,
  variant: string,
  token: string,
  messages: () => Promise<number>,
  cpuNote: string,
): Promise<void> {
  const { report, settings } = ctx;
  const load = ctx.load as NonNullable<BenchContext['load']>;
  const url = `${gw.url}/v4/${PROJECT}/${APP}/echo?async=true`;
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${token}` };
  const probe = await fetch(url, { method: 'POST', headers, body: ECHO_BODY });
  const probeBody = (await probe.json()) as { run_id?: string };
  if (probe.status !== 202 || typeof probeBody.run_id !== 'string') {
    throw new Error(
      `async call answered ${probe.status} ${JSON.stringify(probeBody)}; expected 202 {run_id}`,
    );
  }
  const spec = {
    url,
    method: 'POST' as const,
    headers,
    body: ECHO_BODY,
    connections: settings.connections,
    durationSeconds: settings.warmupSeconds,
  };
  if (settings.warmupSeconds > 0) await load.run(spec);
  const before = await messages();
  const cpu0 = treeCpuSeconds(gw.pid);
  const r = await load.run({ ...spec, durationSeconds: settings.durationSeconds });
  // Gateway CPU per accept (/proc): steadier than accepts/s on a shared machine.
  const cpuMsPerAccept = ((treeCpuSeconds(gw.pid) - cpu0) * 1000) / Math.max(1, r.requests);
  const queued = (await messages()) - before;
  const accepted = r.requests - r.non2xx;
  report.row({
    benchmark: 'async',
    variant,
    throughput: fmtRate(accepted / r.durationSeconds, 'runs/s'),
    p50: fmtMs(r.p50Ms),
    p99: fmtMs(r.p99Ms),
    other:
      `c=${settings.connections}; ${accepted} accepted, RUNS stream +${queued} messages; ` +
      `≈${cpuMsPerAccept.toFixed(3)} ms of ${cpuNote} per accept${errorNote(r)}`,
  });
  if (queued < accepted) {
    report.note(
      `async (${variant}): RUNS gained ${queued} messages for ${accepted} 202s: runs were acknowledged but not queued!`,
    );
  }
}

export async function asyncAccept(ctx: BenchContext): Promise<void> {
  const { report, load } = ctx;
  if (!load) {
    report.unavailable('async', 'accept', ctx.loadMissing ?? 'no load generator');
    return;
  }
  const [gw, token, nats] = await Promise.all([ctx.parts.gateway(), ctx.parts.token(), ctx.parts.nats()]);
  const nc = await connect({ servers: nats.url });
  try {
    const messages = await runsCount(nc);
    await measureAccept(
      ctx,
      gw,
      'gateway 202 accept (JetStream)',
      token,
      messages,
      'gateway CPU (user+system, /proc/<pid>/stat)',
    );
    await measureNativeOnFreshNats(ctx, token);
    // The queued runs, executed: a gateway process with its run worker on drains RUNS (work-queue
    // retention: an executed, acknowledged run leaves the stream).
    const backlog = await messages();
    const worker = await ctx.parts.workerGateway();
    try {
      const t0 = Date.now();
      const workerCpu0 = treeCpuSeconds(worker.pid);
      let left = backlog;
      while (left > 0 && Date.now() - t0 < ASYNC_DRAIN_BOUND_MS) {
        await sleep(ASYNC_DRAIN_POLL_MS);
        left = await messages();
      }
      const seconds = (Date.now() - t0) / 1000;
      const executed = backlog - left;
      // The worker's CPU per executed run (/proc): steadier than runs/s on a shared machine.
      const cpuMsPerRun = ((treeCpuSeconds(worker.pid) - workerCpu0) * 1000) / Math.max(1, executed);
      const states = await finishedStates(worker.opsUrl);
      report.row({
        benchmark: 'async',
        variant: 'run worker executes queued runs',
        throughput: fmtRate(executed / seconds, 'runs/s'),
        other:
          `${executed} of ${backlog} queued runs executed in ${seconds.toFixed(1)} s ` +
          `(worker concurrency ${DEFAULT_RUN_WORKER_SETTINGS.concurrency}; includes the worker's start); ` +
          `≈${cpuMsPerRun.toFixed(3)} ms of worker CPU per run` +
          (left > 0 ? `; stopped at the ${ASYNC_DRAIN_BOUND_MS / 1000} s bound` : '') +
          `; final states: ${states}`,
      });
    } finally {
      await worker.proc.stop(STOP_GRACE_MS);
    }

    const native = await ctx.parts.gatewayNative().catch((e: unknown) => e as Error);
    if (native instanceof Error)
      report.unavailable(
        'async',
        "gateway (native data plane) 202 accept, NATS after the worker's drain",
        native.message,
      );
    else
      await measureAccept(
        ctx,
        native,
        "gateway (native data plane) 202 accept (JetStream, NATS after the worker's drain)",
        token,
        messages,
        NATIVE_CPU_NOTE,
      );
  } finally {
    await nc.close();
  }
}

const NATIVE_CPU_NOTE = 'CPU of Node and the data plane added up';

/** The RUNS stream's message count on the server `nc` is connected to. */
async function runsCount(nc: NatsConnection): Promise<() => Promise<number>> {
  const jsm = await jetstreamManager(nc);
  return async () => (await jsm.streams.info(RUNS_STREAM)).state.messages;
}

/** The native gateway's 202 row on a nats-server with an empty store, as the node-mode row had. */
async function measureNativeOnFreshNats(ctx: BenchContext, token: string): Promise<void> {
  const variant = 'gateway (native data plane) 202 accept (JetStream, fresh NATS)';
  const fresh = await ctx.parts.gatewayNativeOnFreshNats().catch((e: unknown) => e as Error);
  if (fresh instanceof Error) {
    ctx.report.unavailable('async', variant, fresh.message);
    return;
  }
  const nc = await connect({ servers: fresh.nats.url });
  try {
    await measureAccept(ctx, fresh.gateway, variant, token, await runsCount(nc), NATIVE_CPU_NOTE);
  } finally {
    await nc.close();
  }
}
