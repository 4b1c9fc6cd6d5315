/**
 * Groups NATS requests made by concurrent work into one socket write. nats.js writes what is pending at
 * the end of the current microtask run, so requests started from separate I/O callbacks (one per HTTP
 * request, one per app answer) each cost a write syscall — the largest share of the gateway's 202 path
 * and of the run worker. `sendTurn(send)` starts `send` on the next turn of the event loop together with
 * every other send queued during this turn, so they leave in one write; each keeps its own request, reply
 * and bound (nothing is acknowledged for another), at the price of one event-loop turn.
 */

export type SendTurn = <T>(send: () => Promise<T>) => Promise<T>;

export function createSendTurn(): SendTurn {
  let queued: Array<() => void> = [];
  const drain = () => {
    const now = queued;
    queued = [];
    // Started back to back in one macrotask: their protocol writes share nats.js's next flush.
    for (const start of now) start();
  };
  return <T>(send: () => Promise<T>) =>
    new Promise<T>((resolve, reject) => {
      if (queued.length === 0) setImmediate(drain);
      queued.push(() => {
        try {
          send().then(resolve, reject);
        } catch (err) {
          reject(err);
        }
      });
    });
}
