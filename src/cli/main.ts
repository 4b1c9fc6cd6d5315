#!/usr/bin/env node
/** The `apphost` binary (package.json `bin`): `apphost <command>`, see commands.ts. */
import { setSourceMapsSupport } from 'node:module';
import { COMMANDS, runCli } from './commands.ts';

/** package.json engines: older Node lacks APIs the dependencies use (and fails obscurely). */
const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 18)) {
  process.stderr.write(`apphost: Node.js 22.18 or newer is needed; this is ${process.version}\n`);
  process.exit(1);
}

// The image turns source maps on (NODE_OPTIONS=--enable-source-maps) so stack traces name our TypeScript
// sources; the commands' modules, loaded after this line, get them only for our own code: the dependencies'
// maps (@kubernetes/client-node's alone) are 10–15 MiB of a gateway's memory (docs/benchmarks.md#memory-of-the-gateway).
if (process.sourceMapsEnabled) setSourceMapsSupport(true, { nodeModules: false });

const argv = process.argv.slice(2);
// A client command (logs --follow, run --stream) stops on Ctrl-C and returns; a second Ctrl-C exits.
// Services and `dev` install their own graceful-shutdown handlers.
let signal: AbortSignal | undefined;
if (COMMANDS.find((c) => c.name === argv[0])?.kind === 'client') {
  const ac = new AbortController();
  signal = ac.signal;
  const onSignal = () => {
    if (ac.signal.aborted) process.exit(130);
    ac.abort(new Error('interrupted'));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
}

const code = await runCli(argv, process.env, {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
  ...(signal ? { signal } : {}),
  ...(process.stderr.isTTY ? { status: (text: string) => process.stderr.write(`\r\x1b[2K${text}`) } : {}),
}).catch((err: unknown) => {
  process.stderr.write(`apphost: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  return 1;
});
// Services keep running (their servers hold the loop open) and exit from their signal handler.
if (code !== 0) process.exit(code);
// A client command is done: do not wait for idle keep-alive sockets.
if (signal) process.exit(0);
