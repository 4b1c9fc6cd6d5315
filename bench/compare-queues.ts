/**
 * `node bench/compare-queues.ts worker|webhooks <variant> <variant> ...`: the run worker or the webhook
 * dispatcher of several commits (or one commit with different settings) on one NATS server, one runtime
 * and one receiver, the rounds interleaved (the order reversed every other round) so a burst of other work
 * on the machine hits every variant alike. A variant is `<name>=<commit>[:<ENV>=<value>,...]`, e.g.
 * `before=f1d2468 after=HEAD after-c64=HEAD:APPHOST_WEBHOOK_CONCURRENCY=64`; each commit's `src/` and
 * `bench/` are exported (`git archive`) into a temp directory that uses this checkout's node_modules.
 * worker: per round and variant, `COMPARE_ACCEPT_SECONDS` (5) of `?async=true` calls through this
 * checkout's gateway (c=32) queue runs, then a gateway with the variant's run worker drains RUNS (at most
 * 60 s). webhooks: `BENCH_WEBHOOK_WARMUP` (20,000) + `BENCH_WEBHOOK_BACKLOG` (10,000) unsigned, then as
 * many signed jobs are queued, and the variant's new dispatcher drains them; the first `BENCH_WEBHOOK_WARMUP`
 * warm it up (JIT, heap) and are not measured, as in bench/webhooks.ts. Prints units/s and the CPU per unit of the variant's process, of
 * nats-server, and of the runtime (worker) or of this process (the webhook receiver), from /proc/<pid>/stat
 * while it drains, and the variant's write syscalls per unit (/proc/<pid>/io), with the load average.
 * `COMPARE_ROUNDS` (3). Nothing is written to RESULTS.md. Run it under the bench lock on a shared machine.
 */
