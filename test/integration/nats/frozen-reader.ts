/**
 * A reader for pull-subscription.test.ts that is frozen (SIGSTOP) while its pull is open: one pull for one
 * message, then the process stays up a moment so whatever reaches its socket after the pull ended is
 * handled here (as a stopped-then-continued worker would), then it exits.
 */
import { connect } from '@nats-io/transport-node';
import { createPullSubscription } from '../../../src/shared/nats/pull-subscription.ts';

const [url, stream, consumer, expires] = process.argv.slice(2) as [string, string, string, string];
const nc = await connect({ servers: url });
const pulls = createPullSubscription(nc, stream, consumer);
const pull = await pulls.fetch({ max_messages: 1, expires: Number(expires) });
await nc.flush();
process.stdout.write(`pulling ${process.pid}\n`);
for await (const m of pull) process.stdout.write(`got ${m.info.deliveryCount}\n`);
process.stdout.write('pull ended\n');
await new Promise((r) => setTimeout(r, 1_000));
await nc.flush();
pulls.close();
await nc.close();
process.stdout.write('done\n');
