import type { IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import type { EffectiveScaling } from '../../apis/v1alpha1/scaling.ts';
import type { Runtime } from '../../apis/v1alpha1/types.ts';

/** Why an app cannot start (image pull, crash loop, import error), as its status or supervisor says. */
export interface StartFailure {
  /** A CamelCase reason, e.g. ImagePullBackOff, CrashLoopBackOff, ImportError. */
  reason: string;
  /** What a caller is told. */
  message: string;
}

/** Where an app is served. Kubernetes: the App's Service; local mode: a runtime process on loopback. */
export interface ResolvedApp {
  projectId: string;
  appName: string;
  runtime: Runtime;
  /**
   * Base URL of the app as a whole, without a trailing slash (its Service in a cluster). Calls go to
   * replicas the resolver reports (AppResolver.watchReplicas); without that, this is the one replica.
   */
  upstream: string;
  ready: boolean;
  gracePeriodSeconds: number;
  /** Cortex functions the app exports, when known (undefined = unknown, do not pre-check). */
  functions?: readonly string[];
  /** The App's scaling settings (defaults when absent). */
  scaling?: EffectiveScaling;
  /** Set while the app cannot start. */
  startFailure?: StartFailure;
}

/** One ready replica of an app. */
export interface Replica {
  /** Stable routing id (pod IP:port in a cluster, the process name locally). */
  id: string;
  /** Base URL, no trailing slash. */
  url: string;
}

/** Where a resolver reports each app's ready replicas and start failures as they change. */
export interface ReplicaSink {
  setReplicas(projectId: string, appName: string, replicas: readonly Replica[]): void;
  setStartFailure(projectId: string, appName: string, failure: StartFailure | undefined): void;
  /** Calls in flight per replica id, so whoever removes replicas can pick idle ones. */
  replicaLoad?(projectId: string, appName: string): Record<string, number>;
}

/**
 * Where a resolver reports the apps it knows (AppResolver.watchApps), so that a copy of its table can be
 * kept elsewhere (the native data plane's feed, docs/design/native-data-plane.md §4).
 * Reports of one app are in order; the last one is the app's state. A resolver may repeat a report
 * whose content did not change, so a receiver that sends deltas on compares first.
 */
export interface AppSink {
  /**
   * The app as `resolve` would answer it now: it appeared or something in it changed (readiness,
   * scaling, grace period, functions learnt, start failure).
   */
  setApp(app: ResolvedApp): void;
  /** The app is gone: deleted, being deleted, or its project is gone. Unknown names may be reported. */
  removeApp(projectId: string, appName: string): void;
}

/**
 * Where a resolver reports its custom domains (AppResolver.watchDomains), so that a copy of its host
 * table can be kept elsewhere (the native data plane's domain map, docs/design/native-data-plane.md §4).
 */
export interface DomainSink {
  /**
   * `host` (lower-cased, as `resolveHost` keys it) is assigned to `target`, or no longer assigned to
   * any app (undefined). A host may be reported again unchanged.
   */
  setDomain(host: string, target: { projectId: string; appName: string } | undefined): void;
}

/** A value now, or a promise of it: what a lookup answered from memory returns without a promise. */
export type MaybePromise<T> = T | Promise<T>;

/**
 * The gateway's lookups. The cluster's resolver answers from its informer caches at once (no promise):
 * the gateway's run endpoint then does its custom domain, route, auth and app lookup without waiting a
 * turn of promises for each (docs/benchmarks.md, "eighth round").
 */
export interface AppResolver {
  resolve(projectId: string, appName: string): MaybePromise<ResolvedApp | undefined>;
  /** The app a custom domain's Host header is assigned to, if any. */
  resolveHost(hostname: string): MaybePromise<{ projectId: string; appName: string } | undefined>;
  /**
   * Reports every app's ready replicas to `sink` from now on (EndpointSlices, local processes).
   * Absent: the gateway routes each call to `ResolvedApp.upstream` while the app is ready.
   */
  watchReplicas?(sink: ReplicaSink): void;
  /**
   * Reports every app the resolver knows to `sink`, once each and synchronously before returning (a
   * full snapshot), then each change as it happens (the deltas), until the returned function is
   * called. Absent: the resolver cannot list its apps (local mode without reported replicas).
   */
  watchApps?(sink: AppSink): () => void;
  /**
   * Reports every custom domain `resolveHost` answers for to `sink`, once each and synchronously
   * before returning (a full snapshot), then each assignment, reassignment or removal as it happens,
   * until the returned function is called. Absent: the resolver cannot list its domains.
   */
  watchDomains?(sink: DomainSink): () => void;
}

/**
 * What cancels a call: an AbortSignal, or the gateway's cheaper CallAbort (src/shared/call-abort.ts).
 * Only these members are used.
 */
export interface CallSignal {
  readonly aborted: boolean;
  readonly reason: unknown;
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: 'abort', listener: () => void): void;
}

/** One call to an app, before it is placed on a replica. */
export interface AppCall {
  /** Path after `/v4/<project>/<app>/`, without a leading slash. */
  path: string;
  query: string;
  headers: Record<string, string>;
  body: Buffer;
  signal?: CallSignal;
  /** Bound on waiting for the response head, once sent. */
  headersTimeoutMs: number;
  /** Bound on silence between body chunks (0 = none). */
  bodyTimeoutMs: number;
  /**
   * An answer with a Content-Length of at most this many bytes (and not `text/event-stream`) is read
   * whole before the call resolves (`AppResponse.whole`); by default every answer is a stream.
   */
  wholeUpTo?: number;
  /**
   * Epoch ms by which the call must have a slot, instead of the app's own queue bound: a call the
   * native data plane queued and then handed over keeps the deadline it had there, and waits at the
   * head of the queue without the queue-full check (AppPool.acquire's `requeue`). Undefined: the usual bounds.
   */
  deadline?: number | undefined;
}

/** An app's answer: its status and headers, and its body read whole or as a stream. */
export type AppResponse = {
  statusCode: number;
  headers: IncomingHttpHeaders;
} & (
  | {
      /** The whole body (AppCall.wholeUpTo); the replica's slot is free already. */
      whole: Buffer;
      body?: undefined;
    }
  | {
      /** The body; the replica's slot is held until it closes. */
      body: Readable;
      whole?: undefined;
    }
);

/**
 * Sends a call to a replica of `app` with a free slot (waiting in the app's queue, or for a replica
 * to start, within bounds) and answers with its response; the slot is held until the response body
 * closes (or, for an answer read whole, until it is read). Used by the gateway for sync calls and by the run worker for async runs alike.
 */
export interface AppCaller {
  (app: ResolvedApp, call: AppCall): Promise<AppResponse>;
  /**
   * Waits for a slot (queue, cold start) without sending anything: the run worker takes one before it
   * marks a run as started, so waiting for capacity never counts as an execution.
   */
  reserve(app: ResolvedApp, signal?: CallSignal): Promise<AppSlot>;
}

export interface AppSlot {
  /** Sends the call on the reserved slot (a refusal is retried elsewhere); held until the body closes. */
  call(call: AppCall): Promise<AppResponse>;
  /** Gives the slot back unused. */
  release(): void;
}
