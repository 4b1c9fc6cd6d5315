/**
 * `node bench/pod-idle.ts <name>=<commit>[+<data plane binary>][:<node flags>] ...`: the pod's idle of the
 * benchmark gateway in native mode (what the chart installs), as `make bench`'s memory row reads it
 * (bench/sync-overhead.ts): Node's VmRSS right after the gateway prints `listening`, plus the data plane's
 * own pages (addedRssBytes: its anonymous memory and the files Node does not map). Each commit's bench
 * entry is compiled and bundled as `make bench` does (compileGatewayEntry with the commit's hack/bundle.ts);
 * the data plane is build/bin/apphost-dataplane (`make build-native`) unless a variant names another
 * binary; every gateway gets the chart's NODE_OPTIONS and malloc env (this checkout's values.yaml), then the
 * variant's flags. Rounds are interleaved (the order reversed every other round), one gateway at a time
 * against one NATS server and runtime; per round and variant: Node's RSS split into file-backed and
 * anonymous (smaps_rollup), the data plane's own, the sum, and the sum again POD_IDLE_SECONDS later.
 * Settings: POD_IDLE_ROUNDS (6), POD_IDLE_SECONDS (3), POD_IDLE_TRAFFIC (1: during those seconds the
 * gateway gets a pod's idle traffic — probes and a Prometheus scrape, support/idle-traffic.ts — as `make
 * bench`'s settled reading; 0: nothing). Nothing is written to RESULTS.md. Run it under the bench lock. docs/benchmarks.md, "The pod's idle (issue 16, thirteenth round)".
 */
import { join } from 'node:path';
import { compileCommitGateways } from './support/commit-tree.ts';
import { settleIdle } from './support/idle-traffic.ts';
import {
  addedRssBytes,
  anonymousBytes,
  createParts,
  processTree,
  procStatusBytes,
  REPO_ROOT,
  STOP_GRACE_MS,
} from './support/parts.ts';
import { envNumber, loadAverageNow } from './support/report.ts';

const ROUNDS = envNumber('POD_IDLE_ROUNDS', 6);
const LATER_SECONDS = envNumber('POD_IDLE_SECONDS', 3);
const TRAFFIC = envNumber('POD_IDLE_TRAFFIC', 1) > 0;
const DEFAULT_BIN = join(REPO_ROOT, 'build', 'bin', 'apphost-dataplane');

const specs = process.argv.slice(2).map((arg) => {
  const m = /^([\w.-]+)=([^:+]+)(?:\+([^:]+))?(?::(.*))?$/.exec(arg);
  if (!m?.[1] || !m[2])
    throw new Error(`"${arg}" is not <name>=<commit>[+<data plane binary>][:<node flags>]`);
  return {
    name: m[1],
    commit: m[2],
    bin: m[3] ?? DEFAULT_BIN,
    flags: (m[4] ?? '').split(' ').filter(Boolean),
  };
});
if (specs.length < 1) {
  process.stderr.write(
    'usage: node bench/pod-idle.ts <name>=<commit>[+<data plane binary>][:<node flags>] ...\n',
  );
  process.exit(2);
}
const load = loadAverageNow;
const mib = (bytes: number) => (bytes / 1048576).toFixed(2);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;

// Each commit's benchmark gateway compiled and bundled as `make bench` does.
const entries = await compileCommitGateways(
  specs.map((s) => s.commit),
  'apphost-pod-idle-',
);

const parts = createParts({ gatewayLogLevel: 'warn', gatewayNodeArgs: [] });
try {
  await Promise.all([parts.nats(), parts.runtime()]);
  process.stdout.write(
    `load average ${load()} at the start; ${LATER_SECONDS} s later: ${TRAFFIC ? "with a pod's idle traffic" : 'no traffic'}\n`,
  );
  const results = new Map<
    string,
    Array<{ pod: number; later: number; node: number; anon: number; dp: number; laterAnon: number }>
  >();
  for (let round = 0; round < ROUNDS; round++) {
    for (const s of round % 2 ? [...specs].reverse() : specs) {
      const g = await parts.startNativeGateway(
        `gateway-${s.name}-${round}`,
        entries.get(s.commit) ?? '',
        s.bin,
        s.flags,
      );
      try {
        // As bench/sync-overhead.ts: read once the gateway listens.
        const dpPid = processTree(g.pid).find((p) => p !== g.pid) ?? 0;
        const node = procStatusBytes(g.pid, 'VmRSS');
        const anon = anonymousBytes(g.pid);
        const dp = addedRssBytes(dpPid, g.pid);
        const podNow = () => procStatusBytes(g.pid, 'VmRSS') + addedRssBytes(dpPid, g.pid);
        if (TRAFFIC) await settleIdle([{ opsUrl: g.opsUrl, read: podNow }], LATER_SECONDS);
        else await new Promise((r) => setTimeout(r, LATER_SECONDS * 1000));
        const later = podNow();
        const laterAnon = anonymousBytes(g.pid);
        const r = { pod: node + dp, later, node, anon, dp, laterAnon };
        results.set(s.name, [...(results.get(s.name) ?? []), r]);
        process.stdout.write(
          `round ${round + 1} ${s.name}: pod ${mib(r.pod)} MiB = Node ${mib(node)} (file-backed ${mib(node - anon)}, ` +
            `anonymous ${mib(anon)}) + data plane ${mib(dp)}; ${LATER_SECONDS} s later ${mib(later)} (Node's anonymous ${mib(laterAnon)}) (load ${load()})\n`,
        );
      } finally {
        await g.proc.stop(STOP_GRACE_MS);
      }
    }
  }
  for (const { name } of specs) {
    const rs = results.get(name) ?? [];
    const pick = (k: keyof (typeof rs)[number]) => rs.map((r) => r[k]);
    process.stdout.write(
      `${name}: pod median ${mib(median(pick('pod')))} MiB (${pick('pod').map(mib).join(' / ')}); Node ${mib(median(pick('node')))} ` +
        `(anonymous ${mib(median(pick('anon')))}), data plane ${mib(median(pick('dp')))}; ${LATER_SECONDS} s later ${mib(median(pick('later')))} (${pick('later').map(mib).join(' / ')}; Node's anonymous ${mib(median(pick('laterAnon')))})\n`,
    );
  }
  process.stdout.write(`load average ${load()} at the end\n`);
} finally {
  await parts.stop();
}
