/**
 * The control channel between the gateway's Node process and its native data plane (the Rust child on
 * fd 3; docs/design/native-data-plane.md §4): the frame codec and every v1 message, parsed into typed
 * values. This file is the TypeScript source of "The v1 frames, field by field"; the Rust side
 * (native/dataplane/src/frame.rs, message.rs, error.rs) is held to the same bytes by
 * native/dataplane/tests/vectors/frames.json, written from here by hack/dataplane-vectors.ts.
 *
 * A frame is a 4-byte big-endian length, then that many bytes of one JSON object `{"v":1,"type":...}`,
 * at most DATAPLANE_MAX_FRAME_BYTES. A missing or wrongly typed field is `frame_malformed` (fail
 * closed); an extra field is ignored. Every number is a non-negative integer no larger than 2^53 − 1
 * (what both sides read exactly), except the two `syncRecords*` rates and `load`'s `concurrency`.
 *
 * Nothing here does I/O or logs: frames carry token digests, and the channel logs none of its content.
 */
import { z } from 'zod';
import { AppLoadSchema } from '../../shared/contracts/scaling.ts';

/** Every frame's `v` and `hello.protocol`: both sides come from one image, so another value is refused. */
export const DATAPLANE_PROTOCOL_VERSION = 1;
/** Bound on one frame's payload (the length prefix not counted), refused from the prefix alone. */
export const DATAPLANE_MAX_FRAME_BYTES = 16 * 1024 * 1024;
/** Size of the length prefix. */
export const LENGTH_PREFIX_BYTES = 4;

/** The stable codes of native/dataplane/src/error.rs: what the supervisor logs and the tests match. */
export const ProtocolErrorCode = {
  /** A frame's declared length is over DATAPLANE_MAX_FRAME_BYTES (or an outgoing message would be). */
  FrameTooLarge: 'frame_too_large',
  /** The channel ended inside a frame. */
  FrameTruncated: 'frame_truncated',
  /** A payload that is not a JSON object with the fields its type requires. */
  FrameMalformed: 'frame_malformed',
  /** The peer speaks another protocol version: a frame's `v`, or `hello.protocol`. */
  VersionMismatch: 'version_mismatch',
  /** A `type` this build does not know. */
  UnknownType: 'unknown_type',
  /** A known message sent the wrong way (the data plane sent what only Node sends, or the reverse). */
  UnexpectedMessage: 'unexpected_message',
  /**
   * The data plane's alone: Node did not send `config` and the first `snapshot` within its start bound
   * (`DATAPLANE_START_WAIT_MS` in native/dataplane). No frame carries it; the child exits 3.
   */
  StartTimeout: 'start_timeout',
} as const;
export type ProtocolErrorCode = (typeof ProtocolErrorCode)[keyof typeof ProtocolErrorCode];

/** A protocol error: the side that sees one closes the channel. The message never quotes a payload. */
export class ProtocolError extends Error {
  override readonly name = 'ProtocolError';
  readonly code: ProtocolErrorCode;
  constructor(code: ProtocolErrorCode, detail: string) {
    super(`${code}: ${detail}`);
    this.code = code;
  }
}

// --- the messages -----------------------------------------------------------------------------------

/** A count, a size, a bound in ms, an epoch ms: an integer both sides read exactly. */
const uint = () => z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
/** A rate (may be fractional). */
const rate = () => z.number().min(0);

