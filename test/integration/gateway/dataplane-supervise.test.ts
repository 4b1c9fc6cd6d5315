/**
 * The data plane's supervisor (src/gateway/dataplane/supervise.ts) around the real binary
 * (`make build-native`): the start handshake, readiness, the exits the design names and the respawn
 * backoff, the SIGTERM sequence. A fake child only where the binary cannot produce the fault (a hello
 * of another protocol).
 */
import { spawn as spawnProcess } from 'node:child_process';
import { connect } from 'node:net';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { Registry } from 'prom-client';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_BALANCER_SETTINGS } from '../../../src/gateway/balancer/balancer.ts';
import { createStateFeed, type StateFeed } from '../../../src/gateway/dataplane/feed.ts';
import { procUsage } from '../../../src/gateway/dataplane/proc-usage.ts';
import { type ConfigMessage, frame } from '../../../src/gateway/dataplane/protocol.ts';
import {
  DATAPLANE_PONG_TIMEOUT_MS,
  type DataPlaneChild,
  type DataPlaneSupervisor,
  type SpawnDataPlane,
  spawnDataPlane,
  superviseDataPlane,
} from '../../../src/gateway/dataplane/supervise.ts';
import { PROCESS_ANSWER_TIMEOUT_MS } from '../../../src/gateway/questions.ts';
import { createLogger } from '../../../src/shared/log.ts';
import { freePort, waitFor } from '../../harness/process.ts';
import { buildDataPlane, noCargo } from './dataplane-binary.ts';
import { resolvedApp, tempDir } from './helpers.ts';

const skip = noCargo();
let bin = '';
beforeAll(() => {
  if (!skip) bin = buildDataPlane();
});

/** A child as spawned, with when it started and how it ended. */
interface Spawned {
  child: DataPlaneChild;
  at: number;
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>;
}

interface Harness {
  sup: DataPlaneSupervisor;
  feed: StateFeed;
  registry: Registry;
  spawned: Spawned[];
  logs: Array<Record<string, unknown>>;
  port: number;
}

const running: DataPlaneSupervisor[] = [];
afterEach(async () => {
  for (const sup of running.splice(0)) await sup.drain();
});

async function start(
  opts: {
    spawn?: SpawnDataPlane;
    drainTimeoutMs?: number;
    feed?: (f: StateFeed) => StateFeed;
    wedgedMs?: number;
  } = {},
): Promise<Harness> {
  const port = await freePort();
  const config: ConfigMessage = {
    type: 'config',
    listen: { host: '127.0.0.1', port },
    handoffSocket: join(tempDir('apphost-dp-'), 'handoff.sock'),
    gateway: {
      maxBodyBytes: 6_291_456,
      syncTimeoutMs: 60_000,
      streamIdleTimeoutMs: 30_000,
      retryAfterSeconds: 1,
      drainTimeoutMs: opts.drainTimeoutMs ?? 2_000,
      connectionHandoverMs: 500,
      coldStartTimeoutMs: 60_000,
      handoffMarginMs: 5_000,
      syncRecordsPerAppPerSecond: 1,
      syncRecordsPerSecond: 100,
    },
    balancer: { ...DEFAULT_BALANCER_SETTINGS, routing: 'endpoints' },
    tokenCacheMaxEntries: 100,
    loadReportIntervalMs: 1_000,
    logLevel: 'warn',
  };
  const feed = createStateFeed({
    gen: `gen-${port}`,
    balancer: DEFAULT_BALANCER_SETTINGS,
    tokenCacheMaxEntries: 100,
    now: Date.now,
  });
  feed.apps.setApp(resolvedApp('p', 'a', 'http://127.0.0.1:1'));
  const logs: Array<Record<string, unknown>> = [];
  const log = createLogger({
    name: 'test',
    level: 'debug',
    destination: new Writable({
      write(chunk, _enc, cb) {
        for (const line of String(chunk).split('\n')) if (line) logs.push(JSON.parse(line));
        cb();
      },
    }),
  });
  const spawned: Spawned[] = [];
  const real = opts.spawn ?? spawnDataPlane(bin, { APPHOST_GATEWAY_DATA_PLANE_THREADS: '1' });
  const registry = new Registry();
  const sup = superviseDataPlane({
    ...{ feed: opts.feed ? opts.feed(feed) : feed },
    spawn: () => {
      const child = real();
      const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>(
        (resolve) => child.onExit((code, signal) => resolve({ code, signal, at: Date.now() })),
      );
      spawned.push({ child, at: Date.now(), exit });
      return child;
    },
    config,
    log,
    registry,
    drainTimeoutMs: config.gateway.drainTimeoutMs,
    usage: procUsage(),
    ...(opts.wedgedMs ? { wedgedMs: opts.wedgedMs } : {}),
  });
  running.push(sup);
  sup.start();
  return { sup, feed, registry, spawned, logs, port };
}