import { createHmac, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { RUNS_STREAM, type WebhookJob } from '../src/shared/contracts/messaging.ts';
import { createSecretBox } from '../src/shared/secretbox.ts';
import { publishWebhookJob } from '../src/webhooks/publish.ts';
import { ensureWebhooksConsumer } from '../src/webhooks/stream.ts';
import { freePort, waitFor } from '../test/harness/process.ts';
import { exportCommitTree } from './support/commit-tree.ts';
import { pickLoadGenerator } from './support/load.ts';
import {
  APP,
  benchApp,
  chartGatewayNodeOptions,
  createParts,
  natsServerPid,
  PLATFORM_KEY,
  PROJECT,
  REPO_ROOT,
  STOP_GRACE_MS,
  startNodeChild,
  treeCpuSeconds,
  writeSyscalls,
} from './support/parts.ts';
import { loadAverageNow } from './support/report.ts';
import { ECHO_BODY } from './sync-overhead.ts';

const [what, ...args] = process.argv.slice(2);
if ((what !== 'worker' && what !== 'webhooks') || args.length === 0) {
  process.stderr.write(
    'usage: node bench/compare-queues.ts worker|webhooks name=commit[:ENV=value,...] ...\n',
  );
  process.exit(2);
}
const rounds = Number(process.env.COMPARE_ROUNDS ?? 3);
const ACCEPT_SECONDS = Number(process.env.COMPARE_ACCEPT_SECONDS ?? 5);
const BACKLOG = Number(process.env.BENCH_WEBHOOK_BACKLOG ?? 10_000);
/** Jobs queued before each measured backlog and drained unmeasured by the same new dispatcher (as bench/webhooks.ts). */
const WARMUP = Number(process.env.BENCH_WEBHOOK_WARMUP ?? 20_000);

/** One tree per commit: its src/ and bench/ (and test/harness, which bench imports), this node_modules. */
const trees = new Map<string, string>();
const variants = args.map((s) => {
  const [name, rest] = s.split(/=(.*)/s) as [string, string];
  const [commit, envs] = rest.split(/:(.*)/s) as [string, string | undefined];
  const env = Object.fromEntries(
    (envs ?? '')
      .split(',')
      .filter(Boolean)
      .map((kv) => kv.split(/=(.*)/s)),
  );
  if (!trees.has(commit)) {
    const dir = exportCommitTree(
      commit,
      ['src', 'bench', 'test/harness', 'charts'],
      'apphost-compare-queues-',
    );
    trees.set(commit, dir);
  }
  return { name, dir: trees.get(commit) as string, env: env as Record<string, string> };
});
const SECRET = 'bench-webhook-secret';
/** Bound on draining one backlog. */
const DRAIN_BOUND_MS = 60_000;

const parts = createParts({ gatewayLogLevel: 'warn', gatewayNodeArgs: [] });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const out: string[] = [];
const say = (s: string) => {
  out.push(s);
  process.stdout.write(`${s}\n`);
};

try {
  const n = await parts.nats();
  const nPid = natsServerPid(n.port);
  const nc = await connect({ servers: n.url });
  const jsm = await jetstreamManager(nc);
  if (what === 'worker') {
    const load = pickLoadGenerator(REPO_ROOT, undefined);
    const [gw, token, rt] = await Promise.all([parts.gateway(), parts.token(), parts.runtime()]);
    const url = `${gw.url}/v4/${PROJECT}/${APP}/echo?async=true`;
    const headers = { 'content-type': 'application/json', authorization: `Bearer ${token}` };
    const messages = async () => (await jsm.streams.info(RUNS_STREAM)).state.messages;
    for (let r = 1; r <= rounds; r++) {
      for (const v of r % 2 ? variants : [...variants].reverse()) {
        const l0 = loadAverageNow();
        await load.run({
          url,
          method: 'POST',
          headers,
          body: ECHO_BODY,
          connections: 32,
          durationSeconds: ACCEPT_SECONDS,
        });
        const backlog = await messages();
        const [port, opsPort] = await Promise.all([freePort(), freePort()]);
        const { proc, line } = await startNodeChild(
          `worker-${v.name}-${r}`,
          join(v.dir, 'bench', 'gateway-entry.ts'),
          {
            NATS_URL: n.url,
            APPHOST_LOG_LEVEL: 'warn',
            APPHOST_OPS_PORT: String(opsPort),
            APPHOST_GATEWAY_PORT: String(port),
            APPHOST_GATEWAY_HOST: '127.0.0.1',
            APPHOST_PLATFORM_KEY: PLATFORM_KEY,
            APPHOST_RUN_TOKEN_KEYS_FILE: join(parts.logDir, 'run-token-keys.json'),
            APPHOST_RUN_WORKER: 'true',
            APPHOST_GATEWAY_PROCESSES: '1',
            APPHOST_BENCH_APPS: JSON.stringify([benchApp(rt.url)]),
            NODE_OPTIONS: chartGatewayNodeOptions(),
            ...v.env,
          },
          'listening ',
          parts.logDir,
        );
        const pid = Number(line.split(' ')[2]);
        const c0 = treeCpuSeconds(pid);
        const nc0 = treeCpuSeconds(nPid);
        const rc0 = treeCpuSeconds(rt.proc.child.pid as number);
        const w0 = writeSyscalls(pid);
        const t0 = Date.now();
        let left = backlog;
        while (left > 0 && Date.now() - t0 < DRAIN_BOUND_MS) {
          await sleep(100);
          left = await messages();
        }
        const s = (Date.now() - t0) / 1000;
        const done = backlog - left;
        const per = (c: number) => ((c * 1000) / Math.max(done, 1)).toFixed(3);
        say(
          `round ${r} ${v.name}: ${done}/${backlog} runs in ${s.toFixed(1)} s = ${Math.round(done / s)} runs/s; ` +
            `worker ${per(treeCpuSeconds(pid) - c0)} ms/run (${((writeSyscalls(pid) - w0) / Math.max(done, 1)).toFixed(2)} writes), nats ${per(treeCpuSeconds(nPid) - nc0)} ms/run, ` +
            `runtime ${per(treeCpuSeconds(rt.proc.child.pid as number) - rc0)} ms/run; load ${l0} → ${loadAverageNow()}`,
        );
        await proc.stop(STOP_GRACE_MS);
        // Runs left at the bound join the next variant's backlog.
      }
    }
  } else {
    await ensureWebhooksConsumer(jsm);
    const js = jetstream(nc);
    const box = createSecretBox(PLATFORM_KEY);
    const hits = new Map<string, number>();
    let onHit: ((rid: string) => void) | undefined;
    let bad = 0;
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const rid = String(req.headers['x-request-id'] ?? '');
        const sig = req.headers['x-service-webhook-signature'];
        if (sig !== undefined) {
          const body = Buffer.concat(chunks).toString('utf8');
          const want = createHmac('sha256', SECRET)
            .update(`${rid}.${req.headers['x-service-webhook-timestamp']}.${body}`, 'utf8')
            .digest('hex');
          if (sig !== `v1,${want}`) bad++;
        }
        if (!hits.has(rid)) {
          hits.set(rid, Date.now());
          onHit?.(rid);
        }
        res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
      });
    });
    const port = await freePort();
    await new Promise<void>((r) => server.listen(port, '127.0.0.1', () => r()));
    const endpoint = `http://127.0.0.1:${port}/hook`;
    for (let r = 1; r <= rounds; r++) {
      for (const v of r % 2 ? variants : [...variants].reverse()) {
        for (const signed of [false, true]) {
          const jobs: WebhookJob[] = Array.from({ length: WARMUP + BACKLOG }, () => {
            const requestId = `q-${randomUUID()}`;
            return {
              v: 1,
              requestId,
              projectId: 'bench',
              appName: 'echo',
              target: { endpoint, ...(signed ? { sealedSecret: box.seal(SECRET) } : {}) },
              response: {
                status: 200,
                contentType: 'application/json',
                bodyBase64: Buffer.from(JSON.stringify({ rid: requestId, user: 'bench', n: 42 })).toString(
                  'base64',
                ),
              },
              runStatus: 'success',
              completedAt: new Date().toISOString(),
            };
          });
          let next = 0;
          await Promise.all(
            Array.from({ length: 64 }, async () => {
              while (next < jobs.length) await publishWebhookJob(js, jobs[next++] as WebhookJob, 30_000);
            }),
          );
          const l0 = loadAverageNow();
          const opsPort = await freePort();
          const { proc, line } = await startNodeChild(
            `hooks-${v.name}-${r}-${signed}`,
            join(v.dir, 'bench', 'webhooks-entry.ts'),
            {
              NATS_URL: n.url,
              APPHOST_PLATFORM_KEY: PLATFORM_KEY,
              APPHOST_OPS_PORT: String(opsPort),
              APPHOST_LOG_LEVEL: 'warn',
              APPHOST_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8',
              ...v.env,
            },
            'started',
            parts.logDir,
          );
          const pid = Number(line.split(' ')[1]);
          const mark = () => {
            const me = process.cpuUsage();
            return {
              c: treeCpuSeconds(pid),
              n: treeCpuSeconds(nPid),
              w: writeSyscalls(pid),
              me: (me.user + me.system) / 1e6,
            };
          };
          // The measured jobs are the last BACKLOG; their first hit ends the warm-up, their last the drain.
          const ids = jobs.slice(WARMUP).map((j) => j.requestId);
          const measured = new Set(ids);
          let seen = 0;
          let from = mark();
          let to: ReturnType<typeof mark> | undefined;
          onHit = (rid) => {
            if (!measured.has(rid)) return;
            seen++;
            if (seen === 1 && WARMUP > 0) from = mark();
            if (seen === ids.length) to = mark();
          };
          await waitFor('drained', async () => ids.every((id) => hits.has(id)), DRAIN_BOUND_MS * 3, 20);
          onHit = undefined;
          const end = to ?? mark();
          const times = ids.map((id) => hits.get(id) as number);
          const span = (Math.max(...times) - Math.min(...times)) / 1000;
          const per = (c: number) => ((c * 1000) / ids.length).toFixed(3);
          say(
            `round ${r} ${v.name} ${signed ? 'signed' : 'unsigned'}: ${Math.round((ids.length - 1) / span)} deliveries/s; ` +
              `dispatcher ${per(end.c - from.c)} ms/job (${((end.w - from.w) / ids.length).toFixed(2)} writes), nats ${per(end.n - from.n)} ms/job, ` +
              `receiver+bench ${per(end.me - from.me)} ms/job; bad ${bad}; load ${l0} → ${loadAverageNow()}`,
          );
          await proc.stop(STOP_GRACE_MS);
        }
      }
    }
    server.closeAllConnections();
    server.close();
  }
  await nc.close();
} finally {
  await parts.stop();
  process.stdout.write(`\nSUMMARY\n${out.join('\n')}\n`);
}
