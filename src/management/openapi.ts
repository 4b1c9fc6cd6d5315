/**
 * The management API's OpenAPI 3.0.0 document. Schemas are kept plain-JSON-Schema compatible (no
 * `nullable`; absent members instead of nulls) so ajv validates responses against them as they are.
 * test/integration/management/openapi-conformance.test.ts holds the routes and this document together.
 */
import { stringify } from 'yaml';

type Schema = Record<string, unknown>;
const ref = (name: string): Schema => ({ $ref: `#/components/schemas/${name}` });
const str = (description: string, extra: Schema = {}): Schema => ({ type: 'string', description, ...extra });
const dateTime = (description: string): Schema => str(description, { format: 'date-time' });
const DNS_LABEL = '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$';

const schemas: Record<string, Schema> = {
  Error: {
    type: 'object',
    required: ['error'],
    additionalProperties: false,
    properties: {
      error: {
        type: 'object',
        required: ['code', 'message'],
        properties: {
          code: str('Stable machine-readable code, e.g. not_found, invalid_body, unauthenticated.'),
          message: str('What went wrong, for humans.'),
          problems: {
            type: 'array',
            description: 'Each validation problem (400s only).',
            items: {
              type: 'object',
              required: ['path', 'message'],
              additionalProperties: false,
              properties: { path: { type: 'string' }, message: { type: 'string' } },
            },
          },
        },
      },
    },
  },
  Domain: {
    type: 'object',
    required: ['domain_id', 'hostname', 'assigned', 'created_at'],
    additionalProperties: false,
    properties: {
      domain_id: str('The domain id (the DomainAssignment name).'),
      hostname: str('The custom hostname, e.g. app.example.com.'),
      assigned: { type: 'boolean', description: 'Whether the domain is assigned to an app.' },
      app_name: str('The app the domain routes to; absent when unassigned.'),
      created_at: dateTime('When the domain was created.'),
    },
  },
  DomainList: {
    type: 'object',
    required: ['domains'],
    additionalProperties: false,
    properties: { domains: { type: 'array', items: ref('Domain') } },
  },
  CreateDomainRequest: {
    type: 'object',
    required: ['hostname'],
    additionalProperties: false,
    properties: {
      domain_id: str('Optional id (DNS label); derived from the hostname when absent (dots become dashes).', {
        pattern: DNS_LABEL,
        maxLength: 63,
      }),
      hostname: str('Fully qualified hostname; unique across all projects.', { maxLength: 253 }),
    },
  },
  AssignDomainRequest: {
    type: 'object',
    required: ['app_name'],
    additionalProperties: false,
    properties: { app_name: str('An existing app of the project.', { pattern: DNS_LABEL, maxLength: 63 }) },
  },
  ServiceAccount: {
    type: 'object',
    required: ['name', 'expires_at', 'created_at'],
    additionalProperties: false,
    properties: {
      name: str('Service account name.'),
      expires_at: dateTime('When its token stops working.'),
      created_at: dateTime('When it was created.'),
      last_used_at: dateTime(
        'Last authenticated use (recorded at most once a minute); absent if never used.',
      ),
    },
  },
  ServiceAccountList: {
    type: 'object',
    required: ['service_accounts'],
    additionalProperties: false,
    properties: { service_accounts: { type: 'array', items: ref('ServiceAccount') } },
  },
  CreatedServiceAccount: {
    type: 'object',
    required: ['name', 'expires_at', 'created_at', 'token'],
    additionalProperties: false,
    properties: {
      name: str('Service account name.'),
      expires_at: dateTime('When its token stops working.'),
      created_at: dateTime('When it was created.'),
      last_used_at: dateTime('Never present at creation.'),
      token: str('The bearer token. Shown in this response only; store it as a secret.'),
    },
  },
  CreateServiceAccountRequest: {
    type: 'object',
    required: ['name', 'expires_at'],
    additionalProperties: false,
    properties: {
      name: str('DNS label of at most 52 characters, unique in the project.', {
        pattern: DNS_LABEL,
        maxLength: 52,
      }),
      expires_at: str(
        'Expiry: an RFC 3339 date-time or a date (midnight UTC); in the future, within the maximum lifetime (366 days by default).',
      ),
    },
  },
  CreateRunTokenRequest: {
    type: 'object',
    required: ['expires_at'],
    additionalProperties: false,
    properties: {
      expires_at: str(
        'Expiry: an RFC 3339 date-time or a date (midnight UTC); in the future, within the maximum lifetime.',
      ),
    },
  },
  RunToken: {
    type: 'object',
    required: ['token', 'project_id', 'expires_at'],
    additionalProperties: false,
    properties: {
      token: str('JWT (EdDSA) for `Authorization: Bearer` on the run endpoint of this project.'),
      project_id: str('The project the token is valid for.'),
      expires_at: dateTime('The token expiry (second precision).'),
    },
  },
  WebhookAttempt: {
    type: 'object',
    required: ['attempt', 'at', 'outcome', 'duration_ms'],
    additionalProperties: false,
    properties: {
      attempt: { type: 'integer', minimum: 1 },
      at: dateTime('When the attempt was made.'),
      outcome: {
        type: 'string',
        enum: [
          'success',
          'http_retryable',
          'http_permanent',
          'network_error',
          'timeout',
          'refused_by_policy',
        ],
      },
      status: { type: 'integer', description: 'Receiver HTTP status, when it answered.' },
      error: str('Network or policy error, when there was one.'),
      duration_ms: { type: 'number', minimum: 0 },
    },
  },
  WebhookDelivery: {
    type: 'object',
    required: ['endpoint_host', 'state', 'updated_at', 'attempts'],
    additionalProperties: false,
    properties: {
      endpoint_host: str('Host of the webhook endpoint.'),
      state: { type: 'string', enum: ['pending', 'delivered', 'failed'] },
      updated_at: dateTime('Last change.'),
      attempts: { type: 'array', items: ref('WebhookAttempt') },
    },
  },
  Run: {
    type: 'object',
    required: [
      'run_id',
      'project_id',
      'app_name',
      'path',
      'state',
      'created_at',
      'executions',
      'cancel_requested',
    ],
    additionalProperties: false,
    properties: {
      run_id: str('The run id (the X-Request-Id of the async call).'),
      project_id: str('Project.'),
      app_name: str('App.'),
      path: str('The path the run was invoked with (the function name for the Cortex runtime).'),
      state: { type: 'string', enum: ['queued', 'running', 'success', 'failure', 'timeout', 'cancelled'] },
      created_at: dateTime('When the run was accepted.'),
      started_at: dateTime('When a worker last started it.'),
      finished_at: dateTime('When it reached a final state.'),
      executions: {
        type: 'integer',
        minimum: 0,
        description: 'Executions started (more than 1 after a redelivery).',
      },
      response_status: { type: 'integer', description: "The function's HTTP status." },
      error: {
        type: 'object',
        required: ['code', 'message'],
        additionalProperties: false,
        properties: { code: { type: 'string' }, message: { type: 'string' } },
      },
      cancel_requested: { type: 'boolean' },
      webhook_host: str('Host of the webhook endpoint the result is forwarded to.'),
      streamed: {
        type: 'boolean',
        description:
          'Present (true) when the function answered text/event-stream: the result holds the events as sent.',
      },
      result: ref('RunResult'),
      webhook_delivery: ref('WebhookDelivery'),
    },
  },
  RunResult: {
    type: 'object',
    description:
      "The function's response as the run record keeps it (at most APPHOST_RUN_RESULT_MAX_BYTES, default 256 KiB; " +
      'kept as long as the record, 7 days after its last change). Lists show only the metadata; GET of one run adds ' +
      'the body: `json` (a complete JSON response, parsed), else `body` as text (`utf8`) or `base64`.',
    required: ['state', 'size_bytes', 'kept_bytes'],
    additionalProperties: false,
    properties: {
      state: {
        type: 'string',
        enum: ['complete', 'truncated', 'dropped', 'expired'],
        description:
          'complete: all of it; truncated: a text response over the bound, its first kept_bytes (at a character ' +
          'boundary); dropped: none kept (a non-text response over the bound, or the store refused it: reason); ' +
          'expired: the kept bytes are gone before the record.',
      },
      content_type: str("The response's Content-Type."),
      size_bytes: { type: 'integer', minimum: 0, description: 'Size of the whole response body.' },
      kept_bytes: { type: 'integer', minimum: 0, description: 'Bytes kept.' },
      reason: str('Why nothing (or less) was kept.'),
      encoding: {
        type: 'string',
        enum: ['json', 'utf8', 'base64'],
        description: 'How the kept bytes are given.',
      },
      json: { description: 'The response parsed as JSON (encoding json).' },
      body: str('The kept bytes as text (utf8) or base64.'),
    },
  },
  LogLine: {
    type: 'object',
    required: ['replica', 'message'],
    additionalProperties: false,
    properties: {
      time: dateTime('When the line was written.'),
      replica: str('Which replica wrote it: the pod name in a cluster, local-<pid> in local mode.'),
      stream: { type: 'string', enum: ['stdout', 'stderr'] },
      message: str('The line as the app wrote it.'),
      request_id: str('The request id the runtime tagged the line with (the call it was about).'),
    },
  },
  LogLines: {
    type: 'object',
    required: ['lines'],
    additionalProperties: false,
    properties: { lines: { type: 'array', items: ref('LogLine') } },
  },
  RunList: {
    type: 'object',
    required: ['runs'],
    additionalProperties: false,
    properties: { runs: { type: 'array', items: ref('Run') } },
  },
};

