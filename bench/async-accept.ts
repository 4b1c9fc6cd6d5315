/**
 * (2) Async accept: `?async=true` calls through the gateway under load. Each 202 is sent only after
 * real JetStream (file storage) has acknowledged the run, so accepted runs/s is the durable-queueing
 * rate. The run worker is off in the benchmark gateway, so the figure is the accept path alone; the RUNS
 * stream's message count is checked against the 202s counted by the load generator.
 */
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { RUNS_STREAM } from '../src/shared/contracts/messaging.ts';
import { type BenchContext, errorNote } from './support/context.ts';
import { APP, PROJECT } from './support/parts.ts';
import { fmtMs, fmtRate } from './support/stats.ts';
import { ECHO_BODY } from './sync-overhead.ts';

export async function asyncAccept(ctx: BenchContext): Promise<void> {
  const { report, settings, load } = ctx;
  if (!load) {
    report.unavailable('async', 'accept', ctx.loadMissing ?? 'no load generator');
    return;
  }
  const [gw, token, nats] = await Promise.all([ctx.parts.gateway(), ctx.parts.token(), ctx.parts.nats()]);
  const url = `${gw.url}/v4/${PROJECT}/${APP}/echo?async=true`;
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${token}` };

  const probe = await fetch(url, { method: 'POST', headers, body: ECHO_BODY });
  const probeBody = (await probe.json()) as { run_id?: string };
  if (probe.status !== 202 || typeof probeBody.run_id !== 'string') {
    throw new Error(
      `async call answered ${probe.status} ${JSON.stringify(probeBody)}; expected 202 {run_id}`,
    );
  }

  const nc = await connect({ servers: nats.url });
  try {
    const jsm = await jetstreamManager(nc);
    const messages = async () => (await jsm.streams.info(RUNS_STREAM)).state.messages;
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
    const r = await load.run({ ...spec, durationSeconds: settings.durationSeconds });
    const queued = (await messages()) - before;
    const accepted = r.requests - r.non2xx;
    report.row({
      benchmark: 'async',
      variant: 'gateway 202 accept (JetStream)',
      throughput: fmtRate(accepted / r.durationSeconds, 'runs/s'),
      p50: fmtMs(r.p50Ms),
      p99: fmtMs(r.p99Ms),
      other: `c=${settings.connections}; ${accepted} accepted, RUNS stream +${queued} messages${errorNote(r)}`,
    });
    if (queued < accepted) {
      report.note(
        `async: RUNS gained ${queued} messages for ${accepted} 202s: runs were acknowledged but not queued!`,
      );
    }
  } finally {
    await nc.close();
  }
}
