/**
 * `node bench/accept-sequence.ts`: the async 202 in the NATS state `make bench`'s rows leave behind. Runs
 * the steps of ACCEPT_SEQUENCE (default `node,drain,native`: `bench/run.ts async`'s order) against one
 * nats-server (the chart's Go runtime env, with `GODEBUG=gctrace=1`): `node` / `native` = 3 s of warm-up,
 * then 10 s of the accept load (wrk, c=32, as `bench/run.ts async`) on the benchmark gateway in node mode /
 * with the native data plane (each started once and reused); `drain` = a gateway with its run worker on
 * executes the RUNS backlog (as the worker row; bound 90 s) and stops. Per load step: accepts/s, p50/p99,
 * CPU per accept of the gateway (Node and the data plane added up) and of nats-server, nats-server's RSS,
 * its GC cycles in the 10 s (wall time of each, heap at start → at end → live), and the RUNS stream's and
 * the run records' bucket's message counts. Nothing is written to RESULTS.md. Take the bench lock.
 */
import { readFileSync } from 'node:fs';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { RUNS_BUCKET, RUNS_STREAM } from '../src/shared/contracts/messaging.ts';
import { pickLoadGenerator } from './support/load.ts';
import {
  APP,
  createParts,
  natsServerPid,
  PROJECT,
  procCpuSeconds,
  procStatusBytes,
  REPO_ROOT,
  STOP_GRACE_MS,
  treeCpuSeconds,
} from './support/parts.ts';
import { loadAverageNow } from './support/report.ts';
import { sleep } from './support/stats.ts';
import { ECHO_BODY } from './sync-overhead.ts';

/** Bound on the `drain` step (the worker row's is 60 s; this one waits for an empty RUNS a while longer). */
const DRAIN_BOUND_MS = 90_000;
const WARMUP_SECONDS = 3;
const SECONDS = 10;

const steps = (process.env.ACCEPT_SEQUENCE ?? 'node,drain,native').split(',');
for (const s of steps)
  if (!['node', 'native', 'drain'].includes(s)) throw new Error(`ACCEPT_SEQUENCE: unknown step ${s}`);
const parts = createParts({ gatewayLogLevel: 'warn', gatewayNodeArgs: [] });
const load = pickLoadGenerator(REPO_ROOT, process.env.BENCH_LOAD_TOOL);
try {
  // nats-server (started with this environment) prints each GC cycle to its log.
  process.env.GODEBUG = 'gctrace=1';
  const nats = await parts.nats();
  delete process.env.GODEBUG;
  const token = await parts.token();
  const gcLines = () =>
    readFileSync(`${nats.dir}/nats.log`, 'utf8')
      .split('\n')
      .filter((l) => /^gc \d+ @/.test(l));
  const nc = await connect({ servers: nats.url });
  const jsm = await jetstreamManager(nc);
  const counts = async () => {
    const runs = (await jsm.streams.info(RUNS_STREAM)).state;
    const kv = (await jsm.streams.info(`KV_${RUNS_BUCKET}`)).state;
    return `RUNS ${runs.messages} messages; run records' bucket ${kv.messages} messages, ${kv.num_deleted ?? 0} deleted`;
  };
  const natsPid = natsServerPid(nats.port);
  for (const step of steps) {
    if (step === 'drain') {
      const worker = await parts.workerGateway();
      const t0 = Date.now();
      while ((await jsm.streams.info(RUNS_STREAM)).state.messages > 0 && Date.now() - t0 < DRAIN_BOUND_MS)
        await sleep(250);
      await worker.proc.stop(STOP_GRACE_MS);
      console.log(`drain: ${((Date.now() - t0) / 1000).toFixed(1)} s; ${await counts()}`);
      continue;
    }
    const gw = step === 'native' ? await parts.gatewayNative() : await parts.gateway();
    const spec = {
      url: `${gw.url}/v4/${PROJECT}/${APP}/echo?async=true`,
      method: 'POST' as const,
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: ECHO_BODY,
      connections: Number(process.env.BENCH_CONNECTIONS ?? 32),
      durationSeconds: WARMUP_SECONDS,
    };
    await load.run(spec);
    const gc0 = gcLines().length;
    const cpu0 = treeCpuSeconds(gw.pid);
    const natsCpu0 = procCpuSeconds(natsPid);
    const load0 = loadAverageNow();
    const r = await load.run({ ...spec, durationSeconds: SECONDS });
    const per = (s: number) => ((s * 1000) / Math.max(1, r.requests)).toFixed(3);
    const gw1 = treeCpuSeconds(gw.pid) - cpu0;
    const nats1 = procCpuSeconds(natsPid) - natsCpu0;
    const cycles = gcLines()
      .slice(gc0)
      .map((l) => {
        const wall = /: ([\d.]+)\+([\d.]+)\+([\d.]+) ms clock/.exec(l);
        const heap = /(\d+->\d+->\d+) MB/.exec(l)?.[1] ?? '?';
        const ms = wall ? Number(wall[1]) + Number(wall[2]) + Number(wall[3]) : Number.NaN;
        return `${ms.toFixed(0)} ms (${heap} MB)`;
      });
    console.log(
      `${step}: ${Math.round(r.rps)} accepts/s, p50 ${r.p50Ms.toFixed(2)} ms, p99 ${r.p99Ms.toFixed(2)} ms, ` +
        `${r.non2xx + r.errors} errors; CPU per accept gateway ${per(gw1)} ms, nats-server ${per(nats1)} ms; ` +
        `nats-server RSS ${(procStatusBytes(natsPid, 'VmRSS') / 2 ** 20).toFixed(0)} MiB, ` +
        `GC cycles in the ${SECONDS} s: ${cycles.length ? cycles.join(', ') : 'none'}; load ${load0} → ${loadAverageNow()}; ${await counts()}`,
    );
  }
  await nc.close();
} finally {
  await parts.stop();
}
