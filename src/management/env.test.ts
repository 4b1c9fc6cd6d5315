import { describe, expect, it } from 'vitest';
import { readManagementEnv } from './main.ts';

describe('readManagementEnv', () => {
  it('management: the deprecated _SECONDS names still work', () => {
    const e = readManagementEnv({
      APPHOST_MANAGEMENT_AUTH_CACHE_SECONDS: '5',
      APPHOST_MANAGEMENT_SHUTDOWN_SECONDS: '2',
    });
    expect(e.APPHOST_MANAGEMENT_AUTH_CACHE_MS).toBe(5000);
    expect(e.APPHOST_MANAGEMENT_SHUTDOWN_TIMEOUT_MS).toBe(2000);
    expect(readManagementEnv({}).APPHOST_MANAGEMENT_BACKEND_TIMEOUT_MS).toBe(10_000);
  });
});
