/**
 * The control channel's example frames (docs/design/native-data-plane.md §4): one or more of every v1
 * type, and bad ones with the code each must be refused with. protocol.test.ts holds the TypeScript
 * codec to them; hack/dataplane-vectors.ts writes them to native/dataplane/tests/vectors/frames.json,
 * so the Rust side reads the same bytes.
 */
import {
  DATAPLANE_MAX_FRAME_BYTES,
  encodeMessage,
  FrameDecoder,
  frame,
  type Message,
  ProtocolError,
  type ProtocolErrorCode,
  parsePayload,
} from '../dataplane/protocol.ts';

export interface FrameCase {
  name: string;
  /** The side that reads `wire`. */
  at: 'node' | 'dataplane';
  /** The bytes on the channel, then its end. */
  wire: Buffer;
  /** The refusal expected after the messages before it; none: every frame reads. */
  error?: ProtocolErrorCode;
  /**
   * Which part of the reader refuses it: `frame` (codec, envelope, direction, the fields of
   * hello/ping/pong/config/drain/resync/ready and every state frame's gen/seq) or `state` (the rest of
   * a state frame's fields: the Rust state module's parse, design step 5).
   */
  layer?: 'frame' | 'state';
}

const GEN = '5d0c6a0e-1f3b-4a59-9b7e-2f1d3c4b5a69';
const SHA = 'a3f1c2'.padEnd(64, '0');
const POOL = {
  capacity: 4,
  maxQueue: 40,
  queueTimeoutMs: 30_000,
  coldStartTimeoutMs: 60_000,
  retryAfterSeconds: 1,
};
const APP = {
  projectId: 'acme',
  appName: 'hello',
  runtime: 'cortex' as const,
  upstream: 'http://hello.acme.svc.cluster.local:8080',
  ready: true,
  gracePeriodSeconds: 30,
  functions: ['greet', 'sum'],
  pool: POOL,
};
const CONFIG: Message = {
  type: 'config',
  listen: { host: '0.0.0.0', port: 8080 },
  handoffSocket: '/run/apphost/handoff.sock',
  gateway: {
    maxBodyBytes: 6_291_456,
    syncTimeoutMs: 60_000,
    streamIdleTimeoutMs: 30_000,
    retryAfterSeconds: 1,
    drainTimeoutMs: 25_000,
    connectionHandoverMs: 3_000,
    coldStartTimeoutMs: 60_000,
    handoffMarginMs: 5_000,
    syncRecordsPerAppPerSecond: 0.5,
    syncRecordsPerSecond: 200,
  },
  balancer: {
    queueTimeoutMs: 30_000,
    queueDepthFactor: 10,
    maxQueuePerApp: 1_000,
    capacityBlockMs: 1_000,
    unreachableBlockMs: 5_000,
    maxRetries: 3,
    retryAfterSeconds: 1,
    routing: 'endpoints',
  },
  tokenCacheMaxEntries: 10_000,
  loadReportIntervalMs: 1_000,
  logLevel: 'info',
};