const StartFailureSchema = z.object({ reason: z.string(), message: z.string() });
const ReplicaSchema = z.object({ id: z.string(), url: z.string() });
/** `poolSettingsFor`'s answer (src/gateway/balancer/balancer.ts). */
const PoolSettingsSchema = z.object({
  capacity: uint().max(0xffff_ffff),
  maxQueue: uint(),
  queueTimeoutMs: uint(),
  coldStartTimeoutMs: uint(),
  retryAfterSeconds: uint(),
});
/** One app as the resolver answers it (`ResolvedApp`), its pool settings already computed. */
const AppSchema = z.object({
  projectId: z.string(),
  appName: z.string(),
  runtime: z.enum(['cortex', 'custom']),
  upstream: z.string(),
  ready: z.boolean(),
  gracePeriodSeconds: uint(),
  /** The Cortex functions the app exports; null when not known (no pre-check). */
  functions: z.array(z.string()).nullable(),
  pool: PoolSettingsSchema,
});
/** A verified run token: the SHA-256 of its UTF-8 (lower-case hex), its project, its cache expiry. */
const TokenFields = {
  sha256: z.string().regex(/^[0-9a-f]{64}$/, 'must be 64 lower-case hex digits'),
  projectId: z.string(),
  until: uint(),
};
/** A custom domain's host, lower-cased by Node (one with an upper-case letter could never be found). */
const host = () => z.string().regex(/^[^A-Z]*$/, 'must be lower-cased');
const AppRefSchema = z.object({ projectId: z.string(), appName: z.string() });
/** Every state frame: the Node start it belongs to, and its place in that start's one counter. */
const StateFields = { gen: z.string(), seq: uint() };
/**
 * One app's load as the data plane measured it: `AppLoadSchema` (shared/contracts/scaling.ts), its counts
 * held to integers as every count on the channel is; `concurrency` (a time average) may be fractional.
 */
const AppLoadWire = AppLoadSchema.extend({
  concurrency: rate(),
  inflight: uint(),
  queued: uint(),
  runs: uint(),
  replicas: z.record(z.string(), uint()).optional(),
});
/** A finished sync call the data plane served and admitted for a record (`SyncCall`, runs/sync-calls.ts; never `webhookHost`). */
const SyncCallWire = z.object({
  requestId: z.string().min(1),
  projectId: z.string().min(1),
  appName: z.string().min(1),
  path: z.string(),
  status: uint().max(999),
  errorCode: z.string().optional(),
  errorMessage: z.string().optional(),
  startedAtMs: uint(),
  finishedAtMs: uint(),
  aborted: z.boolean(),
  streamed: z.boolean(),
});
/**
 * One series of prom-client's `getMetricsAsJSON()` (the data plane's metrics.rs writes them): what
 * `AggregatorRegistry.aggregate` reads. The aggregator must be one prom-client has, else the merge
 * would throw at a scrape; a value is any JSON number (a histogram's sum is fractional).
 */
const METRIC_TYPES = ['counter', 'gauge', 'histogram', 'summary'] as const;
const AGGREGATORS = ['sum', 'first', 'min', 'max', 'average', 'omit'] as const;
export const MetricsWireSchema = z.array(
  z.object({
    name: z.string(),
    help: z.string(),
    type: z.enum(METRIC_TYPES),
    aggregator: z.enum(AGGREGATORS),
    values: z.array(
      z.object({
        labels: z.record(z.string(), z.union([z.string(), z.number()])),
        value: z.number(),
        metricName: z.string().optional(),
      }),
    ),
  }),
);
type MetricsWire = z.output<typeof MetricsWireSchema>;

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
/** JSON's numbers are finite; zod's z.number() takes no other. */
const isNumber = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

/** Whether `v` is what MetricsWireSchema takes (never true of what it refuses: protocol.test.ts), read in place. */
function isMetricsWire(v: unknown): v is MetricsWire {
  if (!Array.isArray(v)) return false;
  for (const m of v) {
    if (!isObject(m) || typeof m.name !== 'string' || typeof m.help !== 'string') return false;
    if (!(METRIC_TYPES as readonly unknown[]).includes(m.type)) return false;
    if (!(AGGREGATORS as readonly unknown[]).includes(m.aggregator)) return false;
    if (!Array.isArray(m.values)) return false;
    for (const x of m.values) {
      if (!isObject(x) || !isNumber(x.value) || !isObject(x.labels)) return false;
      if (x.metricName !== undefined && typeof x.metricName !== 'string') return false;
      for (const k in x.labels) {
        const l = x.labels[k];
        if (typeof l !== 'string' && !isNumber(l)) return false;
      }
    }
  }
  return true;
}

