/**
 * `make bench-profile` / `node bench/profile.ts [sync|async|webhooks ...]`: runs benchmarks with a CPU
 * profile (`node --cpu-prof`) of every Node process under load — the gateway on the sync path, the
 * gateway on the 202 path, the run worker draining the queue, the webhook dispatcher (unsigned and
 * signed), and beside the sync gateway the bare Node proxy that is its floor — and prints where each one's time went, by component, plus its busiest functions.
 * Each phase is its own `bench/run.ts` run, so one profile holds one kind of work. Settings: docs/benchmarks.md.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type CpuProfile, summarise, topFunctions } from './profile-summary.ts';
import { BENCH_DIR } from './support/parts.ts';
import { loadAverageNow } from './support/report.ts';

/** Which child (its bench/run.ts name) of which phase holds which piece's profile. */
const PHASES: Record<string, Array<[child: string, piece: string]>> = {
  sync: [
    ['gateway', 'gateway, sync calls (c=32)'],
    ['bare-proxy', 'bare Node proxy (the floor), sync calls (c=32)'],
  ],
  async: [
    ['gateway', 'gateway, async 202 accepts (c=32)'],
    ['gateway-worker', 'run worker, executing queued runs'],
  ],
  webhooks: [
    ['webhooks-unsigned', 'webhook dispatcher, unsigned'],
    ['webhooks-signed', 'webhook dispatcher, signed'],
  ],
};
/** Functions listed per piece. */
const TOP_FUNCTIONS = 8;

const names = process.argv.slice(2);
const unknown = names.filter((n) => !(n in PHASES));
if (unknown.length) {
  process.stderr.write(
    `unknown phase(s): ${unknown.join(', ')}; choose from ${Object.keys(PHASES).join(', ')}\n`,
  );
  process.exit(2);
}
const dir = process.env.BENCH_PROFILE_DIR ?? mkdtempSync(join(tmpdir(), 'apphost-profile-'));
process.stdout.write(`profiles in ${dir}; load average at the start ${loadAverageNow()}\n`);

const rows: Array<{ piece: string; busyMs: number; shares: Array<[string, number]> }> = [];
for (const phase of names.length ? names : Object.keys(PHASES)) {
  const phaseDir = join(dir, phase);
  const r = spawnSync(process.execPath, [join(BENCH_DIR, 'run.ts'), phase], {
    stdio: 'inherit',
    env: {
      BENCH_ROUNDS: '1',
      BENCH_NGINX: 'none',
      ...process.env,
      BENCH_RESULTS_FILE: '',
      BENCH_PROFILE_DIR: phaseDir,
    },
  });
  if (r.status !== 0)
    process.stderr.write(`bench/run.ts ${phase} exited ${r.status}; summarising what was written\n`);
  for (const [child, piece] of PHASES[phase] ?? []) {
    const childDir = join(phaseDir, child);
    const files = existsSync(childDir) ? readdirSync(childDir).filter((f) => f.endsWith('.cpuprofile')) : [];
    if (!files[0]) {
      process.stdout.write(`\n${piece}: no profile in ${childDir}\n`);
      continue;
    }
    const profile = JSON.parse(readFileSync(join(childDir, files[0]), 'utf8')) as CpuProfile;
    const { busyMs, shares } = summarise(profile);
    rows.push({ piece, busyMs, shares });
    process.stdout.write(`\n${piece}: busy ${busyMs.toFixed(0)} ms (${join(childDir, files[0])})\n`);
    for (const [k, s] of shares) process.stdout.write(`${(s * 100).toFixed(1).padStart(6)}%  ${k}\n`);
    process.stdout.write('  busiest functions (self time):\n');
    for (const [k, s] of topFunctions(profile, TOP_FUNCTIONS)) {
      process.stdout.write(`${(s * 100).toFixed(1).padStart(6)}%    ${k}\n`);
    }
  }
}

// One Markdown table, components as rows, pieces as columns (the form docs/benchmarks.md keeps).
const components = [...new Set(rows.flatMap((r) => r.shares.map(([k]) => k)))];
const pct = (r: (typeof rows)[number], k: string) => {
  const s = r.shares.find(([c]) => c === k)?.[1];
  return s === undefined ? '' : `${(s * 100).toFixed(1)}%`;
};
const weight = (k: string) => Math.max(...rows.map((r) => r.shares.find(([c]) => c === k)?.[1] ?? 0));
components.sort((a, b) => weight(b) - weight(a));
process.stdout.write(`\nload average at the end ${loadAverageNow()}\n\n`);
process.stdout.write(`| component | ${rows.map((r) => r.piece).join(' | ')} |\n`);
process.stdout.write(`|---|${rows.map(() => '---:').join('|')}|\n`);
process.stdout.write(
  `| busy CPU in the profile | ${rows.map((r) => `${r.busyMs.toFixed(0)} ms`).join(' | ')} |\n`,
);
for (const k of components) process.stdout.write(`| ${k} | ${rows.map((r) => pct(r, k)).join(' | ')} |\n`);