const errorResponse = (description: string) => ({
  description,
  content: { 'application/json': { schema: ref('Error') } },
});
const ok = (description: string, schema: string) => ({
  description,
  content: { 'application/json': { schema: ref(schema) } },
});
const jsonBody = (schema: string) => ({
  required: true,
  content: { 'application/json': { schema: ref(schema) } },
});
const pathParam = (name: string, description: string) => ({
  name,
  in: 'path',
  required: true,
  description,
  schema: { type: 'string' },
});
const P = {
  project: pathParam('project_id', 'The project.'),
  domain: pathParam('domain_id', 'The domain.'),
  app: pathParam('app_name', 'The app.'),
  run: pathParam('run_id', 'The run (request) id.'),
  account: pathParam('name', 'The service account name.'),
};
/** Errors every authenticated route can answer with. */
const common = {
  '400': errorResponse('Invalid path parameter, query or body; `problems` lists each issue.'),
  '401': errorResponse('Missing, malformed, unknown, expired or revoked service-account token.'),
  '404': errorResponse(
    "Unknown project or resource. A project other than the token's own is always 404, whether or not it exists.",
  ),
  '500': errorResponse('Internal error.'),
  '502': errorResponse('The Kubernetes API is busy or starting (Retry-After given).'),
  '504': errorResponse('A backend (Kubernetes API, run or delivery store) did not answer in time.'),
};
const withBody = {
  '413': errorResponse('Request body larger than the configured limit.'),
  '415': errorResponse('Request body is not application/json.'),
};

