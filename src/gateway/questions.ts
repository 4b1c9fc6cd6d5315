/**
 * Questions the gateway's Node process asks another process of the pod — a gateway process its
 * primary supervises (processes.ts, over IPC), the native data plane (dataplane/supervise.ts, over
 * its control channel) — each answered within PROCESS_ANSWER_TIMEOUT_MS or given up, and the pod's
 * /metrics merged from what came back.
 *
 * A question has an id; an answer is matched to its question by that id only, so one that comes after
 * its question was given up (a stopped process resumed) is dropped and never answers a later one.
 */
import {
  AggregatorRegistry,
  type MetricObjectWithValues,
  type MetricValue,
  type Registry,
} from 'prom-client';

/** Bound on another process's answer to a readiness or metrics question (one scrape of /metrics waits this long at most). */
export const PROCESS_ANSWER_TIMEOUT_MS = 2_000;

/** A registry's series as `getMetricsAsJSON()` gives them (what crosses IPC or the control channel). */
export type MetricsJson = MetricObjectWithValues<MetricValue<string>>[];

/** The timers a question's bound runs on (tests pass their own). */
export interface QuestionTimers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const realTimers: QuestionTimers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
};

export interface Questions<A, O> {
  /**
   * Sends a question (`send` writes it with the id given) to `owner` and resolves with its answer, or
   * with undefined after the bound, or when `owner` is forgotten first. `send` returning false means
   * the question could not be sent: undefined at once.
   */
  ask(owner: O, send: (id: number) => boolean): Promise<A | undefined>;
  /** An answer came: it resolves the question with that id, if it is still waiting (else dropped). */
  answer(id: number, answer: A): void;
  /** `owner` is gone (exited, its channel closed): its questions resolve with undefined now. */
  forget(owner: O): void;
}

export function createQuestions<A, O>(
  opts: { boundMs?: number; timers?: QuestionTimers } = {},
): Questions<A, O> {
  const boundMs = opts.boundMs ?? PROCESS_ANSWER_TIMEOUT_MS;
  const timers = opts.timers ?? realTimers;
  let nextId = 0;
  const pending = new Map<number, { owner: O; resolve: (a: A | undefined) => void }>();
  return {
    ask: (owner, send) =>
      new Promise((resolve) => {
        const id = nextId++;
        const timer = timers.setTimeout(() => {
          pending.delete(id);
          resolve(undefined);
        }, boundMs);
        pending.set(id, {
          owner,
          resolve: (a) => {
            timers.clearTimeout(timer);
            pending.delete(id);
            resolve(a);
          },
        });
        if (!send(id)) pending.get(id)?.resolve(undefined);
      }),
    answer: (id, a) => pending.get(id)?.resolve(a),
    forget(owner) {
      for (const p of [...pending.values()]) if (p.owner === owner) p.resolve(undefined);
    },
  };
}

/**
 * The pod's /metrics text: `own`'s series summed with every answer that came (prom-client's
 * `AggregatorRegistry.aggregate`, each series by its aggregator); an unanswered one is left out. A
 * metric of `own` that no answer has is kept as it is, even one whose aggregator is `omit` (prom-client's
 * mark for what several processes cannot share, such as `process_start_time_seconds`, which the native
 * data plane does not report: without this, native mode's /metrics would lose Node's own).
 */
export async function mergedMetrics(
  own: Registry,
  answers: Array<Promise<MetricsJson | undefined>>,
): Promise<string> {
  const others = (await Promise.all(answers)).filter((a): a is MetricsJson => a !== undefined);
  const named = new Set(others.flatMap((a) => a.map((m) => m.name)));
  const mine = (await own.getMetricsAsJSON()).map((m) =>
    m.aggregator === 'omit' && !named.has(m.name) ? { ...m, aggregator: 'first' as const } : m,
  );
  return AggregatorRegistry.aggregate([mine, ...others]).metrics();
}
