import { describe, expect, it } from 'vitest';
import { ApiError } from '../errors.ts';
import {
  checkForwardPath,
  forwardQuery,
  forwardRequestHeaders,
  forwardResponseHeaders,
  upstreamError,
} from './upstream.ts';

describe('forwardRequestHeaders', () => {
  it('drops credentials, hop-by-hop and Connection-listed headers and sets our request id', () => {
    const out = forwardRequestHeaders(
      {
        authorization: 'Bearer t',
        'x-webhook-secret': 's',
        connection: 'keep-alive, x-hop',
        'x-hop': 'gone',
        'keep-alive': 'timeout=5',
        'transfer-encoding': 'chunked',
        host: 'gw',
        'content-length': '3',
        'x-request-id': 'caller-chosen',
        'content-type': 'application/json',
        accept: 'text/event-stream',
        'x-multi': ['a', 'b'],
      },
      'rid-1',
    );
    expect(out).toEqual({
      'content-type': 'application/json',
      accept: 'text/event-stream',
      'x-multi': 'a, b',
      'x-request-id': 'rid-1',
    });
  });
});

describe('forwardResponseHeaders', () => {
  it('keeps end-to-end headers only', () => {
    expect(
      forwardResponseHeaders({
        'content-type': 'application/json',
        'content-length': '2',
        connection: 'close',
        'x-request-id': 'theirs',
        'x-app': '1',
      }),
    ).toEqual({ 'content-type': 'application/json', 'x-app': '1' });
  });
});

describe('forwardQuery', () => {
  it.each([
    ['', ''],
    ['?async=true', ''],
    ['async=true&webhookEndpoint=http%3A%2F%2Fx&q=1&r=a+b', 'q=1&r=a+b'],
    ['?q=1&async=false', 'q=1'],
  ])('%s → %s', (input, want) => {
    expect(forwardQuery(input)).toBe(want);
  });
});

describe('checkForwardPath', () => {
  it.each(['echo', 'a/b', '', 'with%20space', 'v1.2/file.txt', '...x'])('accepts %s', (p) => {
    expect(() => checkForwardPath(p)).not.toThrow();
  });
  it.each(['..', 'a/../b', '%2e%2e', 'a%2Fb', '%zz', './x', 'a\\b', 'a%5Cb'])('rejects %s', (p) => {
    expect(() => checkForwardPath(p)).toThrow(ApiError);
  });
});

describe('upstreamError', () => {
  it('maps header/body timeouts to 504 and anything else to 502', () => {
    expect((upstreamError({ code: 'UND_ERR_HEADERS_TIMEOUT' }) as ApiError).status).toBe(504);
    expect((upstreamError({ code: 'UND_ERR_BODY_TIMEOUT' }) as ApiError).status).toBe(504);
    expect((upstreamError({ code: 'ECONNREFUSED' }) as ApiError).status).toBe(502);
  });
  it('returns our own abort reason untouched', () => {
    const ac = new AbortController();
    const reason = Symbol('mine');
    ac.abort(reason);
    expect(upstreamError(new Error('aborted'), ac.signal)).toBe(reason);
  });
});
