/**
 * Time-weighted average of a level (calls in flight + queued) between two reads, the way Knative's
 * queue-proxy reports concurrency: a call that lasted half the interval counts as 0.5.
 */
export class ConcurrencyMeter {
  #level = 0;
  #since: number;
  #area = 0;
  #from: number;

  constructor(now: number) {
    this.#since = now;
    this.#from = now;
  }

  set(now: number, level: number): void {
    this.#area += this.#level * Math.max(0, now - this.#since);
    this.#since = now;
    this.#level = level;
  }

  /** The average since the previous take (the current level when no time has passed), and restarts. */
  take(now: number): number {
    this.set(now, this.#level);
    const span = now - this.#from;
    const avg = span > 0 ? this.#area / span : this.#level;
    this.#area = 0;
    this.#from = now;
    return avg;
  }

  get level(): number {
    return this.#level;
  }
}
