/**
 * Bounds every call into a backend (Kubernetes, NATS KV): a method that does not settle within
 * `ms` rejects with 504 upstream_timeout, so a stuck apiserver never hangs a request.
 */
import { ApiError, ErrorCode } from '../shared/errors.ts';

export function withDeadline<T extends object>(target: T, ms: number, what: string): T {
  return new Proxy(target, {
    get(obj, prop, receiver) {
      const value = Reflect.get(obj, prop, receiver) as unknown;
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        const result = (value as (...a: unknown[]) => unknown).apply(obj, args);
        if (!(result instanceof Promise)) return result;
        let timer: NodeJS.Timeout | undefined;
        const timeout = new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new ApiError(ErrorCode.UpstreamTimeout, `${what} did not answer within ${ms} ms`)),
            ms,
          );
        });
        return Promise.race([result, timeout]).finally(() => clearTimeout(timer));
      };
    },
  });
}
