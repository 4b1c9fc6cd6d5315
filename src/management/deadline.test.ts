import { describe, expect, it } from 'vitest';
import { ApiError } from '../shared/errors.ts';
import { withDeadline } from './deadline.ts';

describe('withDeadline', () => {
  const target = {
    fast: async (x: number) => x * 2,
    never: () => new Promise<number>(() => {}),
    sync: () => 7,
  };
  const bounded = withDeadline(target, 50, 'the test backend');

  it('passes results through', async () => {
    expect(await bounded.fast(21)).toBe(42);
    expect(bounded.sync()).toBe(7);
  });

  it('turns a call that never settles into a 504', async () => {
    const err = await bounded.never().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(504);
    expect((err as ApiError).message).toContain('the test backend');
  });
});
