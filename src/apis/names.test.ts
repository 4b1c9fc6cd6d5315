import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import {
  APP_NAME,
  DNS_LABEL,
  HOSTNAME,
  HOSTNAME_MAX_LENGTH,
  HOSTNAME_PATTERN,
  isDnsSubdomain,
  isLabelValue,
} from './names.ts';

const CRDS = join(import.meta.dirname, '..', '..', 'crds');

/** The CEL rules of a CRD field, e.g. `spec.hostname`. */
function celRules(file: string, path: string[]): { rules: string[]; maxLength?: number } {
  const crd = parse(readFileSync(join(CRDS, file), 'utf8')) as {
    spec: { versions: Array<{ schema: { openAPIV3Schema: Record<string, unknown> } }> };
  };
  let node = crd.spec.versions[0]?.schema.openAPIV3Schema as Record<string, unknown>;
  for (const p of path) node = (node.properties as Record<string, Record<string, unknown>>)[p] ?? {};
  const rules = ((node['x-kubernetes-validations'] as Array<{ rule: string }>) ?? []).map((r) => r.rule);
  return { rules, ...(typeof node.maxLength === 'number' ? { maxLength: node.maxLength } : {}) };
}

describe('name rules', () => {
  it('state the DomainAssignment CRD hostname rule', () => {
    const { rules, maxLength } = celRules('apphost.dev_domainassignments.yaml', ['spec', 'hostname']);
    // The CRD states it as a CEL string literal, where a regex backslash is written twice.
    expect(rules).toContain(`self.matches('${HOSTNAME_PATTERN.replaceAll('\\', '\\\\')}')`);
    expect(maxLength).toBe(HOSTNAME_MAX_LENGTH);
  });

  it.each([
    ['app.example.com', true],
    ['a.b', true],
    ['localhost', false],
    ['*.example.com', false],
    ['App.example.com', false],
    ['app.example.com.', false],
    ['-a.example.com', false],
  ])('hostname %s → %s', (h, ok) => {
    expect(HOSTNAME.test(h)).toBe(ok);
  });

  it.each([
    ['shop', true],
    ['a', true],
    ['a'.repeat(63), true],
    ['a'.repeat(64), false],
    ['a.b', false],
    ['Shop', false],
    ['-shop', false],
  ])('DNS label %s → %s', (l, ok) => {
    expect(DNS_LABEL.test(l)).toBe(ok);
  });

  it.each([
    ['shop', true],
    ['shop-2', true],
    ['2shop', false], // a Service name must start with a letter
    ['shop-', false],
    ['Shop', false],
  ])('app name %s → %s', (n, ok) => {
    expect(APP_NAME.test(n)).toBe(ok);
  });

  it.each([
    ['creds', true],
    ['db.creds-1', true],
    ['a'.repeat(253), true],
    ['a'.repeat(254), false],
    ['a..b', false],
    ['a.-b', false],
    ['.a', false],
    ['Creds', false],
  ])('Kubernetes object name (DNS subdomain) %s → %s', (n, ok) => {
    expect(isDnsSubdomain(n)).toBe(ok);
  });

  it.each([
    ['shop', true],
    ['Shop_1.x', true],
    ['', true],
    ['a'.repeat(64), false],
    ['-shop', false],
    ['a,b', false], // would change a label selector
    ['a=b', false],
  ])('label value %s → %s', (v, ok) => {
    expect(isLabelValue(v)).toBe(ok);
  });
});
