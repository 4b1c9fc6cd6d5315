import { ApiException } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { isConflict, isGone, isNotFound, KubeApiError, kubeErrorToApiError, kubeStatusOf } from './errors.ts';

const clientNode = (code: number, reason: string, message = 'm') =>
  new ApiException(code, 'HTTP request failed', JSON.stringify({ kind: 'Status', reason, message }), {});

describe('one Kubernetes error taxonomy', () => {
  it('reads the status of our KubeClient errors and of client-node ApiExceptions alike', () => {
    expect(kubeStatusOf(new KubeApiError(404, 'NotFound', 'GET /x: 404'))).toMatchObject({
      code: 404,
      reason: 'NotFound',
    });
    expect(kubeStatusOf(clientNode(409, 'AlreadyExists', 'exists'))).toEqual({
      code: 409,
      reason: 'AlreadyExists',
      message: 'exists',
    });
    expect(isNotFound(clientNode(404, 'NotFound'))).toBe(true);
    expect(isConflict(new KubeApiError(409, 'Conflict', 'x'))).toBe(true);
    expect(isGone(new KubeApiError(410, 'Expired', 'x'))).toBe(true);
    expect(isNotFound(new Error('ECONNREFUSED'))).toBe(false);
  });

  it.each([
    [clientNode(404, 'NotFound'), 404, 'not_found'],
    [new KubeApiError(410, 'Gone', 'x'), 404, 'not_found'],
    [clientNode(409, 'AlreadyExists'), 409, 'conflict'],
    [clientNode(422, 'Invalid'), 422, 'unprocessable'],
    [clientNode(400, 'BadRequest'), 400, 'bad_request'],
    [clientNode(429, 'TooManyRequests'), 502, 'upstream_unreachable'],
    [new KubeApiError(503, undefined, 'x'), 502, 'upstream_unreachable'],
    [clientNode(403, 'Forbidden'), 500, 'internal'],
    [new Error('boom'), 500, 'internal'],
  ])('maps %s to %i %s', (err, status, code) => {
    const e = kubeErrorToApiError(err, 'domain d');
    expect(e.status).toBe(status);
    expect(e.code).toBe(code);
  });
});
