/**
 * One app's replicas as the gateway sees them (Knative's activator throttler, per app): each ready
 * replica serves at most `capacity` calls at once; a call goes to the least-loaded replica with a free
 * slot, or waits in a bounded FIFO queue. With no ready replica (scaled to zero, still starting) a
 * call is held the same way and `onWake` asks for a replica at once. Every wait has a bound and ends
 * in a 503 naming why; nothing waits forever.
 */
import type { CallSignal, Replica, StartFailure } from '../../shared/contracts/seams.ts';
import { ApiError, ErrorCode } from '../../shared/errors.ts';
import { ConcurrencyMeter } from './meter.ts';
import { nextUnblock, pickReplica } from './pick.ts';

export type { Replica, StartFailure };

export interface PoolSettings {
  /** Calls one replica serves at once (the app's replicaConcurrency). */
  capacity: number;
  /** Calls that may wait for a slot; one more is refused with 503 queue_full. */
  maxQueue: number;
  /** Bound on waiting for a slot while the app has ready replicas. */
  queueTimeoutMs: number;
  /** Bound on waiting for a first ready replica (scale from zero, first rollout). */
  coldStartTimeoutMs: number;
  /** `Retry-After` seconds on the 503s. */
  retryAfterSeconds: number;
}

export interface Lease {
  readonly replica: Replica;
  /** The call is over (its response ended, or it failed after reaching the app): frees the slot. */
  release(): void;
  /** The replica refused the call without running it: frees the slot and skips the replica for `blockMs`. */
  refuse(blockMs: number, reason?: string): void;
}

export interface AcquireOptions {
  /** The caller went away: stop waiting. */
  signal?: CallSignal;
  /** A call that was placed once and refused goes back to the head of the queue, keeping its deadline. */
  requeue?: { deadline: number };
}

/** What happened, for metrics. */
export interface PoolEvents {
  /** A call was refused by the pool (queue_full, queue_timeout, cold_start_timeout, app_start_failed). */
  rejected?(code: string): void;
  /** A replica refused a call without running it (at_capacity, shutting_down, unreachable). */
  refused?(reason: string): void;
  /** A call held while no replica was ready got one after `seconds`. */
  coldStart?(seconds: number): void;
}

export interface PoolDeps {
  now?: () => number;
  /** A call is being held and the app has no ready replica: ask for one now. */
  onWake?: () => void;
  events?: PoolEvents;
}

interface ReplicaState extends Replica {
  inflight: number;
  blockedUntil: number;
}

interface Waiter {
  deadline: number;
  grant(lease: Lease): void;
  fail(err: unknown): void;
}

export class AppPool {
  readonly app: string;
  #s: PoolSettings;
  readonly #now: () => number;
  readonly #onWake: () => void;
  readonly #events: PoolEvents;
  #replicas: ReplicaState[] = [];
  /** Replicas no longer routable that still have calls in flight (kept in case they come back). */
  readonly #retired = new Map<string, ReplicaState>();
  readonly #queue: Waiter[] = [];
  #rr = 0;
  #inflight = 0;
  #failure: StartFailure | undefined;
  #unblock: NodeJS.Timeout | undefined;
  readonly #meter: ConcurrencyMeter;
  /** Calls refused by replicas (runtime backstop, shutting down, connection refused). */
  refusals = 0;

  constructor(app: string, settings: PoolSettings, deps: PoolDeps = {}) {
    this.app = app;
    this.#s = settings;
    this.#now = deps.now ?? Date.now;
    this.#onWake = deps.onWake ?? (() => {});
    this.#events = deps.events ?? {};
    this.#meter = new ConcurrencyMeter(this.#now());
  }

  get settings(): PoolSettings {
    return this.#s;
  }

  /** New limits (the App changed); a larger capacity lets waiting calls through at once. */
  configure(settings: PoolSettings): void {
    this.#s = settings;
    this.#dispatch();
  }

