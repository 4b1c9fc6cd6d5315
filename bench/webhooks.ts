/**
 * (4) Webhooks: the real dispatcher (its own process, `apphost webhooks` main) delivering to a local
 * receiver, unsigned and signed. Deliveries/s: a backlog of jobs queued on WEBHOOKS before the dispatcher
 * starts, drained as fast as it can (first to last hit). The backlog's first `webhookWarmup` jobs warm the
 * new process (JIT, heap) and are not measured, as the other rows' load has its unmeasured warm-up: the
 * rate and CPU per job are taken over the jobs queued after them. Delay: jobs published at a steady pace
 * while it runs, each stamped `completedAt` (the run's end, as the gateway and run worker stamp it) just
 * before its publish; delay = receiver hit − completedAt. Every signed delivery's signature is checked (§6.3).
 */
import { createHmac, randomUUID, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { type JetStreamClient, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { WebhookJob } from '../src/shared/contracts/messaging.ts';
import { createSecretBox } from '../src/shared/secretbox.ts';
import { publishWebhookJob } from '../src/webhooks/publish.ts';
import { ensureWebhooksConsumer } from '../src/webhooks/stream.ts';
import { freePort, waitFor } from '../test/harness/process.ts';
import type { BenchContext } from './support/context.ts';
import {
  BENCH_DIR,
  CLOCK_TICKS_PER_SECOND,
  natsServerPid,
  PLATFORM_KEY,
  procCpuSeconds,
  STOP_GRACE_MS,
  startNodeChild,
  treeCpuSeconds,
} from './support/parts.ts';
import { fmtMs, fmtRate, median, percentile, sleep } from './support/stats.ts';

/** Bound on all jobs of one phase reaching the receiver. */
export const WEBHOOK_PHASE_TIMEOUT_MS = 180_000;
/** Publishes in flight at once while queueing the backlog. */
export const PUBLISH_CONCURRENCY = 64;
const SECRET = 'bench-webhook-secret';

interface Hit {
  at: number;
  signatureOk: boolean | undefined;
}

interface Receiver {
  url: string;
  hits: Map<string, Hit>;
  duplicates: number;
  server: Server;
  /** Called on each first hit of a request id, in the request's own turn. */
  onHit?: (rid: string) => void;
}

function verify(headers: Record<string, string | string[] | undefined>, body: string): boolean {
  const sig = String(headers['x-service-webhook-signature'] ?? '');
  const ts = String(headers['x-service-webhook-timestamp'] ?? '');
  const rid = String(headers['x-request-id'] ?? '');
  if (!sig.startsWith('v1,')) return false;
  const want = createHmac('sha256', SECRET).update(`${rid}.${ts}.${body}`, 'utf8').digest();
  const got = Buffer.from(sig.slice(3), 'hex');
  return got.length === want.length && timingSafeEqual(got, want);
}

async function startReceiver(): Promise<Receiver> {
  const r: Receiver = { url: '', hits: new Map(), duplicates: 0, server: undefined as unknown as Server };
  r.server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = Date.now();
      const body = Buffer.concat(chunks).toString('utf8');
      let rid = String(req.headers['x-request-id'] ?? '');
      try {
        const j = JSON.parse(body) as { rid?: string; run_id?: string };
        rid ||= j.run_id ?? j.rid ?? '';
      } catch {
        // not JSON: keyed by header only
      }
      const signed = req.headers['x-service-webhook-signature'] !== undefined;
      if (r.hits.has(rid)) r.duplicates++;
      else {
        r.hits.set(rid, { at, signatureOk: signed ? verify(req.headers, body) : undefined });
        r.onHit?.(rid);
      }
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
    });
  });
  const port = await freePort();
  await new Promise<void>((resolve) => r.server.listen(port, '127.0.0.1', () => resolve()));
  r.url = `http://127.0.0.1:${port}/hook`;
  return r;
}

function job(requestId: string, endpoint: string, sealedSecret: string | undefined): WebhookJob {
  return {
    v: 1,
    requestId,
    projectId: 'bench',
    appName: 'echo',
    target: { endpoint, ...(sealedSecret ? { sealedSecret } : {}) },
    response: {
      status: 200,
      contentType: 'application/json',
      bodyBase64: Buffer.from(JSON.stringify({ rid: requestId, user: 'bench', n: 42 })).toString('base64'),
    },
    runStatus: 'success',
    completedAt: new Date().toISOString(),
  };
}

