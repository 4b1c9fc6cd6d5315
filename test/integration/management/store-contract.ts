/**
 * The ManagementStore contract, run against every implementation (memory and Kubernetes) so local
 * mode and a cluster behave the same.
 */
import { describe, expect, it } from 'vitest';
import type { ManagementStore, StoredServiceAccount } from '../../../src/management/store/types.ts';
import { ApiError } from '../../../src/shared/errors.ts';
import { createRunTokenVerifier, issueRunToken } from '../../../src/shared/run-tokens.ts';

export interface ContractEnv {
  store: ManagementStore;
  /** A project with an app named `appName`. */
  projectId: string;
  otherProjectId: string;
  appName: string;
  /** The raw stored appName of a domain (the DomainAssignment's spec.appName), to check the record itself. */
  rawAssignedApp(projectId: string, domainId: string): Promise<string | undefined>;
}

const account = (name: string, over: Partial<StoredServiceAccount> = {}): StoredServiceAccount => ({
  name,
  secretHash: 'ab'.repeat(32),
  expiresAt: '2099-01-01T00:00:00.000Z',
  createdAt: '2026-01-01T00:00:00.000Z',
  lastUsedAt: undefined,
  ...over,
});

async function rejects(p: Promise<unknown>, status: number): Promise<void> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ApiError);
  expect((err as ApiError).status).toBe(status);
}

