/** Service accounts: create (token shown once), list, rotate (new token shown once), revoke. */
import type { Router } from '@koa/router';
import { ApiError, ErrorCode } from '../../shared/errors.ts';
import { readJsonBody } from '../../shared/http/body.ts';
import { type HandlerDeps, param, projectScope } from '../context.ts';
import { errorResponse, ok, operation, type Paths, TAG } from '../operation.ts';
import {
  CreatedServiceAccountResponse,
  presentServiceAccount,
  ServiceAccountListResponse,
  ServiceAccountResponse,
} from '../present.ts';
import { createServiceAccount, rotateServiceAccount } from '../service-accounts.ts';
import {
  createServiceAccountBody,
  parseOrThrow,
  rotateServiceAccountBody,
  serviceAccountName,
  toDate,
} from '../validation.ts';

export function registerServiceAccountRoutes(router: Router, deps: HandlerDeps): void {
  const { store } = deps;

  router.post('createServiceAccount', '/v2/projects/:project_id/service-accounts', async (ctx) => {
    const projectId = await projectScope(ctx, deps);
    const body = parseOrThrow(
      createServiceAccountBody,
      (await readJsonBody(ctx, deps.settings.maxBodyBytes)) ?? {},
      'body',
    );
    const { account, token } = await createServiceAccount(
      store,
      projectId,
      body.name,
      toDate(body.expires_at),
      new Date(deps.clock.now()),
      { maxDays: deps.settings.maxServiceAccountDays },
    );
    ctx.status = 201;
    ctx.set('cache-control', 'no-store');
    ctx.body = { ...presentServiceAccount(account), token };
  });

  router.get('listServiceAccounts', '/v2/projects/:project_id/service-accounts', async (ctx) => {
    const projectId = await projectScope(ctx, deps);
    ctx.body = { service_accounts: (await store.listServiceAccounts(projectId)).map(presentServiceAccount) };
  });

  // The same rule as the dashboard's rotate (service-accounts.ts): new secret, new expiry, old token refused.
  router.post(
    'rotateServiceAccount',
    '/v2/projects/:project_id/service-accounts/:name/rotate',
    async (ctx) => {
      const projectId = await projectScope(ctx, deps);
      const name = parseOrThrow(serviceAccountName, param(ctx, 'name'), 'name');
      const body = parseOrThrow(
        rotateServiceAccountBody,
        (await readJsonBody(ctx, deps.settings.maxBodyBytes)) ?? {},
        'body',
      );
      const { account, token } = await rotateServiceAccount(
        store,
        deps.auth,
        projectId,
        name,
        toDate(body.expires_at),
        new Date(deps.clock.now()),
        { maxDays: deps.settings.maxServiceAccountDays },
      );
      ctx.set('cache-control', 'no-store');
      ctx.body = { ...presentServiceAccount(account), token };
    },
  );

  router.delete('revokeServiceAccount', '/v2/projects/:project_id/service-accounts/:name', async (ctx) => {
    const projectId = await projectScope(ctx, deps);
    const name = parseOrThrow(serviceAccountName, param(ctx, 'name'), 'name');
    const account = await store.getServiceAccount(projectId, name);
    if (!account || !(await store.revokeServiceAccount(projectId, name)))
      throw new ApiError(ErrorCode.NotFound, `service account ${name} not found`);
    deps.auth.forget(projectId, name);
    const { secretHash: _h, ...shown } = account;
    ctx.body = presentServiceAccount(shown);
  });
}

export const serviceAccountPaths: Paths = {
  '/v2/projects/{project_id}/service-accounts': {
    get: operation({
      operationId: 'listServiceAccounts',
      tag: TAG.accounts,
      summary: 'List service accounts (never their tokens)',
      params: ['project_id'],
      responses: { '200': ok('The service accounts, by name.', ServiceAccountListResponse) },
    }),
    post: operation({
      operationId: 'createServiceAccount',
      tag: TAG.accounts,
      summary: 'Create a service account; its token is in this response only',
      params: ['project_id'],
      body: createServiceAccountBody,
      responses: {
        '201': ok('The account with its token.', CreatedServiceAccountResponse),
        '409': errorResponse('The name is taken.'),
        '422': errorResponse('expires_at is in the past or beyond the maximum lifetime.'),
      },
    }),
  },
  '/v2/projects/{project_id}/service-accounts/{name}': {
    delete: operation({
      operationId: 'revokeServiceAccount',
      tag: TAG.accounts,
      summary: 'Revoke a service account: its token is refused from now on',
      params: ['project_id', 'name'],
      responses: { '200': ok('The revoked account.', ServiceAccountResponse) },
    }),
  },
  '/v2/projects/{project_id}/service-accounts/{name}/rotate': {
    post: operation({
      operationId: 'rotateServiceAccount',
      tag: TAG.accounts,
      summary:
        'Rotate a service account: a new token (in this response only) and expiry; the old token is refused from now on',
      params: ['project_id', 'name'],
      body: rotateServiceAccountBody,
      responses: {
        '200': ok('The account with its new token.', CreatedServiceAccountResponse),
        '422': errorResponse('expires_at is in the past or beyond the maximum lifetime.'),
      },
    }),
  },
};
