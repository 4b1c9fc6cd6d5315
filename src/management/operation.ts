/**
 * How a route documents itself: each routes/*.ts exports its OpenAPI paths built with `operation()`
 * from the same zod schemas its handlers parse with, and openapi.ts assembles the document.
 * test/integration/management/conformance.ts holds the router and the document together.
 */
import { z } from 'zod';
import type { ZodOpenApiOperationObject, ZodOpenApiPathsObject, ZodOpenApiResponseObject } from 'zod-openapi';
import { ErrorBody } from '../shared/errors.ts';
import { buildId, projectId, resourceName, runId, serviceAccountName } from './validation.ts';

export type { ZodOpenApiPathsObject as Paths };

export const TAG = {
  apps: 'Apps',
  logs: 'Logs',
  domains: 'Custom Domains',
  accounts: 'Service Accounts',
  runTokens: 'Run Tokens',
  runs: 'Runs',
  meta: 'API Description',
} as const;

export const errorResponse = (description: string): ZodOpenApiResponseObject => ({
  description,
  content: { 'application/json': { schema: ErrorBody } },
});
export const ok = (description: string, schema: z.ZodType): ZodOpenApiResponseObject => ({
  description,
  content: { 'application/json': { schema } },
});

/** Path parameters, each with the rule its handler checks. */
export const PathParam = {
  project_id: projectId.meta({ param: { description: 'The project.' } }),
  domain_id: resourceName.meta({ param: { description: 'The domain.' } }),
  app_name: resourceName.meta({ param: { description: 'The app.' } }),
  run_id: runId.meta({ param: { description: 'The run (request) id.' } }),
  name: serviceAccountName.meta({ param: { description: 'The service account name.' } }),
  build_id: buildId.meta({ param: { description: 'The build id.' } }),
};
type ParamName = keyof typeof PathParam;

/** Errors every authenticated route can answer with. */
const COMMON = {
  '400': errorResponse('Invalid path parameter, query or body; `problems` lists each issue.'),
  '401': errorResponse('Missing, malformed, unknown, expired or revoked service-account token.'),
  '404': errorResponse(
    "Unknown project or resource. A project other than the token's own is always 404, whether or not it exists.",
  ),
  '500': errorResponse('Internal error.'),
  '502': errorResponse('The Kubernetes API is busy or starting (Retry-After given).'),
  '504': errorResponse('A backend (Kubernetes API, run or delivery store) did not answer in time.'),
};
const WITH_BODY = {
  '413': errorResponse('Request body larger than the configured limit.'),
  '415': errorResponse('Request body is not application/json.'),
};

/** An authenticated operation: path parameters, optional query and JSON body, and the common errors. */
export function operation(o: {
  operationId: string;
  tag: string;
  summary: string;
  params: readonly ParamName[];
  query?: z.ZodObject;
  body?: z.ZodType;
  responses: Record<string, ZodOpenApiResponseObject>;
}): ZodOpenApiOperationObject {
  const path = z.object(Object.fromEntries(o.params.map((p) => [p, PathParam[p]])));
  return {
    operationId: o.operationId,
    tags: [o.tag],
    summary: o.summary,
    requestParams: { path, ...(o.query ? { query: o.query } : {}) },
    ...(o.body
      ? { requestBody: { required: true, content: { 'application/json': { schema: o.body } } } }
      : {}),
    responses: { ...o.responses, ...COMMON, ...(o.body ? WITH_BODY : {}) },
  };
}
