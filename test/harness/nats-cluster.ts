/**
 * Three real nats-servers with JetStream, clustered over routes on loopback. Each node keeps its port
 * and store across kill/restart, so a restarted node rejoins as itself. The processes are plain
 * children (their pids are what a chaos test signals); `pidFile` records them for a watchdog.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { binaryPath } from './binaries.ts';
import { freePort, waitFor } from './process.ts';

/** Bound on a node answering its JetStream health check after a (re)start. */
export const NATS_NODE_START_TIMEOUT_MS = 60_000;
/** Bound on the whole cluster electing a JetStream meta leader after the first start. */
export const NATS_CLUSTER_READY_TIMEOUT_MS = 90_000;

export interface NatsNode {
  readonly name: string;
  readonly port: number;
  readonly monitorPort: number;
  pid(): number | undefined;
  running(): boolean;
  start(): Promise<void>;
  /** Sends `signal` to the node's process (SIGKILL, SIGSTOP, SIGCONT...). */
  signal(signal: NodeJS.Signals): void;
  /** Resolves when the current process has exited. */
  exited(): Promise<void>;
}

export interface NatsCluster {
  readonly nodes: NatsNode[];
  /** `nats://…,nats://…,nats://…` (NATS_URL with every server). */
  readonly url: string;
  readonly dir: string;
  stop(): Promise<void>;
}

export async function startNatsCluster(opts: {
  dir: string;
  size?: number;
  /** Called with the pid of every process started, and with undefined when it exited. */
  onPid?: (name: string, pid: number | undefined) => void;
}): Promise<NatsCluster> {
  const size = opts.size ?? 3;
  mkdirSync(opts.dir, { recursive: true });
  // One at a time and all distinct: a port just released can be handed out again.
  const taken = new Set<number>();
  const distinctPort = async () => {
    for (;;) {
      const p = await freePort();
      if (!taken.has(p)) {
        taken.add(p);
        return p;
      }
    }
  };
  const ports: Array<{ client: number; cluster: number; monitor: number }> = [];
  for (let i = 0; i < size; i++)
    ports.push({
      client: await distinctPort(),
      cluster: await distinctPort(),
      monitor: await distinctPort(),
    });
  const routes = ports.map((p) => `nats-route://127.0.0.1:${p.cluster}`);
  const nodes: NatsNode[] = ports.map((p, i) => {
    const name = `n${i + 1}`;
    const store = join(opts.dir, name, 'store');
    const conf = join(opts.dir, name, 'nats.conf');
    mkdirSync(store, { recursive: true });
    writeFileSync(
      conf,
      [
        `server_name: ${name}`,
        `listen: 127.0.0.1:${p.client}`,
        `http: 127.0.0.1:${p.monitor}`,
        `jetstream { store_dir: "${store}" }`,
        'cluster {',
        '  name: chaos',
        `  listen: 127.0.0.1:${p.cluster}`,
        `  routes: [${routes.filter((_, j) => j !== i).join(', ')}]`,
        '}',
        // Small: the test's own heartbeat so a hung peer or client is noticed within seconds.
        'ping_interval: "5s"',
        'ping_max: 2',
      ].join('\n'),
    );
    let child: ChildProcess | undefined;
    let done: Promise<void> = Promise.resolve();
    const log = createWriteStream(join(opts.dir, name, 'nats.log'), { flags: 'a' });
    return {
      name,
      port: p.client,
      monitorPort: p.monitor,
      pid: () => child?.pid,
      running: () => !!child && child.exitCode === null && child.signalCode === null,
      async start() {
        const c = spawn(binaryPath('nats-server'), ['-c', conf], { stdio: ['ignore', 'pipe', 'pipe'] });
        child = c;
        c.stdout?.pipe(log, { end: false });
        c.stderr?.pipe(log, { end: false });
        opts.onPid?.(name, c.pid);
        done = new Promise((r) =>
          c.once('exit', () => {
            opts.onPid?.(name, undefined);
            r();
          }),
        );
        const exitedEarly = done.then(() => {
          throw new Error(`nats ${name} exited while starting (see ${join(opts.dir, name, 'nats.log')})`);
        });
        exitedEarly.catch(() => undefined);
        await Promise.race([
          exitedEarly,
          waitFor(
            `nats ${name} /healthz`,
            // Not js-enabled-only: a restarted node is healthy once it serves clients and catches up.
            async () => c.exitCode === null && (await fetch(`http://127.0.0.1:${p.monitor}/healthz`)).ok,
            NATS_NODE_START_TIMEOUT_MS,
            200,
          ),
        ]);
      },
      signal(sig) {
        if (child?.pid && this.running()) process.kill(child.pid, sig);
      },
      exited: () => done,
    };
  });
  // Routes need every peer up before JetStream elects a meta leader: start all, then wait for it.
  await Promise.all(nodes.map((n) => n.start()));
  await waitFor(
    'a JetStream meta leader in the cluster',
    async () => {
      const r = await fetch(`http://127.0.0.1:${nodes[0]?.monitorPort}/jsz`);
      const j = (await r.json()) as { meta_cluster?: { leader?: string; cluster_size?: number } };
      return !!j.meta_cluster?.leader && j.meta_cluster.cluster_size === size;
    },
    NATS_CLUSTER_READY_TIMEOUT_MS,
    250,
  );
  return {
    nodes,
    url: nodes.map((n) => `nats://127.0.0.1:${n.port}`).join(','),
    dir: opts.dir,
    async stop() {
      for (const n of nodes) {
        n.signal('SIGCONT');
        n.signal('SIGKILL');
      }
      await Promise.all(nodes.map((n) => n.exited()));
      if (!process.env.APPHOST_TEST_KEEP_DIRS) rmSync(opts.dir, { recursive: true, force: true });
    },
  };
}
