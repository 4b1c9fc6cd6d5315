/**
 * The management API's OpenAPI 3.0.0 document, generated (zod-openapi) from the zod schemas the
 * handlers validate with and the presenters answer with; each routes/*.ts contributes its paths.
 * Optional members are absent, never null, so ajv validates responses against the schemas as they are.
 */
import { stringify } from 'yaml';
import { createDocument } from 'zod-openapi';
import { TAG } from './operation.ts';
import { appPaths } from './routes/apps.ts';
import { domainPaths } from './routes/domains.ts';
import { logPaths } from './routes/logs.ts';
import { runTokenPaths } from './routes/run-tokens.ts';
import { runPaths } from './routes/runs.ts';
import { serviceAccountPaths } from './routes/service-accounts.ts';

const metaPaths = {
  '/openapi.json': {
    get: {
      operationId: 'getOpenApiJson',
      tags: [TAG.meta],
      summary: 'This document as JSON',
      security: [],
      responses: {
        '200': {
          description: 'OpenAPI 3.0.0 document.',
          content: { 'application/json': { schema: { type: 'object' as const } } },
        },
      },
    },
  },
  '/openapi.yaml': {
    get: {
      operationId: 'getOpenApiYaml',
      tags: [TAG.meta],
      summary: 'This document as YAML',
      security: [],
      responses: {
        '200': {
          description: 'OpenAPI 3.0.0 document.',
          content: { 'application/yaml': { schema: { type: 'string' as const } } },
        },
      },
    },
  },
};

let cached: Record<string, unknown> | undefined;

export function openApiDocument(): Record<string, unknown> {
  cached ??= createDocument({
    openapi: '3.0.0',
    info: {
      title: 'apphost management API',
      version: '1.0.0',
      description:
        'Custom domains, service accounts, run tokens and run records of an apphost project. Every route except ' +
        'this document needs `Authorization: Bearer <SERVICE_ACCOUNT_TOKEN>`; a token is valid for its own ' +
        'project only: any other project answers 404, as if it did not exist.',
    },
    servers: [{ url: '/' }],
    tags: [
      {
        name: TAG.apps,
        description:
          'Deploy an app (upload its bundle), list, get and delete apps, and follow each build (docs/deploy.md).',
      },
      { name: TAG.domains, description: 'Custom domains and their assignment to apps.' },
      { name: TAG.accounts, description: 'Service accounts: the bearer tokens of this API.' },
      { name: TAG.runTokens, description: 'JWTs for the run endpoint.' },
      {
        name: TAG.runs,
        description: "Async run records with the function's result, webhook delivery attempts, cancellation.",
      },
      {
        name: TAG.logs,
        description: "An app's log lines from every replica, or followed as server-sent events.",
      },
      { name: TAG.meta, description: 'This document.' },
    ],
    security: [{ bearerAuth: [] }],
    paths: {
      ...domainPaths,
      ...serviceAccountPaths,
      ...runTokenPaths,
      ...runPaths,
      ...logPaths,
      ...appPaths,
      ...metaPaths,
    },
    components: {
      securitySchemes: {
        bearerAuth: {
          type: 'http',
          scheme: 'bearer',
          description: 'A service-account token: `ahsa_<project_id>_<name>_<secret>`.',
        },
      },
    },
  }) as unknown as Record<string, unknown>;
  return cached;
}

export function openApiYaml(): string {
  return stringify(openApiDocument());
}