/** Well-formed messages, one frame each, read by the side they are sent to. */
const GOOD: Array<{ name: string; message: Message }> = [
  { name: 'hello', message: { type: 'hello', protocol: 1, build: '8bf4bfa' } },
  {
    name: 'hello, a build with quotes and non-ASCII',
    message: { type: 'hello', protocol: 1, build: 'é"\n' },
  },
  { name: 'ping', message: { type: 'ping', id: 0 } },
  { name: 'pong, the largest id', message: { type: 'pong', id: Number.MAX_SAFE_INTEGER } },
  { name: 'config', message: CONFIG },
  {
    name: 'snapshot',
    message: {
      type: 'snapshot',
      gen: GEN,
      seq: 0,
      apps: [
        APP,
        {
          ...APP,
          appName: 'web',
          runtime: 'custom',
          ready: false,
          functions: null,
          upstream: 'http://web.acme.svc.cluster.local:8080',
        },
      ],
      replicas: [
        {
          key: 'acme/hello',
          replicas: [
            { id: '10.0.0.7:8080', url: 'http://10.0.0.7:8080' },
            { id: '10.0.0.8:8080', url: 'http://10.0.0.8:8080' },
          ],
        },
      ],
      failures: [
        { key: 'acme/web', failure: { reason: 'ImagePullBackOff', message: 'cannot pull "web:1"' } },
      ],
      domains: [{ host: 'hello.example.com', projectId: 'acme', appName: 'hello' }],
      tokens: [{ sha256: SHA, projectId: 'acme', until: 1_795_000_000_000 }],
    },
  },
  {
    name: 'snapshot, empty',
    message: {
      type: 'snapshot',
      gen: GEN,
      seq: 12,
      apps: [],
      replicas: [],
      failures: [],
      domains: [],
      tokens: [],
    },
  },
  { name: 'app, set', message: { type: 'app', gen: GEN, seq: 1, key: 'acme/hello', app: APP } },
  { name: 'app, removed', message: { type: 'app', gen: GEN, seq: 2, key: 'acme/hello', app: null } },
  {
    name: 'replicas',
    message: {
      type: 'replicas',
      gen: GEN,
      seq: 3,
      key: 'acme/hello',
      replicas: [{ id: '10.0.0.9:8080', url: 'http://10.0.0.9:8080' }],
    },
  },
  {
    name: 'replicas, none',
    message: { type: 'replicas', gen: GEN, seq: 4, key: 'acme/hello', replicas: [] },
  },
  {
    name: 'failure, set',
    message: {
      type: 'failure',
      gen: GEN,
      seq: 5,
      key: 'acme/web',
      failure: { reason: 'CrashLoopBackOff', message: 'the app exited 3 times' },
    },
  },
  {
    name: 'failure, cleared',
    message: { type: 'failure', gen: GEN, seq: 6, key: 'acme/web', failure: null },
  },
  {
    name: 'domain, set',
    message: {
      type: 'domain',
      gen: GEN,
      seq: 7,
      host: 'api.example.com',
      target: { projectId: 'acme', appName: 'web' },
    },
  },
  {
    name: 'domain, removed',
    message: { type: 'domain', gen: GEN, seq: 8, host: 'api.example.com', target: null },
  },
  {
    name: 'token',
    message: { type: 'token', gen: GEN, seq: 9, sha256: SHA, projectId: 'acme', until: 1_795_000_060_000 },
  },
  { name: 'drain, handover', message: { type: 'drain', phase: 'handover' } },
  { name: 'drain, drain', message: { type: 'drain', phase: 'drain' } },
  { name: 'resync', message: { type: 'resync', gen: GEN, seq: 8 } },
  { name: 'ready', message: { type: 'ready', gen: GEN, seq: 0 } },
  { name: 'drained', message: { type: 'drained' } },
  {
    name: 'load',
    message: {
      type: 'load',
      apps: [
        {
          projectId: 'acme',
          appName: 'hello',
          concurrency: 2.375,
          inflight: 3,
          queued: 1,
          runs: 0,
          replicas: { 'hello-7d9f-abcde': 2, 'hello-7d9f-fghij': 1 },
        },
        { projectId: 'acme', appName: 'web', concurrency: 0.5, inflight: 0, queued: 0, runs: 0 },
      ],
    },
  },
  { name: 'load, no app busy', message: { type: 'load', apps: [] } },
  {
    name: 'records',
    message: {
      type: 'records',
      records: [
        {
          requestId: '0b5e4c7a-9d1f-4e2b-8a3c-6f7d8e9a0b1c',
          projectId: 'acme',
          appName: 'hello',
          path: 'greet',
          status: 200,
          startedAtMs: 1_795_000_000_000,
          finishedAtMs: 1_795_000_000_003,
          aborted: false,
          streamed: true,
        },
        {
          requestId: '1c6f5d8b-0e2a-4f3c-9b4d-7a8e9f0a1b2c',
          projectId: 'acme',
          appName: 'hello',
          path: 'sum/é',
          status: 504,
          errorCode: 'upstream_timeout',
          errorMessage: 'app "hello" did not answer within 60 s',
          startedAtMs: 1_795_000_000_000,
          finishedAtMs: 1_795_000_060_000,
          aborted: false,
          streamed: false,
        },
      ],
    },
  },
  { name: 'ask-metrics', message: { type: 'ask-metrics', id: 41 } },
  {
    name: 'metrics',
    message: {
      type: 'metrics',
      id: 41,
      metrics: [
        {
          name: 'apphost_gateway_requests_total',
          help: 'Run requests by project, app, mode (sync|async|stream) and response status.',
          type: 'counter',
          aggregator: 'sum',
          values: [{ labels: { project: 'acme', app: 'hello', mode: 'sync', status: '200' }, value: 3 }],
        },
        {
          name: 'apphost_gateway_request_duration_seconds',
          help: 'Time from request to the end of the response (for streams: to the end of the stream).',
          type: 'histogram',
          aggregator: 'sum',
          values: [
            {
              labels: { le: 0.005, project: 'acme', app: 'hello', mode: 'sync' },
              value: 2,
              metricName: 'apphost_gateway_request_duration_seconds_bucket',
            },
            {
              labels: { le: '+Inf', project: 'acme', app: 'hello', mode: 'sync' },
              value: 3,
              metricName: 'apphost_gateway_request_duration_seconds_bucket',
            },
            {
              labels: { project: 'acme', app: 'hello', mode: 'sync' },
              value: 0.30000000000000004,
              metricName: 'apphost_gateway_request_duration_seconds_sum',
            },
          ],
        },
        {
          name: 'apphost_gateway_inflight_requests',
          help: 'Run requests being served right now (sync calls, streams and async accepts).',
          type: 'gauge',
          aggregator: 'sum',
          values: [{ labels: {}, value: 0 }],
        },
      ],
    },
  },
  { name: 'metrics, none', message: { type: 'metrics', id: 0, metrics: [] } },
];

