/**
 * Result rows: each benchmark reports rows as it finishes them (printed at once), and the run ends by
 * writing them all, with the machine they were measured on, to bench/RESULTS.md.
 */
import { spawnSync } from 'node:child_process';
import { availableParallelism, cpus, loadavg, totalmem } from 'node:os';

export interface Row {
  /** Which benchmark: "sync", "async", "streaming", "webhooks", "operator", "memory". */
  benchmark: string;
  /** What was measured within it: "direct runtime", "gateway", "ratio gateway/direct", ... */
  variant: string;
  throughput?: string;
  p50?: string;
  p99?: string;
  /** Anything else: ratios, counts, notes, or "not available: <why>". */
  other?: string;
}

export interface Reporter {
  row(r: Row): void;
  /** A benchmark that could not run: one row saying why, instead of failing the whole suite. */
  unavailable(benchmark: string, variant: string, why: string): void;
  note(text: string): void;
  rows(): readonly Row[];
  notes(): readonly string[];
}

const COLUMNS: Array<[keyof Row, string]> = [
  ['benchmark', 'Benchmark'],
  ['variant', 'Variant'],
  ['throughput', 'Throughput'],
  ['p50', 'p50'],
  ['p99', 'p99'],
  ['other', 'Other'],
];

export function createReporter(
  print: (line: string) => void = (l) => process.stdout.write(`${l}\n`),
): Reporter {
  const rows: Row[] = [];
  const notes: string[] = [];
  return {
    row(r) {
      rows.push(r);
      print(
        `  ${r.benchmark.padEnd(10)} ${r.variant.padEnd(34)} ${(r.throughput ?? '').padEnd(16)} ` +
          `${(r.p50 ?? '').padEnd(10)} ${(r.p99 ?? '').padEnd(10)} ${r.other ?? ''}`.trimEnd(),
      );
    },
    unavailable(benchmark, variant, why) {
      this.row({ benchmark, variant, other: `not available: ${why}` });
    },
    note(text) {
      notes.push(text);
      print(`  note: ${text}`);
    },
    rows: () => rows,
    notes: () => notes,
  };
}

const cell = (s: string | undefined) => (s ?? '').replaceAll('|', '\\|').replaceAll('\n', ' ');

export function markdownTable(rows: readonly Row[]): string {
  const head = `| ${COLUMNS.map(([, t]) => t).join(' | ')} |`;
  const sep = `|${COLUMNS.map(() => '---').join('|')}|`;
  const body = rows.map((r) => `| ${COLUMNS.map(([k]) => cell(r[k])).join(' | ')} |`);
  return [head, sep, ...body].join('\n');
}

export interface MachineInfo {
  date: string;
  cores: number;
  cpuModel: string;
  memoryGiB: string;
  node: string;
  python: string;
  loadAverage: string;
  loadAverageAtStart: string;
  loadTool: string;
  nginx: string;
}

function versionOf(cmd: string, args: string[]): string {
  // `nginx -v` and older Pythons print their version on stderr.
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: 10_000 });
  if (r.error) return 'not installed';
  return `${r.stdout ?? ''}${r.stderr ?? ''}`.trim().split('\n')[0] ?? 'unknown';
}

/** A number setting of a benchmark tool from the environment, or its default. */
export const envNumber = (name: string, def: number): number => Number(process.env[name] ?? def);

export const loadAverageNow = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' / ');

export function machineInfo(opts: {
  python: string;
  loadTool: string;
  nginx: string | undefined;
  loadAverageAtStart: string;
}): MachineInfo {
  return {
    date: new Date().toISOString(),
    cores: availableParallelism(),
    cpuModel: cpus()[0]?.model.trim() ?? 'unknown',
    memoryGiB: (totalmem() / 1024 ** 3).toFixed(1),
    node: process.version,
    python: versionOf(opts.python, ['--version']),
    loadAverage: loadAverageNow(),
    loadAverageAtStart: opts.loadAverageAtStart,
    loadTool: opts.loadTool,
    nginx: opts.nginx ? versionOf(opts.nginx, ['-v']) : 'not installed (baseline row skipped)',
  };
}

export function renderResults(info: MachineInfo, rows: readonly Row[], notes: readonly string[]): string {
  return [
    '# Benchmark results',
    '',
    'Written by `node bench/run.ts` (`make bench`); see `docs/benchmarks.md` for what each figure means.',
    '',
    `- Date: ${info.date}`,
    `- Machine: ${info.cores} cores (\`os.availableParallelism()\`), ${info.cpuModel}, ${info.memoryGiB} GiB RAM`,
    `- Node ${info.node}, ${info.python}`,
    `- Load generator: ${info.loadTool}; nginx: ${info.nginx}`,
    `- Load average (1/5/15 min) on ${info.cores} cores: ${info.loadAverageAtStart} at the start, ${info.loadAverage} at the end`,
    '',
    markdownTable(rows),
    '',
    ...(notes.length ? ['Notes:', '', ...notes.map((n) => `- ${n}`), ''] : []),
  ].join('\n');
}
