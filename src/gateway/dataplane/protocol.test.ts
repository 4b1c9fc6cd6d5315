import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FRAME_CASES, readCase } from '../testing/frame-cases.ts';
import {
  DATAPLANE_MAX_FRAME_BYTES,
  encodeMessage,
  FrameDecoder,
  frame,
  type Message,
  MetricsWireSchema,
  ProtocolError,
  ProtocolErrorCode,
  parsePayload,
} from './protocol.ts';

/** `wire` pushed in chunks of `chunk` bytes, frames taken after each push (or only after the last). */
const messagesOf = (wire: Buffer, at: 'node' | 'dataplane', chunk: number, takeEach = true): Message[] => {
  const d = new FrameDecoder();
  const out: Message[] = [];
  for (let i = 0; i < wire.length; i += chunk) {
    d.push(wire.subarray(i, i + chunk));
    if (takeEach || i + chunk >= wire.length)
      for (let p = d.next(); p; p = d.next()) out.push(parsePayload(p, at));
  }
  d.finish();
  return out;
};

const codeOf = (f: () => unknown): string | undefined => {
  try {
    f();
  } catch (err) {
    if (err instanceof ProtocolError) return err.code;
    throw err;
  }
  return undefined;
};

describe('the shared frame cases (frames.json)', () => {
  const good = FRAME_CASES.filter((c) => !c.error);
  const bad = FRAME_CASES.filter((c) => c.error);

  it.each(good.map((c) => [c.name, c] as const))('%s: reads', (_, c) => {
    const { messages, error } = readCase(c);
    expect(error).toBeNull();
    expect(messages.length).toBeGreaterThan(0);
    // What a reader makes of a frame encodes back to a frame it reads the same (extra fields dropped).
    for (const m of messages) expect(readCase({ ...c, wire: encodeMessage(m) }).messages).toEqual([m]);
  });

  it.each(bad.map((c) => [c.name, c] as const))('%s: refused', (_, c) => {
    expect(readCase(c).error).toBe(c.error);
  });

  it('covers every type both ways and every code', () => {
    const types = new Set(good.flatMap((c) => readCase(c).messages.map((m) => m.type)));
    expect([...types].sort()).toEqual(
      [
        ...['hello', 'pong', 'resync', 'ready', 'drained', 'load', 'records', 'metrics'],
        ...[
          'ping',
          'config',
          'snapshot',
          'app',
          'replicas',
          'failure',
          'domain',
          'token',
          'drain',
          'ask-metrics',
        ],
      ].sort(),
    );
    const frameCodes = Object.values(ProtocolErrorCode).filter((c) => c !== 'start_timeout');
    expect(new Set(bad.map((c) => c.error))).toEqual(new Set(frameCodes));
  });
});

describe('the frame codec', () => {
  const wire = Buffer.concat(FRAME_CASES.filter((c) => !c.error && c.at === 'dataplane').map((c) => c.wire));
  const all = messagesOf(wire, 'dataplane', wire.length);

  it('reads a stream the same whatever its chunks', () => {
    expect(all.length).toBeGreaterThan(15);
    for (const chunk of [1, 3, 4, 5, 64, 1000]) {
      expect(messagesOf(wire, 'dataplane', chunk)).toEqual(all);
      expect(messagesOf(wire, 'dataplane', chunk, false)).toEqual(all);
    }
  });

  it('writes the length big-endian before a JSON object with v first', () => {
    const f = encodeMessage({ type: 'ping', id: 7 });
    expect(f.readUInt32BE(0)).toBe(f.length - 4);
    expect(f.subarray(4).toString()).toBe('{"v":1,"type":"ping","id":7}');
    expect(frame(Buffer.alloc(258)).subarray(0, 4)).toEqual(Buffer.from([0, 0, 1, 2]));
  });

  it('takes a frame at the bound and refuses one over it from the prefix, before its payload', () => {
    const d = new FrameDecoder();
    d.push(frame(Buffer.alloc(DATAPLANE_MAX_FRAME_BYTES, 0x20)));
    expect(d.next()?.length).toBe(DATAPLANE_MAX_FRAME_BYTES);
    const over = Buffer.alloc(4);
    over.writeUInt32BE(DATAPLANE_MAX_FRAME_BYTES + 1);
    const e = new FrameDecoder();
    e.push(over);
    expect(codeOf(() => e.next())).toBe('frame_too_large');
    // And on the way out: a side never writes what the other must refuse.
    expect(codeOf(() => frame(Buffer.alloc(DATAPLANE_MAX_FRAME_BYTES + 1)))).toBe('frame_too_large');
  });

  it('says nothing of a frame until it is whole, and a truncated one only at the end', () => {
    const f = encodeMessage({ type: 'pong', id: 1 });
    const d = new FrameDecoder();
    d.push(f.subarray(0, 6));
    expect(d.next()).toBeUndefined();
    expect(codeOf(() => d.finish())).toBe('frame_truncated');
    d.push(f.subarray(6));
    expect(d.next()?.toString()).toBe('{"v":1,"type":"pong","id":1}');
    expect(codeOf(() => d.finish())).toBeUndefined();
  });

  it('never quotes a payload in its errors (frames carry token digests)', () => {
    const secretish = 'f'.repeat(64);
    let message = '';
    try {
      parsePayload(
        Buffer.from(`{"v":1,"type":"token","gen":"g","seq":1,"sha256":"${secretish}x"}`),
        'dataplane',
      );
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/^frame_malformed: token\./);
    expect(message).not.toContain(secretish);
  });
});