const receiver = (m: Message): 'node' | 'dataplane' =>
  ['hello', 'pong', 'resync', 'ready', 'drained', 'load', 'records', 'metrics'].includes(m.type)
    ? 'node'
    : 'dataplane';
const json = (text: string) => frame(Buffer.from(text));
const prefix = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n, 0);
  return b;
};
/** A well-formed message's JSON with `patch` applied (undefined deletes a field). */
const patched = (m: Message, patch: Record<string, unknown>) =>
  JSON.stringify(
    { v: 1, ...m, ...patch },
    // JSON.stringify drops undefined fields: a deleted one.
  );
const find = (name: string) => (GOOD.find((g) => g.name === name) as { message: Message }).message;

/** A bad frame: `text` is the payload (or `wire` the raw bytes), refused with `error` by `at`. */
const BAD: FrameCase[] = [
  // the codec
  {
    name: 'a length one over the bound, refused from the prefix',
    at: 'dataplane',
    wire: prefix(DATAPLANE_MAX_FRAME_BYTES + 1),
    error: 'frame_too_large',
  },
  {
    name: 'the largest length a prefix can hold',
    at: 'node',
    wire: prefix(0xffff_ffff),
    error: 'frame_too_large',
  },
  {
    name: 'the channel ends inside the prefix',
    at: 'dataplane',
    wire: Buffer.from([0, 0]),
    error: 'frame_truncated',
  },
  {
    name: 'the channel ends inside the payload',
    at: 'dataplane',
    wire: Buffer.concat([prefix(10), Buffer.from('{"v":1')]),
    error: 'frame_truncated',
  },
  // the envelope
  { name: 'an empty payload', at: 'dataplane', wire: json(''), error: 'frame_malformed' },
  { name: 'not JSON', at: 'dataplane', wire: json('{'), error: 'frame_malformed' },
  { name: 'an array', at: 'node', wire: json('[1]'), error: 'frame_malformed' },
  { name: 'null', at: 'node', wire: json('null'), error: 'frame_malformed' },
  {
    // in a field a reader ignores: a lenient decoder (U+FFFD for the byte) would read the pong
    name: 'invalid UTF-8',
    at: 'node',
    wire: frame(
      Buffer.concat([
        Buffer.from('{"v":1,"type":"pong","id":1,"x":"'),
        Buffer.from([0xff]),
        Buffer.from('"}'),
      ]),
    ),
    error: 'frame_malformed',
  },
  {
    name: 'a byte-order mark before the object',
    at: 'node',
    wire: frame(
      Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"v":1,"type":"pong","id":1}')]),
    ),
    error: 'frame_malformed',
  },
  { name: 'no v', at: 'dataplane', wire: json('{"type":"ping","id":1}'), error: 'frame_malformed' },
  {
    name: 'v as a string',
    at: 'dataplane',
    wire: json('{"v":"1","type":"ping","id":1}'),
    error: 'frame_malformed',
  },
  {
    name: 'v negative',
    at: 'dataplane',
    wire: json('{"v":-1,"type":"ping","id":1}'),
    error: 'frame_malformed',
  },
  {
    name: 'v fractional',
    at: 'dataplane',
    wire: json('{"v":1.5,"type":"ping","id":1}'),
    error: 'frame_malformed',
  },
  { name: 'no type', at: 'dataplane', wire: json('{"v":1,"id":1}'), error: 'frame_malformed' },
  { name: 'type a number', at: 'dataplane', wire: json('{"v":1,"type":7}'), error: 'frame_malformed' },
  { name: 'v 2', at: 'dataplane', wire: json('{"v":2,"type":"ping","id":1}'), error: 'version_mismatch' },
  { name: 'v 0', at: 'node', wire: json('{"v":0,"type":"pong","id":1}'), error: 'version_mismatch' },
  {
    name: 'v 2 before an unknown type',
    at: 'dataplane',
    wire: json('{"v":2,"type":"config2"}'),
    error: 'version_mismatch',
  },
  {
    name: 'hello of protocol 2',
    at: 'node',
    wire: json('{"v":1,"type":"hello","protocol":2,"build":"x"}'),
    error: 'version_mismatch',
  },
  {
    name: 'an unknown type',
    at: 'dataplane',
    wire: json('{"v":1,"type":"snapshot2"}'),
    error: 'unknown_type',
  },
  // direction
  {
    name: 'hello sent to the data plane',
    at: 'dataplane',
    wire: json('{"v":1,"type":"hello","protocol":1,"build":"x"}'),
    error: 'unexpected_message',
  },
  {
    name: 'pong sent to the data plane',
    at: 'dataplane',
    wire: json('{"v":1,"type":"pong","id":1}'),
    error: 'unexpected_message',
  },
  {
    name: 'ping sent to Node',
    at: 'node',
    wire: json('{"v":1,"type":"ping","id":1}'),
    error: 'unexpected_message',
  },
  { name: 'config sent to Node', at: 'node', wire: encodeMessage(CONFIG), error: 'unexpected_message' },
  {
    name: 'load sent to the data plane',
    at: 'dataplane',
    wire: json('{"v":1,"type":"load","apps":[]}'),
    error: 'unexpected_message',
  },
  {
    name: 'records sent to the data plane',
    at: 'dataplane',
    wire: json('{"v":1,"type":"records","records":[]}'),
    error: 'unexpected_message',
  },
  {
    name: 'ask-metrics sent to Node',
    at: 'node',
    wire: json('{"v":1,"type":"ask-metrics","id":1}'),
    error: 'unexpected_message',
  },
  {
    name: 'metrics sent to the data plane',
    at: 'dataplane',
    wire: json('{"v":1,"type":"metrics","id":1,"metrics":[]}'),
    error: 'unexpected_message',
  },
  {
    name: 'drain sent to Node',
    at: 'node',
    wire: json('{"v":1,"type":"drain","phase":"drain"}'),
    error: 'unexpected_message',
  },
  // fields of the frame layer
  { name: 'ping without id', at: 'dataplane', wire: json('{"v":1,"type":"ping"}'), error: 'frame_malformed' },
  {
    name: 'ping id fractional',
    at: 'dataplane',
    wire: json('{"v":1,"type":"ping","id":1.5}'),
    error: 'frame_malformed',
  },
  {
    name: 'ping id negative',
    at: 'dataplane',
    wire: json('{"v":1,"type":"ping","id":-1}'),
    error: 'frame_malformed',
  },
  {
    name: 'pong id 2^53 (not read exactly by Node)',
    at: 'node',
    wire: json('{"v":1,"type":"pong","id":9007199254740992}'),
    error: 'frame_malformed',
  },
  {
    name: 'hello without build',
    at: 'node',
    wire: json('{"v":1,"type":"hello","protocol":1}'),
    error: 'frame_malformed',
  },
  {
    name: 'load with a fractional inflight',
    at: 'node',
    wire: json(
      '{"v":1,"type":"load","apps":[{"projectId":"a","appName":"b","concurrency":1,"inflight":1.5,"queued":0,"runs":0}]}',
    ),
    error: 'frame_malformed',
  },
  {
    name: 'load with a negative concurrency',
    at: 'node',
    wire: json(
      '{"v":1,"type":"load","apps":[{"projectId":"a","appName":"b","concurrency":-1,"inflight":0,"queued":0,"runs":0}]}',
    ),
    error: 'frame_malformed',
  },
  {
    name: 'load with a replica count that is not a number',
    at: 'node',
    wire: json(
      '{"v":1,"type":"load","apps":[{"projectId":"a","appName":"b","concurrency":0,"inflight":0,"queued":0,"runs":0,"replicas":{"r":"1"}}]}',
    ),
    error: 'frame_malformed',
  },
  {
    name: 'load without apps',
    at: 'node',
    wire: json('{"v":1,"type":"load"}'),
    error: 'frame_malformed',
  },
  {
    name: 'a record without requestId',
    at: 'node',
    wire: json(
      '{"v":1,"type":"records","records":[{"projectId":"a","appName":"b","path":"f","status":200,"startedAtMs":1,"finishedAtMs":2,"aborted":false,"streamed":false}]}',
    ),
    error: 'frame_malformed',
  },
  {
    name: 'a record with a numeric errorCode',
    at: 'node',
    wire: json(
      '{"v":1,"type":"records","records":[{"requestId":"x","projectId":"a","appName":"b","path":"f","status":502,"errorCode":502,"startedAtMs":1,"finishedAtMs":2,"aborted":false,"streamed":false}]}',
    ),
    error: 'frame_malformed',
  },
  {
    name: 'a record with aborted as a string',
    at: 'node',
    wire: json(
      '{"v":1,"type":"records","records":[{"requestId":"x","projectId":"a","appName":"b","path":"f","status":200,"startedAtMs":1,"finishedAtMs":2,"aborted":"no","streamed":false}]}',
    ),
    error: 'frame_malformed',
  },
  {
    name: 'drain of another phase',
    at: 'dataplane',
    wire: json('{"v":1,"type":"drain","phase":"stop"}'),
    error: 'frame_malformed',
  },
  {
    name: 'ready without gen',
    at: 'node',
    wire: json('{"v":1,"type":"ready","seq":0}'),
    error: 'frame_malformed',
  },
  {
    name: 'ask-metrics without id',
    at: 'dataplane',
    wire: json('{"v":1,"type":"ask-metrics"}'),
    error: 'frame_malformed',
  },
  {
    name: 'metrics without id',
    at: 'node',
    wire: json('{"v":1,"type":"metrics","metrics":[]}'),
    error: 'frame_malformed',
  },
  {
    name: 'metrics as an object',
    at: 'node',
    wire: json('{"v":1,"type":"metrics","id":1,"metrics":{}}'),
    error: 'frame_malformed',
  },
  {
    name: 'a metric whose value is a string',
    at: 'node',
    wire: json(
      '{"v":1,"type":"metrics","id":1,"metrics":[{"name":"n","help":"h","type":"gauge","aggregator":"sum","values":[{"labels":{},"value":"1"}]}]}',
    ),
    error: 'frame_malformed',
  },
  {
    name: 'a metric of an aggregator prom-client does not have',
    at: 'node',
    wire: json(
      '{"v":1,"type":"metrics","id":1,"metrics":[{"name":"n","help":"h","type":"gauge","aggregator":"median","values":[]}]}',
    ),
    error: 'frame_malformed',
  },
  {
    name: 'a metric of another type',
    at: 'node',
    wire: json(
      '{"v":1,"type":"metrics","id":1,"metrics":[{"name":"n","help":"h","type":"info","aggregator":"sum","values":[]}]}',
    ),
    error: 'frame_malformed',
  },
  {
    name: 'a metric label that is an object',
    at: 'node',
    wire: json(
      '{"v":1,"type":"metrics","id":1,"metrics":[{"name":"n","help":"h","type":"gauge","aggregator":"sum","values":[{"labels":{"a":{}},"value":1}]}]}',
    ),
    error: 'frame_malformed',
  },
  {
    name: 'config without gateway',
    at: 'dataplane',
    wire: json(patched(CONFIG, { gateway: undefined })),
    error: 'frame_malformed',
  },
  {
    name: 'config with port 65536',
    at: 'dataplane',
    wire: json(patched(CONFIG, { listen: { host: '0.0.0.0', port: 65_536 } })),
    error: 'frame_malformed',
  },
  {
    name: 'config with a relative socket path',
    at: 'dataplane',
    wire: json(patched(CONFIG, { handoffSocket: 'run/handoff.sock' })),
    error: 'frame_malformed',
  },
  {
    name: 'config with another routing',
    at: 'dataplane',
    wire: json(
      patched(CONFIG, { balancer: { ...(CONFIG as { balancer: object }).balancer, routing: 'dns' } }),
    ),
    error: 'frame_malformed',
  },
  {
    name: 'config with a level pino does not name',
    at: 'dataplane',
    wire: json(patched(CONFIG, { logLevel: 'verbose' })),
    error: 'frame_malformed',
  },
  {
    name: 'snapshot without gen',
    at: 'dataplane',
    wire: json(patched(find('snapshot, empty'), { gen: undefined })),
    error: 'frame_malformed',
  },
  {
    name: 'token with a numeric gen',
    at: 'dataplane',
    wire: json(patched(find('token'), { gen: 7 })),
    error: 'frame_malformed',
  },
  {
    name: 'app with a fractional seq',
    at: 'dataplane',
    wire: json(patched(find('app, removed'), { seq: 2.5 })),
    error: 'frame_malformed',
  },
  // fields of the state layer
  {
    name: 'snapshot whose app has no functions field',
    at: 'dataplane',
    layer: 'state',
    wire: json(patched(find('snapshot'), { apps: [{ ...APP, functions: undefined }] })),
    error: 'frame_malformed',
  },
  {
    name: 'app of another runtime',
    at: 'dataplane',
    layer: 'state',
    wire: json(patched(find('app, set'), { app: { ...APP, runtime: 'python' } })),
    error: 'frame_malformed',
  },
  {
    name: 'app without pool',
    at: 'dataplane',
    layer: 'state',
    wire: json(patched(find('app, set'), { app: { ...APP, pool: undefined } })),
    error: 'frame_malformed',
  },
  {
    name: 'app without its app field',
    at: 'dataplane',
    layer: 'state',
    wire: json(patched(find('app, set'), { app: undefined })),
    error: 'frame_malformed',
  },
  {
    name: 'replicas as an object',
    at: 'dataplane',
    layer: 'state',
    wire: json(patched(find('replicas'), { replicas: { id: 'x', url: 'y' } })),
    error: 'frame_malformed',
  },
  {
    name: 'failure without message',
    at: 'dataplane',
    layer: 'state',
    wire: json(patched(find('failure, set'), { failure: { reason: 'X' } })),
    error: 'frame_malformed',
  },
  {
    name: 'domain without target',
    at: 'dataplane',
    layer: 'state',
    wire: json(patched(find('domain, set'), { target: undefined })),
    error: 'frame_malformed',
  },
  {
    name: 'token with upper-case hex',
    at: 'dataplane',
    layer: 'state',
    wire: json(patched(find('token'), { sha256: SHA.toUpperCase() })),
    error: 'frame_malformed',
  },
  {
    name: 'token with 63 hex digits',
    at: 'dataplane',
    layer: 'state',
    wire: json(patched(find('token'), { sha256: SHA.slice(1) })),
    error: 'frame_malformed',
  },
  {
    name: 'token with a string until',
    at: 'dataplane',
    layer: 'state',
    wire: json(patched(find('token'), { until: '1795000060000' })),
    error: 'frame_malformed',
  },
  {
    name: 'domain with an upper-case host',
    at: 'dataplane',
    layer: 'state',
    wire: json(patched(find('domain, set'), { host: 'API.example.com' })),
    error: 'frame_malformed',
  },
  {
    name: 'snapshot with an upper-case domain',
    at: 'dataplane',
    layer: 'state',
    wire: json(
      patched(find('snapshot'), {
        domains: [{ host: 'Hello.example.com', projectId: 'acme', appName: 'hello' }],
      }),
    ),
    error: 'frame_malformed',
  },
  {
    name: 'app whose pool capacity is over 2^32 - 1',
    at: 'dataplane',
    layer: 'state',
    wire: json(patched(find('app, set'), { app: { ...APP, pool: { ...POOL, capacity: 2 ** 32 } } })),
    error: 'frame_malformed',
  },
  // a stream: what came before a refusal is read
  {
    name: 'two pings then a frame of v 2',
    at: 'dataplane',
    wire: Buffer.concat([
      encodeMessage({ type: 'ping', id: 1 }),
      encodeMessage({ type: 'ping', id: 2 }),
      json('{"v":2,"type":"ping","id":3}'),
    ]),
    error: 'version_mismatch',
  },
  {
    name: 'a pong then the channel ends inside a frame',
    at: 'node',
    wire: Buffer.concat([
      encodeMessage({ type: 'pong', id: 1 }),
      encodeMessage({ type: 'pong', id: 2 }).subarray(0, 9),
    ]),
    error: 'frame_truncated',
  },
];