/**
 * The `metrics` answer's series: checked in place and passed on as they are (zod's parse copies every
 * object and label set: ~30 times the frame's bytes allocated, at every scrape); only what that check
 * refuses goes through MetricsWireSchema, for its issue (the same refusals, the same messages).
 */
const MetricsWire = z.unknown().transform((v, ctx): MetricsWire => {
  if (isMetricsWire(v)) return v;
  const parsed = MetricsWireSchema.safeParse(v);
  if (parsed.success) return parsed.data;
  for (const issue of parsed.error.issues)
    ctx.issues.push({ code: 'custom', message: issue.message, path: issue.path, input: v });
  return z.NEVER;
});

const schemas = {
  // data plane → Node
  hello: z.object({ protocol: uint(), build: z.string() }),
  pong: z.object({ id: uint() }),
  resync: z.object(StateFields),
  ready: z.object(StateFields),
  // (its extra fields dropped, as every message's: typed {} rather than zod's Record<string, never>)
  drained: z.object({}).transform((): object => ({})),
  /** Every `loadReportIntervalMs`: the apps with load (step 7); Node publishes it as reporter `<reporter>-dp`. */
  load: z.object({ apps: z.array(AppLoadWire) }),
  /** Admitted sync-call records, batched (RECORDS_BATCH_MAX / RECORDS_BATCH_MS in native/dataplane). */
  records: z.object({ records: z.array(SyncCallWire) }),
  /** The answer to `ask-metrics` with the same id: the data plane's series (design §5). */
  metrics: z.object({ id: uint(), metrics: MetricsWire }),
  // Node → data plane
  ping: z.object({ id: uint() }),
  config: z.object({
    listen: z.object({ host: z.string().min(1), port: uint().max(65_535) }),
    handoffSocket: z.string().startsWith('/', 'must be an absolute path'),
    gateway: z.object({
      maxBodyBytes: uint(),
      syncTimeoutMs: uint(),
      streamIdleTimeoutMs: uint(),
      retryAfterSeconds: uint(),
      drainTimeoutMs: uint(),
      connectionHandoverMs: uint(),
      coldStartTimeoutMs: uint(),
      handoffMarginMs: uint(),
      syncRecordsPerAppPerSecond: rate(),
      syncRecordsPerSecond: rate(),
    }),
    balancer: z.object({
      queueTimeoutMs: uint(),
      queueDepthFactor: uint(),
      maxQueuePerApp: uint(),
      capacityBlockMs: uint(),
      unreachableBlockMs: uint(),
      maxRetries: uint(),
      retryAfterSeconds: uint(),
      routing: z.enum(['endpoints', 'service']),
    }),
    tokenCacheMaxEntries: uint(),
    loadReportIntervalMs: uint(),
    logLevel: z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']),
  }),
  snapshot: z.object({
    ...StateFields,
    apps: z.array(AppSchema),
    replicas: z.array(z.object({ key: z.string(), replicas: z.array(ReplicaSchema) })),
    failures: z.array(z.object({ key: z.string(), failure: StartFailureSchema })),
    domains: z.array(z.object({ host: host(), projectId: z.string(), appName: z.string() })),
    tokens: z.array(z.object(TokenFields)),
  }),
  app: z.object({ ...StateFields, key: z.string(), app: AppSchema.nullable() }),
  replicas: z.object({ ...StateFields, key: z.string(), replicas: z.array(ReplicaSchema) }),
  failure: z.object({ ...StateFields, key: z.string(), failure: StartFailureSchema.nullable() }),
  domain: z.object({ ...StateFields, host: host(), target: AppRefSchema.nullable() }),
  token: z.object({ ...StateFields, ...TokenFields }),
  drain: z.object({ phase: z.enum(['handover', 'drain']) }),
  /** A scrape of Node's /metrics: `id` is Node's counter, echoed by the `metrics` answer. */
  'ask-metrics': z.object({ id: uint() }),
} as const;

