/**
 * `node bench/profile-summary.ts <file.cpuprofile>`: where a process's CPU time went, by component, from
 * a V8 CPU profile (e.g. the gateway's, with BENCH_GATEWAY_NODE_ARGS="--cpu-prof --cpu-prof-dir=DIR").
 * Each sample goes to the innermost stack frame that belongs to a known component; idle time is left out.
 */
import { readFileSync } from 'node:fs';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber?: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
export interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

export const COMPONENTS: Array<[string, (f: CallFrame) => boolean]> = [
  ['run tokens (jose / WebCrypto)', (f) => /jose|webcrypto|crypto\/cfrg|crypto\/util/.test(f.url)],
  ['undici (upstream client)', (f) => /undici/.test(f.url)],
  ['koa', (f) => /koa|delegates|on-finished|statuses|content-type|accepts/.test(f.url)],
  ['pino (logs)', (f) => /pino|sonic-boom/.test(f.url)],
  ['prom-client (metrics)', (f) => /prom-client/.test(f.url)],
  ['start-up (module loading, type stripping)', (f) => /esm\/|modules\/cjs|typescript|amaro/.test(f.url)],
  ['apphost code (src/)', (f) => /\/src\/(gateway|shared|runs|webhooks|operator|management)\//.test(f.url)],
  ['NATS client', (f) => /nats-io/.test(f.url)],
  ['node crypto (HMAC, hashes, random ids)', (f) => /internal\/crypto\//.test(f.url)],
  ['garbage collector', (f) => f.functionName === '(garbage collector)'],
  [
    'socket write syscalls',
    (f) => /^(writev|writeUtf8String|writeBuffer|writeLatin1String)$/.test(f.functionName),
  ],
  ['node http', (f) => /_http_server|_http_outgoing|_http_incoming|_http_common/.test(f.url)],
  ['node net / streams', (f) => /node:net|streams|stream_base/.test(f.url)],
];

export function summarise(profile: CpuProfile): { busyMs: number; shares: Array<[string, number]> } {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const selfUs = new Map<number, number>();
  profile.samples.forEach((id, i) => {
    selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  });
  const byComponent = new Map<string, number>();
  let busy = 0;
  for (const [id, us] of selfUs) {
    if (byId.get(id)?.callFrame.functionName === '(idle)') continue;
    busy += us;
    let component = 'other';
    for (
      let cur: number | undefined = id;
      cur !== undefined && component === 'other';
      cur = parent.get(cur)
    ) {
      const frame = byId.get(cur)?.callFrame;
      if (!frame) break;
      component = COMPONENTS.find(([, match]) => match(frame))?.[0] ?? 'other';
    }
    byComponent.set(component, (byComponent.get(component) ?? 0) + us);
  }
  const shares = [...byComponent.entries()]
    .map(([k, us]): [string, number] => [k, busy ? us / busy : 0])
    .sort((a, b) => b[1] - a[1]);
  return { busyMs: busy / 1000, shares };
}

/** The functions with the most self time (idle left out), as `name (file:line)` and share of busy time. */
export function topFunctions(profile: CpuProfile, n: number): Array<[string, number]> {
  const selfUs = new Map<number, number>();
  profile.samples.forEach((id, i) => {
    selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  });
  const byFunction = new Map<string, number>();
  let busy = 0;
  for (const node of profile.nodes) {
    const us = selfUs.get(node.id) ?? 0;
    const f = node.callFrame;
    if (!us || f.functionName === '(idle)') continue;
    busy += us;
    const file = f.url.replace(/^.*\/(node_modules\/)/, '$1').replace(/^.*\/src\//, 'src/');
    const key = `${f.functionName || '(anonymous)'}${file ? ` (${file}:${(f.lineNumber ?? 0) + 1})` : ''}`;
    byFunction.set(key, (byFunction.get(key) ?? 0) + us);
  }
  return [...byFunction.entries()]
    .map(([k, us]): [string, number] => [k, busy ? us / busy : 0])
    .sort((a, b) => b[1] - a[1])
    .slice(0, n);
}

if (import.meta.main) {
  const file = process.argv[2];
  if (!file) {
    process.stderr.write('usage: node bench/profile-summary.ts <file.cpuprofile>\n');
    process.exit(2);
  }
  const { busyMs, shares } = summarise(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile);
  process.stdout.write(`busy ${busyMs.toFixed(0)} ms (idle left out)\n`);
  for (const [k, share] of shares) process.stdout.write(`${(share * 100).toFixed(1).padStart(6)}%  ${k}\n`);
}