async function publishAll(js: JetStreamClient, jobs: WebhookJob[]): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: PUBLISH_CONCURRENCY }, async () => {
      while (next < jobs.length) {
        const j = jobs[next++] as WebhookJob;
        await publishWebhookJob(js, j, 30_000);
      }
    }),
  );
}

/** Busy CPU seconds of the whole machine so far: /proc/stat's first line less idle and iowait. */
function machineBusySeconds(): number {
  const f = (readFileSync('/proc/stat', 'utf8').split('\n', 1)[0] ?? '')
    .trim()
    .split(/\s+/)
    .slice(1, 9)
    .map(Number);
  return (f.reduce((a, b) => a + b, 0) - (f[3] ?? 0) - (f[4] ?? 0)) / CLOCK_TICKS_PER_SECOND;
}

/** CPU seconds so far of the dispatcher, nats-server, this process (the receiver) and the whole machine. */
interface CpuMark {
  dispatcher: number;
  nats: number;
  self: number;
  machine: number;
}

function cpuMark(pid: number, natsPid: number): CpuMark {
  const me = process.cpuUsage();
  return {
    dispatcher: treeCpuSeconds(pid),
    nats: procCpuSeconds(natsPid),
    self: (me.user + me.system) / 1e6,
    machine: machineBusySeconds(),
  };
}

/** ms of CPU per job between two marks, by process. */
function perJob(a: CpuMark, b: CpuMark, jobs: number): CpuMark {
  const ms = (k: keyof CpuMark) => ((b[k] - a[k]) * 1000) / jobs;
  return { dispatcher: ms('dispatcher'), nats: ms('nats'), self: ms('self'), machine: ms('machine') };
}

/** Deliveries/s over hits of `ids`: (N−1) ÷ (last hit − first hit). */
function rateOf(receiver: Receiver, ids: string[]): { rate: number; span: number } {
  let first = Number.POSITIVE_INFINITY;
  let last = Number.NEGATIVE_INFINITY;
  for (const id of ids) {
    const at = receiver.hits.get(id)?.at ?? Number.NaN;
    first = Math.min(first, at);
    last = Math.max(last, at);
  }
  const span = (last - first) / 1000;
  return { rate: span > 0 ? (ids.length - 1) / span : Number.NaN, span };
}

async function allDelivered(receiver: Receiver, ids: string[], what: string): Promise<void> {
  await waitFor(what, async () => ids.every((id) => receiver.hits.has(id)), WEBHOOK_PHASE_TIMEOUT_MS, 50);
}

