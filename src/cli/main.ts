#!/usr/bin/env node
/** The `apphost` binary (package.json `bin`): `apphost <command>`, see commands.ts. */
import { runCli } from './commands.ts';

/** package.json engines: older Node lacks APIs the dependencies use (and fails obscurely). */
const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 18)) {
  process.stderr.write(`apphost: Node.js 22.18 or newer is needed; this is ${process.version}\n`);
  process.exit(1);
}

const code = await runCli(process.argv.slice(2), process.env, {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
}).catch((err: unknown) => {
  process.stderr.write(`apphost: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  return 1;
});
// Services keep running (their servers hold the loop open) and exit from their signal handler.
if (code !== 0) process.exit(code);