type Schemas = typeof schemas;
export type MessageType = keyof Schemas;
type Of<T extends MessageType> = { type: T } & z.output<Schemas[T]>;
/** Every v1 message, by its `type` (the frame's `v` is implied). */
export type Message = { [T in MessageType]: Of<T> }[MessageType];
export type MessageOf<T extends MessageType> = Of<T>;

export type DataPlaneApp = z.output<typeof AppSchema>;
export type DataPlaneToken = z.output<z.ZodObject<typeof TokenFields>>;
export type StartFailureWire = z.output<typeof StartFailureSchema>;
export type ConfigMessage = Of<'config'>;
export type LoadMessage = Of<'load'>;
export type RecordsMessage = Of<'records'>;
export type SnapshotMessage = Of<'snapshot'>;
/** The state frames, which share one `seq` counter per `gen`. */
export type StateMessage = Extract<
  Message,
  { type: 'snapshot' | 'app' | 'replicas' | 'failure' | 'domain' | 'token' }
>;

/** Who sends each type: a frame received from the wrong side is `unexpected_message`. */
export const SENT_BY: Readonly<Record<MessageType, 'node' | 'dataplane'>> = {
  hello: 'dataplane',
  pong: 'dataplane',
  resync: 'dataplane',
  ready: 'dataplane',
  drained: 'dataplane',
  load: 'dataplane',
  records: 'dataplane',
  metrics: 'dataplane',
  ping: 'node',
  config: 'node',
  snapshot: 'node',
  app: 'node',
  replicas: 'node',
  failure: 'node',
  domain: 'node',
  token: 'node',
  drain: 'node',
  'ask-metrics': 'node',
};

const isMessageType = (t: string): t is MessageType => Object.hasOwn(schemas, t);
/** Every frame's `v`, built once: a zod schema built per frame was most of an idle gateway's allocation. */
const VersionSchema = uint();

// --- payloads ---------------------------------------------------------------------------------------

/** Strict UTF-8 (invalid bytes refused, not replaced) keeping a BOM, which JSON then refuses, as serde_json does. */
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * One frame's payload as a message received by `at`. The version is checked before the type (a peer of
 * another version may name its types differently, so the version is the more useful error), the
 * direction before the fields.
 */
