/**
 * OpenAPI conformance: every operation in /openapi.json exists, answers a valid request with a
 * documented status, and its real response validates (ajv) against the documented schema; error
 * responses validate against Error; the router has no route the document leaves out.
 */
import { Ajv, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { createManagementApi, NO_ROUTE_MESSAGE } from '../../../src/management/app.ts';
import type { ApiEnv } from './api-contract.ts';
import { call } from './server.ts';

type Doc = {
  openapi: string;
  info: { version: string };
  tags: Array<{ name: string }>;
  paths: Record<string, Record<string, Operation>>;
  components: { securitySchemes: Record<string, { type: string; scheme: string }> };
};
type Operation = {
  operationId: string;
  tags: string[];
  security?: unknown[];
  parameters?: Array<{ name: string; in: string }>;
  requestBody?: { content: Record<string, { schema: { $ref: string } }> };
  responses: Record<string, { content?: Record<string, { schema: { $ref?: string; type?: string } }> }>;
};

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

export function conformanceSuite(name: string, getEnv: () => ApiEnv): void {
  describe(`OpenAPI conformance: ${name}`, () => {
    it('serves an OpenAPI 3.0.0 document, version 1.0.0, without auth, as JSON and YAML', async () => {
      const env = getEnv();
      const json = await call(env.api.url, 'GET', '/openapi.json');
      expect(json.status).toBe(200);
      const doc = json.body as Doc;
      expect(doc.openapi).toBe('3.0.0');
      expect(doc.info.version).toBe('1.0.0');
      expect(doc.tags.map((t) => t.name)).toContain('Custom Domains');
      expect(doc.components.securitySchemes.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer' });
      expect(doc.paths['/v2/projects/{project_id}/domains/{domain_id}/assign']?.delete?.tags).toEqual([
        'Custom Domains',
      ]);
      const yaml = await call(env.api.url, 'GET', '/openapi.yaml');
      expect(yaml.status).toBe(200);
      expect(yaml.headers.get('content-type')).toMatch(/yaml/);
      expect(parseYaml(yaml.text)).toEqual(doc);
    });

    it('documents exactly the routes the router serves, each with errors and schemas', async () => {
      const env = getEnv();
      const doc = (await call(env.api.url, 'GET', '/openapi.json')).body as Doc;
      const documented = new Set<string>();
      for (const [path, ops] of Object.entries(doc.paths)) {
        for (const [method, op] of Object.entries(ops)) {
          documented.add(`${method.toUpperCase()} ${path}`);
          expect(op.operationId).toBeTruthy();
          expect(op.tags.length).toBeGreaterThan(0);
          for (const [status, r] of Object.entries(op.responses)) {
            const schema = r.content?.['application/json']?.schema ?? r.content?.['application/yaml']?.schema;
            expect(schema, `${method} ${path} ${status} has a schema`).toBeDefined();
          }
          if (op.security === undefined) {
            for (const code of ['400', '401', '404', '500'])
              expect(op.responses[code], `${method} ${path} documents ${code}`).toBeDefined();
            for (const param of path.match(/\{(\w+)\}/g) ?? [])
              expect(op.parameters?.map((x) => `{${x.name}}`)).toContain(param);
          }
          if (op.requestBody) expect(op.responses['413']).toBeDefined();
        }
      }
      const app = createManagementApi({
        store: env.store,
        runs: {
          get: async () => undefined,
          find: async () => undefined,
          list: async () => [],
          getResult: async () => undefined,
          requestCancel: async () => undefined,
        },
        deliveries: { get: async () => undefined },
        log: (await import('../../../src/shared/log.ts')).silentLogger(),
        registry: new (await import('prom-client')).Registry(),
      });
      const served = new Set<string>();
      for (const layer of app.router.stack)
        for (const m of layer.methods)
          if (m !== 'HEAD') served.add(`${m} ${String(layer.path).replace(/:(\w+)/g, '{$1}')}`);
      expect([...served].sort()).toEqual([...documented].sort());
    });

    it('answers every documented operation, and its real responses validate against the document', async () => {
      const env = getEnv();
      const doc = (await call(env.api.url, 'GET', '/openapi.json')).body as Doc;
      const ajv = new Ajv({ strict: false, allErrors: true });
      addFormats(ajv);
      ajv.addSchema(doc, 'openapi');
      const validator = (ref: string): ValidateFunction => {
        const v = ajv.getSchema(`openapi${ref}`);
        if (!v) throw new Error(`no schema ${ref}`);
        return v;
      };
      const errorSchema = validator('#/components/schemas/Error');

      // Fixtures: a domain, an account to revoke, and the seeded runs.
      const t = { token: env.token };
      const pre = `/v2/projects/${env.projectId}`;
      expect(
        (
          await call(env.api.url, 'POST', `${pre}/domains`, {
            ...t,
            body: { domain_id: 'conf', hostname: 'conf.example.test' },
          })
        ).status,
      ).toBe(201);
      expect(
        (
          await call(env.api.url, 'POST', `${pre}/service-accounts`, {
            ...t,
            body: { name: 'conf-victim', expires_at: new Date(Date.now() + 86_400_000).toISOString() },
          })
        ).status,
      ).toBe(201);
      const params: Record<string, string> = {
        project_id: env.projectId,
        domain_id: 'conf',
        app_name: env.appName,
        run_id: 'run-queued',
        name: 'conf-victim',
      };
      const bodies: Record<string, unknown> = {
        createDomain: { hostname: 'conf-created.example.test' },
        assignDomain: { app_name: env.appName },
        createServiceAccount: {
          name: 'conf-new',
          expires_at: new Date(Date.now() + 86_400_000).toISOString(),
        },
        rotateServiceAccount: { expires_at: new Date(Date.now() + 86_400_000).toISOString() },
        createRunToken: { expires_at: new Date(Date.now() + 3_600_000).toISOString() },
      };
      // Reads first, then writes, then deletes, so the fixtures live long enough.
      const order = (m: string) => ({ get: 0, post: 1, put: 2, delete: 3 })[m] ?? 4;
      // The apps and builds routes need a real bundle and a deploy pipeline: deploy-api.test.ts walks them
      // against the same document.
      const ops = Object.entries(doc.paths)
        .flatMap(([path, o]) => Object.entries(o).map(([method, op]) => ({ path, method, op })))
        .filter(({ op }) => !op.tags.includes('Apps') || op.security !== undefined)
        .sort((a, b) => order(a.method) - order(b.method) || b.path.length - a.path.length);
      let checked = 0;
      for (const { path, method, op } of ops) {
        const url = path.replace(/\{(\w+)\}/g, (_m, k: string) => params[k] ?? 'missing');
        const body = bodies[op.operationId];
        const r = await call(env.api.url, method.toUpperCase(), url, {
          ...t,
          ...(body !== undefined ? { body } : {}),
        });
        const what = `${method.toUpperCase()} ${path} → ${r.status}: ${r.text.slice(0, 300)}`;
        expect(r.status, what).toBeLessThan(300);
        expect((r.body as { error?: { message?: string } } | undefined)?.error?.message).not.toBe(
          NO_ROUTE_MESSAGE,
        );
        const documented = op.responses[String(r.status)];
        expect(documented, `${what} is documented`).toBeDefined();
        const schema = documented?.content?.['application/json']?.schema;
        if (schema?.$ref) {
          const v = validator(schema.$ref);
          expect(v(r.body), `${what}\n${ajv.errorsText(v.errors)}`).toBe(true);
        }
        if (op.security === undefined) {
          // Errors validate too: no token → 401, and a bad path → 4xx, both as documented Error bodies.
          const unauth = await call(
            env.api.url,
            method.toUpperCase(),
            url,
            body !== undefined ? { body } : {},
          );
          expect(unauth.status).toBe(401);
          expect(op.responses['401']).toBeDefined();
          expect(errorSchema(unauth.body), ajv.errorsText(errorSchema.errors)).toBe(true);
          const badUrl = path.replace(/\{(\w+)\}/g, (_m, k: string) =>
            k === 'project_id' ? env.projectId : 'Not_Valid',
          );
          if (badUrl !== path.replace('{project_id}', env.projectId)) {
            const bad = await call(env.api.url, method.toUpperCase(), badUrl, {
              ...t,
              ...(body !== undefined ? { body } : {}),
            });
            expect(
              op.responses[String(bad.status)],
              `${method} ${badUrl} → ${bad.status} documented`,
            ).toBeDefined();
            expect(errorSchema(bad.body), ajv.errorsText(errorSchema.errors)).toBe(true);
          }
        }
        checked++;
      }
      expect(checked).toBe(ops.length);
      expect(checked).toBeGreaterThanOrEqual(14);
      // Tidy the fixtures this walk created.
      await env.store.revokeServiceAccount(env.projectId, 'conf-new');
      await env.store.deleteDomain(env.projectId, 'conf-created-example-test');
      await env.store.deleteDomain(env.projectId, 'conf');
    });
  });
}
