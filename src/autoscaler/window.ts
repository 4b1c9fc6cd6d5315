/**
 * Samples of one app's observed concurrency, one per autoscaler tick, and their average over a
 * trailing window (the stable and the panic window read the same samples).
 */
export interface Sample {
  at: number;
  value: number;
}

export class SampleWindow {
  #samples: Sample[] = [];
  readonly #keepMs: number;

  /** `keepMs`: the longest window that will be asked for (older samples are dropped). */
  constructor(keepMs: number) {
    this.#keepMs = keepMs;
  }

  record(at: number, value: number): void {
    this.#samples.push({ at, value });
    const oldest = at - this.#keepMs;
    let drop = 0;
    while (drop < this.#samples.length && (this.#samples[drop] as Sample).at <= oldest) drop++;
    if (drop > 0) this.#samples.splice(0, drop);
  }

  /** Mean of the samples taken in (now - windowMs, now]; 0 when there are none. */
  average(now: number, windowMs: number): number {
    let sum = 0;
    let n = 0;
    for (let i = this.#samples.length - 1; i >= 0; i--) {
      const s = this.#samples[i] as Sample;
      if (s.at <= now - windowMs) break;
      if (s.at > now) continue;
      sum += s.value;
      n++;
    }
    return n === 0 ? 0 : sum / n;
  }

  get size(): number {
    return this.#samples.length;
  }
}