export function storeContract(name: string, env: () => ContractEnv): void {
  describe(`ManagementStore contract: ${name}`, () => {
    it('knows its projects and apps', async () => {
      const { store, projectId, otherProjectId, appName } = env();
      expect(await store.projectExists(projectId)).toBe(true);
      expect(await store.projectExists(otherProjectId)).toBe(true);
      expect(await store.projectExists('no-such-project-x')).toBe(false);
      expect(await store.projectExists('Bad_Project!')).toBe(false);
      expect(await store.appExists(projectId, appName)).toBe(true);
      expect(await store.appExists(projectId, 'no-such-app')).toBe(false);
      expect(await store.appExists(otherProjectId, appName)).toBe(false);
      expect(await store.appExists('no-such-project-x', appName)).toBe(false);
      const apps = await store.listApps(projectId);
      expect(apps.map((a) => a.name)).toEqual([appName]);
      expect(apps[0]?.spec.runtime).toBe('cortex');
      expect(await store.listApps(otherProjectId)).toEqual([]);
      await rejects(store.listApps('no-such-project-x'), 404);
    });

    it('creates, assigns, unassigns (idempotently) and deletes a domain', async () => {
      const { store, projectId, appName, rawAssignedApp } = env();
      const created = await store.createDomain(projectId, {
        domainId: 'shop',
        hostname: 'shop.contract.test',
      });
      expect(created).toMatchObject({ domainId: 'shop', hostname: 'shop.contract.test', appName: undefined });
      expect(Number.isNaN(Date.parse(created.createdAt))).toBe(false);
      expect((await store.listDomains(projectId)).map((d) => d.domainId)).toContain('shop');

      const assigned = await store.assignDomain(projectId, 'shop', appName);
      expect(assigned?.appName).toBe(appName);
      // Routing status comes from the operator in a cluster; without one yet it is never "True".
      expect(['True', 'Unknown']).toContain(assigned?.status?.status);
      expect(await rawAssignedApp(projectId, 'shop')).toBe(appName);
      expect((await store.getDomain(projectId, 'shop'))?.appName).toBe(appName);

      const unassigned = await store.unassignDomain(projectId, 'shop');
      expect(unassigned).toMatchObject({
        domainId: 'shop',
        hostname: 'shop.contract.test',
        appName: undefined,
      });
      expect(await rawAssignedApp(projectId, 'shop')).toBeUndefined();
      // The record stays, and a second unassign changes nothing.
      expect(await store.getDomain(projectId, 'shop')).toMatchObject({
        domainId: 'shop',
        appName: undefined,
      });
      expect(await store.unassignDomain(projectId, 'shop')).toMatchObject({
        domainId: 'shop',
        appName: undefined,
      });

      expect(await store.deleteDomain(projectId, 'shop')).toBe(true);
      expect(await store.getDomain(projectId, 'shop')).toBeUndefined();
      expect(await store.deleteDomain(projectId, 'shop')).toBe(false);
    });

    it('refuses duplicate domain ids and hostnames taken by any project', async () => {
      const { store, projectId, otherProjectId } = env();
      await store.createDomain(projectId, { domainId: 'dup', hostname: 'dup.contract.test' });
      await rejects(store.createDomain(projectId, { domainId: 'dup', hostname: 'other.contract.test' }), 409);
      await rejects(
        store.createDomain(otherProjectId, { domainId: 'dup2', hostname: 'dup.contract.test' }),
        409,
      );
      expect(await store.getDomain(otherProjectId, 'dup2')).toBeUndefined();
      // The same id in another project is a different domain.
      await store.createDomain(otherProjectId, { domainId: 'dup', hostname: 'dup.other.contract.test' });
      expect((await store.getDomain(projectId, 'dup'))?.hostname).toBe('dup.contract.test');
      await store.deleteDomain(projectId, 'dup');
      await store.deleteDomain(otherProjectId, 'dup');
    });

    it('answers unknown projects and domains without changing anything', async () => {
      const { store, projectId, appName } = env();
      expect(await store.getDomain('no-such-project-x', 'shop')).toBeUndefined();
      expect(await store.unassignDomain('no-such-project-x', 'shop')).toBeUndefined();
      expect(await store.assignDomain(projectId, 'no-such-domain', appName)).toBeUndefined();
      expect(await store.unassignDomain(projectId, 'no-such-domain')).toBeUndefined();
      expect(await store.deleteDomain('no-such-project-x', 'shop')).toBe(false);
      await rejects(store.listDomains('no-such-project-x'), 404);
      await rejects(
        store.createDomain('no-such-project-x', { domainId: 'x', hostname: 'x.contract.test' }),
        404,
      );
      expect(await store.getDomain(projectId, 'no-such-domain')).toBeUndefined();
    });

    it('keeps service accounts with only a hash, records use, and revokes', async () => {
      const { store, projectId, otherProjectId } = env();
      const shown = await store.createServiceAccount(projectId, account('ci'));
      expect(shown).toEqual({
        name: 'ci',
        expiresAt: '2099-01-01T00:00:00.000Z',
        createdAt: '2026-01-01T00:00:00.000Z',
        lastUsedAt: undefined,
      });
      await rejects(store.createServiceAccount(projectId, account('ci')), 409);
      expect((await store.getServiceAccount(projectId, 'ci'))?.secretHash).toBe('ab'.repeat(32));
      expect(await store.getServiceAccount(otherProjectId, 'ci')).toBeUndefined();
      const listed = await store.listServiceAccounts(projectId);
      expect(listed.map((a) => a.name)).toEqual(['ci']);
      expect(JSON.stringify(listed)).not.toContain('ab'.repeat(32));

      await store.touchServiceAccount(projectId, 'ci', new Date('2026-06-01T12:00:00Z'));
      expect((await store.getServiceAccount(projectId, 'ci'))?.lastUsedAt).toBe('2026-06-01T12:00:00.000Z');
      await store.touchServiceAccount(projectId, 'nobody', new Date());

      // Rotation: a new secret and expiry for the same account; other projects are untouched.
      const rotated = await store.rotateServiceAccount(projectId, 'ci', {
        secretHash: 'cd'.repeat(32),
        expiresAt: '2098-01-01T00:00:00.000Z',
      });
      expect(rotated).toMatchObject({ name: 'ci', expiresAt: '2098-01-01T00:00:00.000Z' });
      expect(JSON.stringify(rotated)).not.toContain('cd'.repeat(32));
      expect((await store.getServiceAccount(projectId, 'ci'))?.secretHash).toBe('cd'.repeat(32));
      expect(
        await store.rotateServiceAccount(otherProjectId, 'ci', {
          secretHash: 'ef'.repeat(32),
          expiresAt: '2098-01-01',
        }),
      ).toBeUndefined();
      expect(await store.getServiceAccount(otherProjectId, 'ci')).toBeUndefined();

      expect(await store.revokeServiceAccount(projectId, 'ci')).toBe(true);
      expect(await store.getServiceAccount(projectId, 'ci')).toBeUndefined();
      expect(await store.revokeServiceAccount(projectId, 'ci')).toBe(false);
      expect(await store.listServiceAccounts(projectId)).toEqual([]);
      await rejects(store.listServiceAccounts('no-such-project-x'), 404);
      await rejects(store.createServiceAccount('no-such-project-x', account('ci')), 404);
    });

    it('keeps one run-token key set, and rotation keeps earlier tokens valid', async () => {
      const { store } = env();
      const first = await store.getRunTokenKeys();
      expect(first.keys.length).toBeGreaterThan(0);
      expect((await store.getRunTokenKeys()).keys[0]?.kid).toBe(first.keys[0]?.kid);
      const old = await issueRunToken(first, 'p1', new Date(Date.now() + 3_600_000));

      const rotated = await store.rotateRunTokenKeys();
      expect(rotated.keys[0]?.kid).not.toBe(first.keys[0]?.kid);
      expect(rotated.keys[1]?.kid).toBe(first.keys[0]?.kid);
      expect((await store.getRunTokenKeys()).keys.map((k) => k.kid)).toEqual(rotated.keys.map((k) => k.kid));

      const verify = createRunTokenVerifier(() => rotated);
      expect((await verify(old)).projectId).toBe('p1');
      const fresh = await issueRunToken(rotated, 'p1', new Date(Date.now() + 3_600_000));
      expect((await verify(fresh)).projectId).toBe('p1');
    });
  });
}
