/** Runs the real dispatcher binary entry (`main(env)`) as a child process for the crash tests. */
import { main } from '../../../src/webhooks/main.ts';

await main(process.env);
