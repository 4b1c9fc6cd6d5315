/**
 * A cancel switch for one call that is much cheaper to make than an AbortController: creating an
 * AbortController and its AbortSignal (an EventTarget) costs ~4 µs in Node 24, a few percent of a
 * gateway's sync call (docs/benchmarks.md). It has the members of AbortSignal that the call path
 * uses (`CallSignal`), so an AbortSignal can be passed wherever a CallSignal is taken.
 */
import type { CallSignal } from './contracts/seams.ts';

export class CallAbort implements CallSignal {
  #aborted = false;
  #reason: unknown;
  /** Usually one listener at a time (the pool's queue wait, then the upstream call). */
  #listeners: Array<() => void> | undefined;

  get aborted(): boolean {
    return this.#aborted;
  }

  get reason(): unknown {
    return this.#reason;
  }

  /** Listeners run once, in the order added (as `{ once: true }` on an AbortSignal). */
  addEventListener(_type: 'abort', listener: () => void): void {
    if (this.#aborted) return;
    if (this.#listeners) this.#listeners.push(listener);
    else this.#listeners = [listener];
  }

  removeEventListener(_type: 'abort', listener: () => void): void {
    const l = this.#listeners;
    if (!l) return;
    const i = l.indexOf(listener);
    if (i !== -1) l.splice(i, 1);
  }

  /** Aborts with `reason` (the first abort wins) and runs the listeners. */
  abort(reason: unknown): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#reason = reason;
    const l = this.#listeners;
    this.#listeners = undefined;
    if (!l) return;
    for (const listener of l) {
      try {
        listener();
      } catch (err) {
        // As an AbortSignal does: the other listeners still run; the error is uncaught.
        queueMicrotask(() => {
          throw err;
        });
      }
    }
  }
}
