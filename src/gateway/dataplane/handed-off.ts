/**
 * What the native data plane's hand-off server (handoff.ts) tells the gateway about a call it handed
 * over (docs/design/native-data-plane.md §3): set on the IncomingMessage under a symbol, read once by
 * the gateway's handler. Only this process's code can set a symbol-keyed property: no header, no caller
 * on the TCP port, can.
 */
import type { IncomingMessage } from 'node:http';

export const HANDED_OFF: unique symbol = Symbol('apphost.handedOff');

export interface HandedOffCall {
  /** The data plane's request id: on the answer, in the access line and in the sync-call record. */
  requestId: string;
  /** Epoch ms when the data plane took the call: the start of `durationMs` and of the record. */
  startedAt: number;
  /**
   * Epoch ms by which a call the data plane queued must have a slot: its queue wait goes on in Node's
   * balancer at the head of the queue, to this deadline (`AppPool.acquire`'s `requeue`).
   */
  deadline?: number;
}

export type HandedOffRequest = IncomingMessage & { [HANDED_OFF]?: HandedOffCall };