export function parsePayload(payload: Uint8Array, at: 'node' | 'dataplane'): Message {
  let value: unknown;
  try {
    value = JSON.parse(utf8.decode(payload));
  } catch {
    throw new ProtocolError(ProtocolErrorCode.FrameMalformed, 'not UTF-8 JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new ProtocolError(ProtocolErrorCode.FrameMalformed, 'not a JSON object');
  const obj = value as Record<string, unknown>;
  const v = VersionSchema.safeParse(obj.v);
  if (!v.success)
    throw new ProtocolError(ProtocolErrorCode.FrameMalformed, 'no non-negative integer field "v"');
  if (v.data !== DATAPLANE_PROTOCOL_VERSION)
    throw new ProtocolError(
      ProtocolErrorCode.VersionMismatch,
      `the peer speaks protocol ${v.data}, this build ${DATAPLANE_PROTOCOL_VERSION}`,
    );
  const type = obj.type;
  if (typeof type !== 'string')
    throw new ProtocolError(ProtocolErrorCode.FrameMalformed, 'no string field "type"');
  if (!isMessageType(type))
    throw new ProtocolError(
      ProtocolErrorCode.UnknownType,
      `no message of type ${JSON.stringify(type)} in protocol ${DATAPLANE_PROTOCOL_VERSION}`,
    );
  if (SENT_BY[type] === at)
    throw new ProtocolError(
      ProtocolErrorCode.UnexpectedMessage,
      `the ${at === 'node' ? 'data plane' : 'gateway'} does not send ${JSON.stringify(type)} messages`,
    );
  const parsed = schemas[type].safeParse(obj);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.length ? issue.path.join('.') : '(frame)';
    throw new ProtocolError(ProtocolErrorCode.FrameMalformed, `${type}.${where}: ${issue?.message}`);
  }
  const message = { type, ...parsed.data } as Message;
  if (message.type === 'hello' && message.protocol !== DATAPLANE_PROTOCOL_VERSION)
    throw new ProtocolError(
      ProtocolErrorCode.VersionMismatch,
      `the peer speaks protocol ${message.protocol}, this build ${DATAPLANE_PROTOCOL_VERSION}`,
    );
  return message;
}

/** A message's payload: `{"v":1,"type":...}` and its fields. */
export function encodePayload(message: Message): Buffer {
  const { type, ...fields } = message;
  return Buffer.from(JSON.stringify({ v: DATAPLANE_PROTOCOL_VERSION, type, ...fields }));
}

/** A payload's frame: the length prefix, then the payload. Refuses one over the bound (never sent). */
export function frame(payload: Uint8Array): Buffer {
  if (payload.length > DATAPLANE_MAX_FRAME_BYTES)
    throw new ProtocolError(
      ProtocolErrorCode.FrameTooLarge,
      `a frame of ${payload.length} bytes is over the bound of ${DATAPLANE_MAX_FRAME_BYTES} bytes`,
    );
  const out = Buffer.allocUnsafe(LENGTH_PREFIX_BYTES + payload.length);
  out.writeUInt32BE(payload.length, 0);
  out.set(payload, LENGTH_PREFIX_BYTES);
  return out;
}

/** A message's whole frame. */
export const encodeMessage = (message: Message): Buffer => frame(encodePayload(message));

// --- a stream of frames -----------------------------------------------------------------------------

/**
 * Reassembles frames from a byte stream: chunks go in as they arrive, whole payloads come out. A length
 * over the bound is refused as soon as its prefix is in, before its payload is buffered. Chunks are
 * joined only when a whole frame is in, so a large snapshot costs one copy, not one per chunk.
 */
export class FrameDecoder {
  #chunks: Buffer[] = [];
  #buffered = 0;
  /** The current frame's payload length, once its prefix is in. */
  #want: number | undefined;

  push(chunk: Buffer): void {
    if (chunk.length === 0) return;
    this.#chunks.push(chunk);
    this.#buffered += chunk.length;
  }

  /** The next whole payload, or undefined until more bytes arrive. Throws `frame_too_large`. */
  next(): Buffer | undefined {
    if (this.#want === undefined) {
      if (this.#buffered < LENGTH_PREFIX_BYTES) return undefined;
      const head = this.#join(LENGTH_PREFIX_BYTES);
      const len = head.readUInt32BE(0);
      if (len > DATAPLANE_MAX_FRAME_BYTES)
        throw new ProtocolError(
          ProtocolErrorCode.FrameTooLarge,
          `a frame of ${len} bytes is over the bound of ${DATAPLANE_MAX_FRAME_BYTES} bytes`,
        );
      this.#want = len;
    }
    const end = LENGTH_PREFIX_BYTES + this.#want;
    if (this.#buffered < end) return undefined;
    const first = this.#join(end);
    const payload = first.subarray(LENGTH_PREFIX_BYTES, end);
    const rest = first.subarray(end);
    if (rest.length > 0) this.#chunks[0] = rest;
    else this.#chunks.shift();
    this.#buffered -= end;
    this.#want = undefined;
    return payload;
  }

  /** At the channel's end, after every whole frame was taken: `frame_truncated` when it ended inside one. */
  finish(): void {
    if (this.#buffered === 0) return;
    const want = LENGTH_PREFIX_BYTES + (this.#want ?? 0);
    throw new ProtocolError(
      ProtocolErrorCode.FrameTruncated,
      `the channel ended after ${this.#buffered} of a frame's ${this.#want === undefined ? LENGTH_PREFIX_BYTES : want} bytes`,
    );
  }

  /** The first chunk made at least `n` bytes long (joining chunks as needed). */
  #join(n: number): Buffer {
    const first = this.#chunks[0] as Buffer;
    if (first.length >= n) return first;
    const joined = Buffer.concat(this.#chunks, this.#buffered);
    this.#chunks = [joined];
    return joined;
  }
}
