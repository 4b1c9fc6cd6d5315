/** Custom domains: list, get, create, assign, unassign (spec §4.1), delete. */
import type { Router, RouterContext } from '@koa/router';
import { ApiError, ErrorCode } from '../../shared/errors.ts';
import { readJsonBody } from '../../shared/http/body.ts';
import { type HandlerDeps, param, projectScope } from '../context.ts';
import { assignDomainToApp } from '../domains.ts';
import { errorResponse, ok, operation, type Paths, TAG } from '../operation.ts';
import { DomainListResponse, DomainResponse, presentDomain } from '../present.ts';
import { assignDomainBody, createDomainBody, parseOrThrow, resourceName } from '../validation.ts';

/** A domain id derived from its hostname when the caller gives none: app.example.com → app-example-com. */
export function domainIdFor(hostname: string): string {
  return hostname.replace(/\./g, '-').slice(0, 63).replace(/-+$/, '');
}

export function registerDomainRoutes(router: Router, deps: HandlerDeps): void {
  const { store } = deps;
  const domainId = (ctx: RouterContext) => parseOrThrow(resourceName, param(ctx, 'domain_id'), 'domain_id');
  const notFound = (id: string) => new ApiError(ErrorCode.NotFound, `domain ${id} not found`);

  router.get('listDomains', '/v2/projects/:project_id/domains', async (ctx) => {
    const projectId = await projectScope(ctx, deps);
    ctx.body = { domains: (await store.listDomains(projectId)).map(presentDomain) };
  });

  router.post('createDomain', '/v2/projects/:project_id/domains', async (ctx) => {
    const projectId = await projectScope(ctx, deps);
    const body = parseOrThrow(
      createDomainBody,
      (await readJsonBody(ctx, deps.settings.maxBodyBytes)) ?? {},
      'body',
    );
    const id = body.domain_id ?? domainIdFor(body.hostname);
    const created = await store.createDomain(projectId, { domainId: id, hostname: body.hostname });
    ctx.status = 201;
    ctx.body = presentDomain(created);
  });

  router.get('getDomain', '/v2/projects/:project_id/domains/:domain_id', async (ctx) => {
    const projectId = await projectScope(ctx, deps);
    const id = domainId(ctx);
    const d = await store.getDomain(projectId, id);
    if (!d) throw notFound(id);
    ctx.body = presentDomain(d);
  });

  router.delete('deleteDomain', '/v2/projects/:project_id/domains/:domain_id', async (ctx) => {
    const projectId = await projectScope(ctx, deps);
    const id = domainId(ctx);
    const d = await store.getDomain(projectId, id);
    if (!d || !(await store.deleteDomain(projectId, id))) throw notFound(id);
    ctx.body = presentDomain(d);
  });

  router.put('assignDomain', '/v2/projects/:project_id/domains/:domain_id/assign', async (ctx) => {
    const projectId = await projectScope(ctx, deps);
    const id = domainId(ctx);
    const body = parseOrThrow(
      assignDomainBody,
      (await readJsonBody(ctx, deps.settings.maxBodyBytes)) ?? {},
      'body',
    );
    const d = await assignDomainToApp(store, projectId, id, body.app_name);
    ctx.body = presentDomain(d);
  });

  // Idempotent: unassigning an unassigned domain is 200 with the unchanged domain.
  router.delete('unassignDomain', '/v2/projects/:project_id/domains/:domain_id/assign', async (ctx) => {
    const projectId = await projectScope(ctx, deps);
    const id = domainId(ctx);
    const d = await store.unassignDomain(projectId, id);
    if (!d) throw notFound(id);
    ctx.body = presentDomain(d);
  });
}

export const domainPaths: Paths = {
  '/v2/projects/{project_id}/domains': {
    get: operation({
      operationId: 'listDomains',
      tag: TAG.domains,
      summary: 'List the custom domains of a project',
      params: ['project_id'],
      responses: { '200': ok('The domains, by id.', DomainListResponse) },
    }),
    post: operation({
      operationId: 'createDomain',
      tag: TAG.domains,
      summary: 'Create a custom domain (unassigned)',
      params: ['project_id'],
      body: createDomainBody,
      responses: {
        '201': ok('The created domain.', DomainResponse),
        '409': errorResponse('The domain id exists or the hostname is in use.'),
      },
    }),
  },
  '/v2/projects/{project_id}/domains/{domain_id}': {
    get: operation({
      operationId: 'getDomain',
      tag: TAG.domains,
      summary: 'Get a custom domain',
      params: ['project_id', 'domain_id'],
      responses: { '200': ok('The domain.', DomainResponse) },
    }),
    delete: operation({
      operationId: 'deleteDomain',
      tag: TAG.domains,
      summary: 'Delete a custom domain (and its routing)',
      params: ['project_id', 'domain_id'],
      responses: { '200': ok('The deleted domain, as it was.', DomainResponse) },
    }),
  },
  '/v2/projects/{project_id}/domains/{domain_id}/assign': {
    put: operation({
      operationId: 'assignDomain',
      tag: TAG.domains,
      summary: 'Assign a custom domain to an app (replaces any earlier assignment)',
      params: ['project_id', 'domain_id'],
      body: assignDomainBody,
      responses: {
        '200': ok('The domain, assigned.', DomainResponse),
        '422': errorResponse('The app does not exist in the project.'),
      },
    }),
    delete: operation({
      operationId: 'unassignDomain',
      tag: TAG.domains,
      summary: 'Unassign domain from app',
      params: ['project_id', 'domain_id'],
      responses: {
        '200': ok(
          'The domain, now unassigned; the record stays and routing for it stops. Idempotent: unassigning an unassigned domain is 200 too.',
          DomainResponse,
        ),
      },
    }),
  },
};
