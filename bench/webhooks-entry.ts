/** The webhook dispatcher as its own process, exactly as `apphost webhooks` runs it (env → main). */
import { main } from '../src/webhooks/main.ts';

await main(process.env);
process.stdout.write(`started ${process.pid}\n`);