describe("the metrics answer's series (read in place, not copied)", () => {
  const series = () => [
    {
      name: 'apphost_gateway_request_duration_seconds',
      help: 'h',
      type: 'histogram',
      aggregator: 'sum',
      values: [
        {
          labels: { le: 0.005, app: 'a' },
          value: 1,
          metricName: 'apphost_gateway_request_duration_seconds_bucket',
        },
        { labels: { app: 'a' }, value: 0.25, metricName: 'apphost_gateway_request_duration_seconds_sum' },
      ],
    },
    { name: 'g', help: '', type: 'gauge', aggregator: 'omit', values: [{ labels: {}, value: -3 }] },
  ];
  const read = (metrics: unknown) =>
    parsePayload(Buffer.from(JSON.stringify({ v: 1, type: 'metrics', id: 1, metrics })), 'node');

  it('takes and refuses exactly what the schema does, whatever field is wrong and how', () => {
    const wrong: unknown[] = [undefined, null, 'x', 7, 1.5, true, {}, [], [1], { a: {} }, 'median', 'info'];
    // Every place in `series()` a wrong value can go: [family, field] or [family, 'values', value, field].
    const places: Array<Array<string | number>> = [[], [0], [1]];
    for (const f of [0, 1])
      for (const k of ['name', 'help', 'type', 'aggregator', 'values']) places.push([f, k]);
    for (const k of ['labels', 'value', 'metricName']) places.push([0, 'values', 0, k], [1, 'values', 0, k]);
    places.push([0, 'values', 0], [0, 'values', 0, 'labels', 'app'], [0, 'values', 0, 'labels', 'le']);
    let refused = 0;
    for (const place of places)
      for (const w of wrong) {
        const s = series() as unknown as Record<string | number, unknown>;
        let at: Record<string | number, unknown> = s;
        for (const k of place.slice(0, -1)) at = at[k] as Record<string | number, unknown>;
        const last = place.at(-1);
        // As the frame's JSON carries it (undefined: the field absent; the whole list: null).
        if (last === undefined) at = { list: w ?? null };
        else at[last] = w;
        const sent = JSON.parse(JSON.stringify(last === undefined ? at.list : s)) as unknown;
        const schema = MetricsWireSchema.safeParse(sent);
        if (schema.success) expect((read(sent) as { metrics: unknown }).metrics).toEqual(schema.data);
        else {
          refused++;
          expect(
            codeOf(() => read(sent)),
            JSON.stringify({ place, w }),
          ).toBe('frame_malformed');
        }
      }
    expect(refused).toBeGreaterThan(150);
  });

  it("passes the frame's series on as they are", () => {
    expect((read(series()) as { metrics: unknown }).metrics).toEqual(series());
  });

  it('refuses a number JSON reads as infinite (1e999), as a value or a label value, as the schema does', () => {
    // JSON.stringify never writes one (the test above cannot send it): only a frame's own text can.
    const frameOf = (json: string) =>
      parsePayload(Buffer.from(`{"v":1,"type":"metrics","id":1,"metrics":${json}}`), 'node');
    const family = (value: string, label: string) =>
      `[{"name":"g","help":"h","type":"gauge","aggregator":"sum","values":[{"labels":{"k":${label}},"value":${value}}]}]`;
    expect(MetricsWireSchema.safeParse(JSON.parse(family('1e999', '1'))).success).toBe(false);
    expect(codeOf(() => frameOf(family('1e999', '1')))).toBe('frame_malformed');
    expect(codeOf(() => frameOf(family('-1e999', '1')))).toBe('frame_malformed');
    expect(codeOf(() => frameOf(family('1', '1e999')))).toBe('frame_malformed');
    expect((frameOf(family('1e300', '2')) as { metrics: unknown }).metrics).toEqual(
      JSON.parse(family('1e300', '2')),
    );
  });
});

it('has the same error codes as the Rust side (native/dataplane/src/error.rs)', () => {
  const rust = readFileSync(join(import.meta.dirname, '../../../native/dataplane/src/error.rs'), 'utf8');
  const codes = [...rust.matchAll(/=> "([a-z_]+)",/g)].map((m) => m[1]);
  expect(codes.sort()).toEqual(Object.values(ProtocolErrorCode).sort());
});
