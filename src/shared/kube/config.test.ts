import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { kubeConfigFromString, loadKubeConfig } from './config.ts';

const dir = mkdtempSync(join(tmpdir(), 'apphost-kubeconfig-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// The offending line holds a token; the lines around it may hold client-key-data.
const broken =
  'apiVersion: v1\nusers:\n- name: u\n  user:\n    token: s3cret-t0ken\n     client-key-data: QUJD\n';

it('says where a kubeconfig is not YAML without quoting it (its lines may hold a token or key)', () => {
  const file = join(dir, 'config');
  writeFileSync(file, broken);
  for (const [load, source] of [
    [() => loadKubeConfig(file), file],
    [() => kubeConfigFromString(broken), '(string)'],
  ] as const) {
    const message = (() => {
      try {
        load();
      } catch (err) {
        return (err as Error).message;
      }
      return 'loaded';
    })();
    expect(message).toMatch(
      new RegExp(`^kubeconfig ${source.replace(/[()]/g, '\\$&')}: not YAML: .+ \\(line 6, column \\d+\\)$`),
    );
    expect(message).not.toContain('s3cret');
    expect(message).not.toContain('QUJD');
  }
});
