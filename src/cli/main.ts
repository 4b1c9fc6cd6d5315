#!/usr/bin/env node
/** The `apphost` binary (package.json `bin`): `apphost <command>`, see commands.ts. */
import { runCli } from './commands.ts';

const code = await runCli(process.argv.slice(2), process.env, {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
}).catch((err: unknown) => {
  process.stderr.write(`apphost: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  return 1;
});
// Services keep running (their servers hold the loop open) and exit from their signal handler.
if (code !== 0) process.exit(code);