function op(
  operationId: string,
  tag: string,
  summary: string,
  parameters: unknown[],
  responses: Record<string, unknown>,
  requestBody?: unknown,
) {
  return {
    operationId,
    tags: [tag],
    summary,
    parameters,
    ...(requestBody ? { requestBody } : {}),
    responses: { ...responses, ...common, ...(requestBody ? withBody : {}) },
  };
}

const stateParam = {
  name: 'state',
  in: 'query',
  required: false,
  description: 'Only runs in this state.',
  schema: { type: 'string', enum: ['queued', 'running', 'success', 'failure', 'timeout', 'cancelled'] },
};
const limitParam = {
  name: 'limit',
  in: 'query',
  required: false,
  description: 'At most this many runs (default 20).',
  schema: { type: 'integer', minimum: 1, maximum: 100 },
};

const TAG = {
  logs: 'Logs',
  domains: 'Custom Domains',
  accounts: 'Service Accounts',
  runTokens: 'Run Tokens',
  runs: 'Runs',
  meta: 'API Description',
};

export function openApiDocument(): Record<string, unknown> {
  return {
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
      '/v2/projects/{project_id}/domains': {
        get: op('listDomains', TAG.domains, 'List the custom domains of a project', [P.project], {
          '200': ok('The domains, by id.', 'DomainList'),
        }),
        post: op(
          'createDomain',
          TAG.domains,
          'Create a custom domain (unassigned)',
          [P.project],
          {
            '201': ok('The created domain.', 'Domain'),
            '409': errorResponse('The domain id exists or the hostname is in use.'),
          },
          jsonBody('CreateDomainRequest'),
        ),
      },
      '/v2/projects/{project_id}/domains/{domain_id}': {
        get: op('getDomain', TAG.domains, 'Get a custom domain', [P.project, P.domain], {
          '200': ok('The domain.', 'Domain'),
        }),
        delete: op(
          'deleteDomain',
          TAG.domains,
          'Delete a custom domain (and its routing)',
          [P.project, P.domain],
          {
            '200': ok('The deleted domain, as it was.', 'Domain'),
          },
        ),
      },
      '/v2/projects/{project_id}/domains/{domain_id}/assign': {
        put: op(
          'assignDomain',
          TAG.domains,
          'Assign a custom domain to an app (replaces any earlier assignment)',
          [P.project, P.domain],
          {
            '200': ok('The domain, assigned.', 'Domain'),
            '422': errorResponse('The app does not exist in the project.'),
          },
          jsonBody('AssignDomainRequest'),
        ),
        delete: op('unassignDomain', TAG.domains, 'Unassign domain from app', [P.project, P.domain], {
          '200': ok(
            'The domain, now unassigned; the record stays and routing for it stops. Idempotent: unassigning an unassigned domain is 200 too.',
            'Domain',
          ),
        }),
      },
      '/v2/projects/{project_id}/service-accounts': {
        get: op(
          'listServiceAccounts',
          TAG.accounts,
          'List service accounts (never their tokens)',
          [P.project],
          {
            '200': ok('The service accounts, by name.', 'ServiceAccountList'),
          },
        ),
        post: op(
          'createServiceAccount',
          TAG.accounts,
          'Create a service account; its token is in this response only',
          [P.project],
          {
            '201': ok('The account with its token.', 'CreatedServiceAccount'),
            '409': errorResponse('The name is taken.'),
            '422': errorResponse('expires_at is in the past or beyond the maximum lifetime.'),
          },
          jsonBody('CreateServiceAccountRequest'),
        ),
      },
      '/v2/projects/{project_id}/service-accounts/{name}': {
        delete: op(
          'revokeServiceAccount',
          TAG.accounts,
          'Revoke a service account: its token is refused from now on',
          [P.project, P.account],
          { '200': ok('The revoked account.', 'ServiceAccount') },
        ),
      },
      '/v2/projects/{project_id}/run-tokens': {
        post: op(
          'createRunToken',
          TAG.runTokens,
          'Issue a run token (JWT) for the run endpoint of this project',
          [P.project],
          {
            '201': ok('The token.', 'RunToken'),
            '422': errorResponse('expires_at is in the past or beyond the maximum lifetime.'),
          },
          jsonBody('CreateRunTokenRequest'),
        ),
      },
      '/v2/projects/{project_id}/runs': {
        get: op(
          'listProjectRuns',
          TAG.runs,
          'Recent runs of every app of the project (or of `app`), newest first; results as metadata only',
          [
            P.project,
            {
              name: 'app',
              in: 'query',
              required: false,
              description: 'Only runs of this app.',
              schema: { type: 'string' },
            },
            stateParam,
            limitParam,
          ],
          { '200': ok('The runs.', 'RunList') },
        ),
      },
      '/v2/projects/{project_id}/runs/{run_id}': {
        get: op(
          'getProjectRun',
          TAG.runs,
          'A run by its id alone (run ids are unique in a project): as getRun',
          [P.project, P.run],
          { '200': ok('The run, with its result.', 'Run') },
        ),
        delete: op('cancelProjectRun', TAG.runs, 'Cancel a queued or running run', [P.project, P.run], {
          '202': ok('Cancellation requested; the run worker stops the run.', 'Run'),
          '409': errorResponse('The run has already finished.'),
        }),
      },
      '/v2/projects/{project_id}/apps/{app_name}/runs': {
        get: op(
          'listRuns',
          TAG.runs,
          'Recent runs of an app, newest first; results as metadata only',
          [P.project, P.app, stateParam, limitParam],
          { '200': ok('The runs.', 'RunList') },
        ),
      },
      '/v2/projects/{project_id}/apps/{app_name}/runs/{run_id}': {
        get: op(
          'getRun',
          TAG.runs,
          "A run: state, timestamps, error, the function's result, webhook delivery attempts",
          [P.project, P.app, P.run],
          {
            '200': ok('The run, with its result.', 'Run'),
          },
        ),
        delete: op('cancelRun', TAG.runs, 'Cancel a queued or running run', [P.project, P.app, P.run], {
          '202': ok('Cancellation requested; the run worker stops the run.', 'Run'),
          '409': errorResponse('The run has already finished.'),
        }),
      },
      '/v2/projects/{project_id}/apps/{app_name}/logs': {
        get: op(
          'getAppLogs',
          TAG.logs,
          "An app's log lines, every replica, oldest first; with follow=true, server-sent events",
          [
            P.project,
            P.app,
            {
              name: 'since',
              in: 'query',
              required: false,
              description: 'Only lines newer than this: a duration (30s, 10m, 2h, 1d) or an RFC 3339 time.',
              schema: { type: 'string' },
            },
            {
              name: 'tail',
              in: 'query',
              required: false,
              description:
                'Only the last N lines of each replica (at most APPHOST_MANAGEMENT_LOGS_MAX_LINES, 1000).',
              schema: { type: 'integer', minimum: 1 },
            },
            {
              name: 'follow',
              in: 'query',
              required: false,
              description:
                'true: answer text/event-stream: `event: log` (data: a LogLine) for each line, then new ones as they ' +
                'are written, until the client goes away or the server ends the follow with `event: end` ' +
                '(data: {"reason": "max_duration" | "slow_client" | "source_ended" | "source_failed"}).',
              schema: { type: 'string', enum: ['true', 'false', '1', '0'] },
            },
          ],
          {
            '200': {
              description:
                'The lines (JSON), or with follow=true a server-sent event stream of LogLine events.',
              content: {
                'application/json': { schema: ref('LogLines') },
                'text/event-stream': { schema: { type: 'string' } },
              },
            },
          },
        ),
      },
      '/openapi.json': {
        get: {
          operationId: 'getOpenApiJson',
          tags: [TAG.meta],
          summary: 'This document as JSON',
          security: [],
          responses: {
            '200': {
              description: 'OpenAPI 3.0.0 document.',
              content: { 'application/json': { schema: { type: 'object' } } },
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
              content: { 'application/yaml': { schema: { type: 'string' } } },
            },
          },
        },
      },
    },
    components: {
      securitySchemes: {
        bearerAuth: {
          type: 'http',
          scheme: 'bearer',
          description: 'A service-account token: `ahsa_<project_id>_<name>_<secret>`.',
        },
      },
      schemas,
    },
  };
}

export function openApiYaml(): string {
  return stringify(openApiDocument());
}