/** Extra fields are ignored; several frames in one stream read in order. */
const MORE: FrameCase[] = [
  {
    name: 'ping with an extra field',
    at: 'dataplane',
    wire: json('{"v":1,"type":"ping","id":3,"note":"ignored"}'),
  },
  {
    name: 'an app with an extra field',
    at: 'dataplane',
    wire: json(patched(find('app, set'), { app: { ...APP, colour: 'blue' } })),
  },
  {
    // a record never carries webhookHost (webhook calls are handed off): one that did is read without it
    name: 'a record with a webhookHost',
    at: 'node',
    wire: json(
      '{"v":1,"type":"records","records":[{"requestId":"x","projectId":"a","appName":"b","path":"f","status":200,"startedAtMs":1,"finishedAtMs":2,"aborted":false,"streamed":false,"webhookHost":"hooks.example.com"}]}',
    ),
  },
  { name: 'whitespace around the object', at: 'node', wire: json(' \n{"v":1,"type":"pong","id":4}\t') },
  {
    name: 'hello, pong and ready in one stream',
    at: 'node',
    wire: Buffer.concat([
      encodeMessage(find('hello')),
      encodeMessage({ type: 'pong', id: 1 }),
      encodeMessage(find('ready')),
    ]),
  },
];

export const FRAME_CASES: FrameCase[] = [
  ...GOOD.map(({ name, message }) => ({ name, at: receiver(message), wire: encodeMessage(message) })),
  ...MORE,
  ...BAD.map((c) => ({ layer: 'frame' as const, ...c })),
];

/** What the TypeScript reader makes of a case: the messages read, then the refusal's code, if any. */
export function readCase(c: FrameCase): { messages: Message[]; error: ProtocolErrorCode | null } {
  const d = new FrameDecoder();
  const messages: Message[] = [];
  try {
    d.push(c.wire);
    for (let p = d.next(); p; p = d.next()) messages.push(parsePayload(p, c.at));
    d.finish();
  } catch (err) {
    if (err instanceof ProtocolError) return { messages, error: err.code };
    throw err;
  }
  return { messages, error: null };
}