const whenReady = (h: Harness, timeoutMs = 10_000) =>
  waitFor('the data plane ready', async () => h.sup.ready(), timeoutMs, 20);

/** Whether something accepts TCP connections on the port. */
const accepts = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });

const metric = async (h: Harness, name: string) =>
  (await h.registry.getSingleMetric(name)?.get())?.values[0]?.value;

describe.skipIf(!!skip)(
  `the data plane's supervisor, real binary${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    it('hello, config and the snapshot: the child listens on the port and says ready for this gen', async () => {
      const h = await start();
      expect(h.sup.ready()).toBe(false);
      await whenReady(h);
      expect(await accepts(h.port)).toBe(true);
      expect(h.logs.find((l) => l.msg === 'data plane started')).toMatchObject({ protocol: 1 });
      expect(await metric(h, 'apphost_gateway_dataplane_up')).toBe(1);
      expect(await metric(h, 'apphost_gateway_dataplane_state_seq')).toBe(0);
      // A delta after the snapshot: seq + 1, applied without a resync (a gap would ask for one).
      h.feed.apps.setApp(resolvedApp('p', 'b', 'http://127.0.0.1:1'));
      h.feed.replicas.setReplicas('p', 'b', [{ id: 'r', url: 'http://127.0.0.1:1' }]);
      await new Promise((r) => setTimeout(r, 1_200));
      expect(await metric(h, 'apphost_gateway_dataplane_state_seq')).toBe(2);
      expect(h.logs.filter((l) => l.msg === 'data plane asked for a resync')).toEqual([]);
      expect(h.sup.ready()).toBe(true);
      expect(h.spawned).toHaveLength(1);
    });

    it('spawned without a taker of handed connections (no onConnection): no IPC channel, and the data plane answers an async-first connection itself', async () => {
      const h = await start();
      await whenReady(h);
      // Here its answer is a 503 (no hand-off socket). With an IPC channel and nobody taking the socket,
      // the connection would be handed to Node and never answered.
      const head = await new Promise<string>((resolve, reject) => {
        const s = connect(h.port, '127.0.0.1');
        let got = '';
        const timer = setTimeout(() => {
          s.destroy();
          reject(new Error(`no answer within 5 s (got ${JSON.stringify(got)})`));
        }, 5_000);
        s.on('data', (d) => {
          got += String(d);
          if (got.includes('\r\n')) {
            clearTimeout(timer);
            s.destroy();
            resolve(got.split('\r\n')[0] ?? '');
          }
        });
        s.on('error', reject);
        s.write('POST /v4/p/a/run?async=true HTTP/1.1\r\nhost: gw\r\ncontent-length: 0\r\n\r\n');
      });
      expect(head).toBe('HTTP/1.1 503 Service Unavailable');
    });

    it('not ready while the state is not applied: hello matched, config sent, no snapshot yet', async () => {
      let release: (() => void) | undefined;
      const h = await start({
        feed: (f) => ({
          ...f,
          gen: f.gen,
          get seq() {
            return f.seq;
          },
          connect: (send) => {
            release = () => f.connect(send);
          },
        }),
      });
      await waitFor('hello', async () => h.logs.some((l) => l.msg === 'data plane started'), 10_000, 20);
      await new Promise((r) => setTimeout(r, 1_000));
      expect(h.sup.ready()).toBe(false);
      expect(await accepts(h.port)).toBe(false);
      release?.();
      await whenReady(h, 2_000);
      expect(await accepts(h.port)).toBe(true);
    });

    it('a frame the binary refuses: it exits 3, the supervisor is unready at once and respawns after 1 s, then 2 s', async () => {
      const h = await start();
      await whenReady(h);
      for (const [k, wantDelay] of [
        [0, 1_000],
        [1, 2_000],
      ] as const) {
        const s = h.spawned[k] as Spawned;
        s.child.channel.write(frame(Buffer.from('{"v":2,"type":"ping","id":1}')));
        const exit = await s.exit;
        expect(exit.code).toBe(3);
        expect(h.sup.ready()).toBe(false);
        expect(await metric(h, 'apphost_gateway_dataplane_up')).toBe(0);
        await waitFor('a respawn', async () => h.spawned.length === k + 2, wantDelay + 3_000, 20);
        const delay = (h.spawned[k + 1] as Spawned).at - exit.at;
        expect(delay).toBeGreaterThanOrEqual(wantDelay - 50);
        expect(delay).toBeLessThan(wantDelay + 1_000);
        await whenReady(h);
      }
      expect(h.sup.restarts()).toBe(2);
      expect(await metric(h, 'apphost_gateway_dataplane_restarts_total')).toBe(2);
      expect(h.logs.filter((l) => l.msg === 'data plane exited').map((l) => l.code)).toEqual([3, 3]);
    });

    it('SIGKILL of the child: unready at once, the port refuses, and a new child serves after the backoff', async () => {
      const h = await start();
      await whenReady(h);
      const first = h.spawned[0] as Spawned;
      first.child.kill('SIGKILL');
      const t0 = Date.now();
      await waitFor('unready', async () => !h.sup.ready(), 1_000, 5);
      expect(Date.now() - t0).toBeLessThan(200);
      expect((await first.exit).signal).toBe('SIGKILL');
      expect(await accepts(h.port)).toBe(false);
      await whenReady(h, 5_000);
      expect(h.spawned).toHaveLength(2);
      expect(await accepts(h.port)).toBe(true);
    });

    it('Node closing the channel: the child exits 0 and is started again', async () => {
      const h = await start();
      await whenReady(h);
      h.sup.closeChannel();
      expect(h.sup.ready()).toBe(false);
      expect((await (h.spawned[0] as Spawned).exit).code).toBe(0);
      await whenReady(h, 5_000);
      expect(h.spawned).toHaveLength(2);
    });

    it('a child that stops answering pings (SIGSTOP) is unready past the pong bound, and ready again when it answers', async () => {
      const h = await start();
      await whenReady(h);
      const { pid } = (h.spawned[0] as Spawned).child;
      process.kill(pid as number, 'SIGSTOP');
      try {
        const t0 = Date.now();
        await waitFor('unready', async () => !h.sup.ready(), DATAPLANE_PONG_TIMEOUT_MS + 2_000, 20);
        expect(Date.now() - t0).toBeGreaterThanOrEqual(DATAPLANE_PONG_TIMEOUT_MS - 600);
      } finally {
        process.kill(pid as number, 'SIGCONT');
      }
      await whenReady(h, 3_000);
      expect(h.spawned).toHaveLength(1);
    });

    it("a child stopped past the wedged bound is killed and started again (a stuck data plane would keep the pod unready for ever: liveness is Node's)", async () => {
      const h = await start({ wedgedMs: 1_500 });
      await whenReady(h);
      const first = h.spawned[0] as Spawned;
      process.kill(first.child.pid as number, 'SIGSTOP');
      const t0 = Date.now();
      const exit = await Promise.race([
        first.exit,
        new Promise<never>((_, reject) =>
          setTimeout(() => reject(new Error('the stopped child was not killed within 10 s')), 10_000),
        ),
      ]);
      expect(exit.signal).toBe('SIGKILL');
      expect(exit.at - t0).toBeGreaterThanOrEqual(1_500 - 600);
      expect(h.logs.some((l) => l.msg === 'data plane stopped answering pings: killed')).toBe(true);
      await whenReady(h, 5_000);
      expect(h.spawned).toHaveLength(2);
    });

    it("a scrape's ask-metrics: the child's series by the asked id; stopped, its last counters and histograms within the bound, the late answer dropped", async () => {
      const h = await start();
      await whenReady(h);
      const series = await h.sup.askMetrics();
      expect(series?.map((m) => m.name)).toContain('apphost_gateway_requests_total');
      expect(series?.find((m) => m.name === 'apphost_gateway_app_inflight_calls')?.values).toEqual([
        { labels: { project: 'p', app: 'a' }, value: 0 },
      ]);
      const { pid } = (h.spawned[0] as Spawned).child;
      process.kill(pid as number, 'SIGSTOP');
      let stopped: Awaited<ReturnType<DataPlaneSupervisor['askMetrics']>>;
      const t0 = Date.now();
      try {
        stopped = await h.sup.askMetrics();
      } finally {
        process.kill(pid as number, 'SIGCONT');
      }
      const waited = Date.now() - t0;
      // Not answered: the last answer's counters and histograms (they only grow), not its gauges.
      const kinds = (m: typeof series) => m?.map((x) => `${x.name} ${x.type}`).sort();
      expect(kinds(stopped)).toEqual(
        kinds(series?.filter((x) => ['counter', 'histogram'].includes(x.type as unknown as string))),
      );
      expect(stopped?.map((x) => x.name)).toContain('apphost_gateway_requests_total');
      expect(stopped?.map((x) => x.name)).not.toContain('apphost_gateway_app_inflight_calls');
      expect(waited).toBeGreaterThanOrEqual(PROCESS_ANSWER_TIMEOUT_MS - 50);
      expect(waited).toBeLessThan(PROCESS_ANSWER_TIMEOUT_MS + 1_000);
      // Resumed, the child answers the question given up (dropped: no protocol error, no exit), then the next.
      expect((await h.sup.askMetrics())?.length).toBe(series?.length);
      expect(h.logs.filter((l) => (l.level as number) >= 50)).toEqual([]);
      expect(h.spawned).toHaveLength(1);
      // A new child starts from 0 (a genuine reset): the killed one's last answer is not kept for it.
      (h.spawned[0] as Spawned).child.kill('SIGKILL');
      await (h.spawned[0] as Spawned).exit;
      expect(await h.sup.askMetrics()).toBeUndefined();
      await whenReady(h, 5_000);
      const next = (h.spawned[1] as Spawned).child.pid as number;
      process.kill(next, 'SIGSTOP');
      try {
        expect(await h.sup.askMetrics()).toBeUndefined();
      } finally {
        process.kill(next, 'SIGCONT');
      }
      // No child: undefined at once.
      await h.sup.drain();
      const t1 = Date.now();
      expect(await h.sup.askMetrics()).toBeUndefined();
      expect(Date.now() - t1).toBeLessThan(100);
    });

    it("the running child's CPU time and resident memory, as /proc counts them; none once it is gone", async () => {
      const h = await start();
      await whenReady(h);
      const pid = (h.spawned[0] as Spawned).child.pid as number;
      const usage = procUsage();
      const rss = (await metric(h, 'apphost_gateway_dataplane_resident_memory_bytes')) as number;
      expect(rss).toBeGreaterThan(1024 * 1024);
      expect(rss / ((await usage.residentBytes(pid)) as number)).toBeCloseTo(1, 1);
      const cpu = (await metric(h, 'apphost_gateway_dataplane_cpu_seconds_total')) as number;
      expect(cpu).toBeGreaterThanOrEqual(0);
      expect(cpu).toBeLessThanOrEqual((await usage.cpuSeconds(pid)) as number);
      await h.sup.drain();
      expect(await metric(h, 'apphost_gateway_dataplane_resident_memory_bytes')).toBe(0);
      expect(await metric(h, 'apphost_gateway_dataplane_cpu_seconds_total')).toBe(0);
    });

    it('SIGTERM sequence: drain{handover} closes the port, drain{drain} ends with drained and exit 0, no respawn', async () => {
      const h = await start();
      await whenReady(h);
      h.sup.handover();
      await waitFor('the listener closed', async () => !(await accepts(h.port)), 2_000, 20);
      const t0 = Date.now();
      await h.sup.drain();
      const exit = await (h.spawned[0] as Spawned).exit;
      expect(exit.code).toBe(0);
      expect(Date.now() - t0).toBeLessThan(2_000);
      expect(h.logs.find((l) => l.msg === 'data plane exited')).toMatchObject({ code: 0, drained: true });
      await new Promise((r) => setTimeout(r, 1_500));
      expect(h.spawned).toHaveLength(1);
      expect(h.sup.ready()).toBe(false);
    });

    it('a hello of another protocol (a fake child): both builds logged, the child killed, unready, respawned with backoff', async () => {
      // The binary always speaks its own protocol: a child that says hello with protocol 2, then waits.
      const script = `
      const s = new (require('node:net').Socket)({ fd: 3 });
      const p = Buffer.from(JSON.stringify({ v: 1, type: 'hello', protocol: 2, build: 'future-build' }));
      const f = Buffer.alloc(4); f.writeUInt32BE(p.length);
      s.write(Buffer.concat([f, p]));
      setInterval(() => {}, 1000);`;
      const fake: SpawnDataPlane = () => {
        const child = spawnProcess(process.execPath, ['-e', script], {
          stdio: ['ignore', 'inherit', 'inherit', 'pipe'],
        });
        const cbs: Array<(c: number | null, s: NodeJS.Signals | null) => void> = [];
        child.once('close', (c, s) => {
          for (const cb of cbs) cb(c, s);
        });
        return {
          pid: child.pid,
          channel: child.stdio[3] as DataPlaneChild['channel'],
          kill: (sig) => child.kill(sig),
          onExit: (cb) => cbs.push(cb),
        };
      };
      const h = await start({ spawn: fake });
      const exit = await (h.spawned[0] as Spawned).exit;
      expect(exit.signal).toBe('SIGKILL');
      expect(h.sup.ready()).toBe(false);
      const firstPid = (h.spawned[0] as Spawned).child.pid;
      // Logged once, as the skew it is (not a second time as a broken frame).
      expect(h.logs.filter((l) => l.pid === firstPid && l.level === 50)).toHaveLength(1);
      const skew = h.logs.find((l) => l.code === 'version_mismatch');
      expect(skew).toMatchObject({
        dataPlane: { protocol: 2, build: 'future-build' },
        gateway: { protocol: 1 },
      });
      await waitFor('a respawn', async () => h.spawned.length === 2, 3_000, 20);
      expect((h.spawned[1] as Spawned).at - exit.at).toBeGreaterThanOrEqual(950);
      expect(h.sup.ready()).toBe(false);
    });
  },
);
