import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkDataPlaneBinary } from './dev.ts';

describe('checkDataPlaneBinary', () => {
  const dir = mkdtempSync(join(tmpdir(), 'dp-bin-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('refuses what cannot be run, naming the setting and how to get a binary', () => {
    const plain = join(dir, 'plain');
    writeFileSync(plain, '');
    chmodSync(plain, 0o644);
    for (const bin of [join(dir, 'missing'), dir, plain])
      expect(() => checkDataPlaneBinary(bin)).toThrow(
        new RegExp(`^APPHOST_GATEWAY_DATA_PLANE_BIN=${bin} is not an executable file .*make build-native`),
      );
  });

  it('takes an executable file', () => {
    const bin = join(dir, 'apphost-dataplane');
    writeFileSync(bin, '#!/bin/sh\n');
    chmodSync(bin, 0o755);
    expect(() => checkDataPlaneBinary(bin)).not.toThrow();
  });
});