  /** The ready replicas, replacing the previous set. Calls in flight on a removed replica finish there. */
  setReplicas(list: readonly Replica[]): void {
    const old = new Map(this.#replicas.map((r) => [r.id, r]));
    const next: ReplicaState[] = [];
    for (const { id, url } of list) {
      const kept = old.get(id) ?? this.#retired.get(id);
      old.delete(id);
      this.#retired.delete(id);
      next.push(kept ? Object.assign(kept, { url }) : { id, url, inflight: 0, blockedUntil: 0 });
    }
    for (const gone of old.values()) if (gone.inflight > 0) this.#retired.set(gone.id, gone);
    this.#replicas = next;
    if (next.length > 0) this.#dispatch();
    else if (this.#queue.length > 0) this.#onWake();
  }

  /** Records (or clears) why the app cannot start; held calls fail at once while no replica is ready. */
  setStartFailure(failure: StartFailure | undefined): void {
    this.#failure = failure;
    if (failure && this.#replicas.length === 0) {
      for (const w of this.#queue.splice(0)) w.fail(this.#reject(this.#startFailed(failure)));
      this.#levelChanged();
    }
  }

  /**
   * A slot at once when a replica has one free and no call waits (the usual call), without a promise;
   * otherwise undefined, and `acquire` queues the call.
   */
  tryAcquire(): Lease | undefined {
    return this.#queue.length === 0 ? this.#tryPlace() : undefined;
  }

  async acquire(opts: AcquireOptions = {}): Promise<Lease> {
    const { signal, requeue } = opts;
    if (signal?.aborted) throw signal.reason;
    const placed = requeue ? this.#tryPlace() : this.tryAcquire();
    if (placed) return placed;
    if (this.#replicas.length === 0 && this.#failure) throw this.#reject(this.#startFailed(this.#failure));
    if (!requeue && this.#queue.length >= this.#s.maxQueue) {
      throw this.#reject(
        new ApiError(
          ErrorCode.QueueFull,
          `app "${this.app}" has ${this.#queue.length} calls waiting for a free replica (the limit); retry later`,
          { retryAfter: this.#s.retryAfterSeconds, details: { queued: this.#queue.length } },
        ),
      );
    }
    const now = this.#now();
    const cold = this.#replicas.length === 0;
    const deadline = requeue?.deadline ?? now + (cold ? this.#s.coldStartTimeoutMs : this.#s.queueTimeoutMs);
    // The wait a timeout names. A requeued call (refused by a replica, or handed over by the native data
    // plane) was given its deadline queueTimeoutMs after it first had to wait: that is its wait, not the
    // time left when it came back (which said "within 0 s").
    const waited = requeue ? this.#s.queueTimeoutMs : deadline - now;
    const lease = await new Promise<Lease>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
      };
      const w: Waiter = {
        deadline,
        grant: (l) => {
          done();
          if (cold) this.#events.coldStart?.((this.#now() - now) / 1000);
          resolve(l);
        },
        fail: (err) => {
          done();
          reject(err);
        },
      };
      const leave = () => {
        const i = this.#queue.indexOf(w);
        if (i === -1) return false;
        this.#queue.splice(i, 1);
        this.#levelChanged();
        return true;
      };
      const onAbort = () => {
        if (leave()) w.fail(signal?.reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      timer = setTimeout(
        () => {
          if (leave()) w.fail(this.#reject(this.#timedOut(waited)));
        },
        Math.max(0, deadline - now),
      );
      if (requeue) this.#queue.unshift(w);
      else this.#queue.push(w);
      this.#levelChanged();
      if (this.#replicas.length === 0) this.#onWake();
      else this.#scheduleUnblock();
    });
    return lease;
  }

  /** Calls in flight and waiting now, per-replica in-flight, and the average level since the last read. */
  snapshot(): { inflight: number; queued: number; concurrency: number; replicas: Record<string, number> } {
    const replicas: Record<string, number> = {};
    for (const r of this.#replicas) replicas[r.id] = r.inflight;
    return {
      inflight: this.#inflight,
      queued: this.#queue.length,
      concurrency: this.#meter.take(this.#now()),
      replicas,
    };
  }

  /** Calls in flight per ready replica id. */
  replicaLoad(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const r of this.#replicas) out[r.id] = r.inflight;
    return out;
  }

  /** Calls in flight and waiting, and ready replicas, without touching the report's average. */
  stats(): { inflight: number; queued: number; ready: number } {
    return { inflight: this.#inflight, queued: this.#queue.length, ready: this.#replicas.length };
  }

  get inflight(): number {
    return this.#inflight;
  }

  get queued(): number {
    return this.#queue.length;
  }

  get readyReplicas(): number {
    return this.#replicas.length;
  }

  /** True when nothing is in flight or waiting (the pool may be forgotten). */
  get idle(): boolean {
    return this.#inflight === 0 && this.#queue.length === 0;
  }

  /** Fails every waiting call (the gateway is stopping or the app is gone). */
  close(err: unknown): void {
    clearTimeout(this.#unblock);
    for (const w of this.#queue.splice(0)) w.fail(err);
    this.#levelChanged();
  }

  #tryPlace(): Lease | undefined {
    const now = this.#now();
    const i = pickReplica(this.#replicas, this.#s.capacity, now, this.#rr);
    if (i === -1) return undefined;
    this.#rr = (i + 1) % Math.max(1, this.#replicas.length);
    return this.#lease(this.#replicas[i] as ReplicaState);
  }

  #lease(r: ReplicaState): Lease {
    r.inflight++;
    this.#inflight++;
    this.#levelChanged();
    let open = true;
    const free = () => {
      if (!open) return false;
      open = false;
      r.inflight--;
      this.#inflight--;
      if (r.inflight === 0) this.#retired.delete(r.id);
      return true;
    };
    return {
      replica: { id: r.id, url: r.url },
      release: () => {
        if (!free()) return;
        this.#levelChanged();
        this.#dispatch();
      },
      refuse: (blockMs, reason = 'refused') => {
        if (!free()) return;
        this.refusals++;
        this.#events.refused?.(reason);
        r.blockedUntil = Math.max(r.blockedUntil, this.#now() + blockMs);
        this.#levelChanged();
        this.#dispatch();
      },
    };
  }

  #dispatch(): void {
    while (this.#queue.length > 0) {
      const lease = this.#tryPlace();
      if (!lease) break;
      const w = this.#queue.shift() as Waiter;
      this.#levelChanged();
      w.grant(lease);
    }
    this.#scheduleUnblock();
  }

  /** With calls waiting and only blocked replicas having room, look again when the first unblocks. */
  #scheduleUnblock(): void {
    clearTimeout(this.#unblock);
    this.#unblock = undefined;
    if (this.#queue.length === 0) return;
    const now = this.#now();
    const at = nextUnblock(this.#replicas, this.#s.capacity);
    if (at === undefined) return;
    this.#unblock = setTimeout(() => this.#dispatch(), Math.max(1, at - now));
    this.#unblock.unref?.();
  }

  #levelChanged(): void {
    this.#meter.set(this.#now(), this.#inflight + this.#queue.length);
  }

  #reject(err: ApiError): ApiError {
    this.#events.rejected?.(err.code);
    return err;
  }

  #startFailed(f: StartFailure): ApiError {
    return new ApiError(ErrorCode.AppStartFailed, `app "${this.app}" cannot start: ${f.message}`, {
      retryAfter: this.#s.retryAfterSeconds,
      details: { reason: f.reason },
    });
  }

  #timedOut(waitedMs: number): ApiError {
    const seconds = Math.round(waitedMs / 100) / 10;
    if (this.#replicas.length === 0) {
      if (this.#failure) return this.#startFailed(this.#failure);
      return new ApiError(
        ErrorCode.ColdStartTimeout,
        `app "${this.app}" had no ready replica within ${seconds} s; retry later`,
        { retryAfter: this.#s.retryAfterSeconds },
      );
    }
    return new ApiError(
      ErrorCode.QueueTimeout,
      `no replica of app "${this.app}" had a free slot within ${seconds} s; retry later`,
      { retryAfter: this.#s.retryAfterSeconds },
    );
  }
}