export async function webhooks(ctx: BenchContext): Promise<void> {
  const { report, settings } = ctx;
  const nats = await ctx.parts.nats();
  const nc = await connect({ servers: nats.url });
  const receiver = await startReceiver();
  const box = createSecretBox(PLATFORM_KEY);
  const natsPid = natsServerPid(nats.port);
  try {
    await ensureWebhooksConsumer(await jetstreamManager(nc));
    const js = jetstream(nc);
    for (const signed of [false, true]) {
      const variant = signed ? 'signed' : 'unsigned';
      const seal = () => (signed ? box.seal(SECRET) : undefined);

      // In stream order: the warm-up jobs first, then the measured backlog.
      const warmup = Array.from({ length: settings.webhookWarmup }, () =>
        job(`bench-${variant}-w-${randomUUID()}`, receiver.url, seal()),
      );
      const backlog = Array.from({ length: settings.webhookBacklog }, () =>
        job(`bench-${variant}-b-${randomUUID()}`, receiver.url, seal()),
      );
      await publishAll(js, [...warmup, ...backlog]);

      const ids = backlog.map((j) => j.requestId);
      const measured = new Set(ids);
      let started: CpuMark | undefined;
      let firstMeasured: CpuMark | undefined;
      let lastMeasured: CpuMark | undefined;
      let measuredHits = 0;
      let pid = 0;
      // Marked in the receiver's own turn: the first measured hit ends the warm-up, the last one the drain.
      receiver.onHit = (rid) => {
        if (!measured.has(rid)) return;
        measuredHits++;
        if (!started) return;
        if (measuredHits === 1) firstMeasured = cpuMark(pid, natsPid);
        if (measuredHits === ids.length) lastMeasured = cpuMark(pid, natsPid);
      };
      const opsPort = await freePort();
      const { proc, line } = await startNodeChild(
        `webhooks-${variant}`,
        join(BENCH_DIR, 'webhooks-entry.ts'),
        {
          NATS_URL: nats.url,
          APPHOST_PLATFORM_KEY: PLATFORM_KEY,
          APPHOST_OPS_PORT: String(opsPort),
          APPHOST_LOG_LEVEL: 'warn',
          APPHOST_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8',
        },
        'started',
        ctx.parts.logDir,
      );
      try {
        // From its "started" line (start-up done): the warm-up jobs, then the measured backlog.
        pid = Number(line.split(' ')[1]); // "started <pid>"
        started = cpuMark(pid, natsPid);
        await allDelivered(receiver, ids, `${ids.length} ${variant} backlog deliveries`);
        const from = warmup.length ? (firstMeasured ?? started) : started;
        const warm = perJob(from, lastMeasured ?? cpuMark(pid, natsPid), ids.length);
        const { rate, span } = rateOf(receiver, ids);
        let cold = '';
        if (warmup.length > 1) {
          const w = rateOf(
            receiver,
            warmup.map((j) => j.requestId),
          );
          const c = perJob(started, firstMeasured ?? started, warmup.length);
          cold =
            `; the new process's first ${warmup.length} jobs (warm-up, not measured): ` +
            `${fmtRate(w.rate, 'deliveries/s')}, ≈${c.dispatcher.toFixed(3)} ms per job`;
        }

        const paced: WebhookJob[] = [];
        const gapMs = 1000 / settings.webhookRate;
        const t0 = Date.now();
        for (let i = 0; i < settings.webhookPaced; i++) {
          const wait = t0 + i * gapMs - Date.now();
          if (wait > 0) await sleep(wait);
          const j = job(`bench-${variant}-p-${randomUUID()}`, receiver.url, seal());
          paced.push(j);
          void publishWebhookJob(js, j, 30_000).catch((err) => {
            report.note(`webhooks: a paced publish failed: ${(err as Error).message}`);
          });
        }
        const pacedIds = paced.map((j) => j.requestId);
        await allDelivered(receiver, pacedIds, `${pacedIds.length} ${variant} paced deliveries`);
        const delays = paced.map(
          (j) => (receiver.hits.get(j.requestId)?.at ?? Number.NaN) - Date.parse(j.completedAt),
        );

        let badSignatures = 0;
        if (signed) {
          for (const id of [...ids, ...pacedIds])
            if (receiver.hits.get(id)?.signatureOk !== true) badSignatures++;
        }
        report.row({
          benchmark: 'webhooks',
          variant: `${variant} deliveries`,
          throughput: fmtRate(rate, 'deliveries/s'),
          p50: fmtMs(median(delays)),
          p99: fmtMs(percentile(delays, 99)),
          other:
            `backlog ${ids.length} drained in ${span.toFixed(2)} s after ${warmup.length} warm-up jobs, ≈${warm.dispatcher.toFixed(3)} ms of dispatcher CPU per job ` +
            `(nats-server ≈${warm.nats.toFixed(3)}, receiver ≈${warm.self.toFixed(3)}, the whole machine ≈${warm.machine.toFixed(3)} ms per job); ` +
            `delay over ${pacedIds.length} jobs at ${settings.webhookRate}/s` +
            (signed ? `; ${badSignatures} bad signatures` : '') +
            (receiver.duplicates ? `; ${receiver.duplicates} duplicate deliveries so far` : '') +
            cold,
        });
      } finally {
        receiver.onHit = undefined;
        await proc.stop(STOP_GRACE_MS);
      }
    }
  } finally {
    receiver.server.closeAllConnections();
    await new Promise<void>((r) => receiver.server.close(() => r()));
    await nc.close();
  }
}
