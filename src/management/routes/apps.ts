/**
 * Apps and their builds: deploy a bundle (POST .../apps, the body is the tar.gz), list, get and delete
 * apps, each build's record and log (JSON, or followed as server-sent events). A bundle or config that
 * is not acceptable is a 400 `invalid_bundle` naming the problem, and nothing is stored or changed.
 */
import { createHash } from 'node:crypto';
import type { Router, RouterContext } from '@koa/router';
import { z } from 'zod';
import { appConfigJsonSchema } from '../../apis/v1alpha1/app-config.ts';
import type { DeployedApp } from '../../builds/app-target.ts';
import { BundleError } from '../../builds/bundle.ts';
import type { BuildLogLine } from '../../builds/logs.ts';
import { isTerminalBuild } from '../../builds/records.ts';
import type { BuildRecord } from '../../shared/contracts/builds.ts';
import { ApiError, ErrorCode } from '../../shared/errors.ts';
import { readBody } from '../../shared/http/body.ts';
import type { HandlerDeps } from '../context.ts';
import { param, projectScope } from '../context.ts';
import type { DeployApi } from '../deploy-api.ts';
import { openEventStream } from '../event-stream.ts';
import { errorResponse, ok, operation, type Paths, TAG } from '../operation.ts';
import { buildId, parseOrThrow, resourceName } from '../validation.ts';

/** Media types a bundle upload may carry. */
export const BUNDLE_MEDIA_TYPES = ['application/gzip', 'application/x-gzip', 'application/x-tar+gzip'];
export const DEFAULT_BUILD_LIST_LIMIT = 20;

export const buildListQuery = z.strictObject({
  limit: z.coerce
    .number()
    .int()
    .min(1)
    .max(100)
    .meta({ param: { description: 'At most this many builds (default 20).' } })
    .optional(),
});
export const buildLogQuery = z.strictObject({
  follow: z
    .enum(['true', 'false', '1', '0'])
    .meta({
      param: {
        description:
          'true (or Accept: text/event-stream): answer text/event-stream: `event: log` (id: the line number; data: ' +
          '{"seq","text"}) for each line so far, then new ones as they are written; `event: end` (data: ' +
          '{"reason": "build_finished" | "source_ended" | "max_duration" | "slow_client" | "source_failed", "build"}) ' +
          'closes it. Last-Event-ID resumes after that line.',
      },
    })
    .optional(),
});

const digest = (description: string) =>
  z
    .string()
    .regex(/^sha256:[0-9a-f]{64}$/)
    .meta({ description });

export const BuildResponse = z
  .strictObject({
    build_id: z.string().meta({ description: 'The build id (time-ordered, lowercase letters and digits).' }),
    app_name: z.string().meta({ description: 'The app (apphost.toml app.name).' }),
    state: z.enum(['queued', 'building', 'deploying', 'ready', 'failed']).meta({
      description:
        'queued → building (dependencies) → deploying (rolling out) → ready (serves every call) | failed ' +
        '(not deployed, or rolled back: the version that served before still does).',
    }),
    created_at: z.iso.datetime({ offset: true }).meta({ description: 'When the bundle was accepted.' }),
    started_at: z.iso
      .datetime({ offset: true })
      .meta({ description: 'When a build worker took it.' })
      .optional(),
    finished_at: z.iso
      .datetime({ offset: true })
      .meta({ description: 'When it became ready or failed.' })
      .optional(),
    bundle: z.strictObject({
      digest: digest('sha256:<hex> of the bundle (its name in the artifact store).'),
      bytes: z.number().int().min(0).meta({ description: 'Compressed size.' }),
      files: z.number().int().min(0),
    }),
    dependencies: z
      .strictObject({
        digest: digest('sha256:<hex> of the dependency set.'),
        cached: z
          .boolean()
          .meta({ description: 'Reused from an earlier build with the same cache key (no pip run).' }),
      })
      .meta({ description: 'The dependency set (pip install --target); absent without requirements.' })
      .optional(),
    rollout: z
      .strictObject({
        ready: z.number().int().min(0).meta({ description: 'Replicas of the new version that are ready.' }),
        desired: z.number().int().min(0),
        message: z.string().meta({ description: 'The rollout in words.' }),
      })
      .optional(),
    rolled_back: z
      .boolean()
      .meta({ description: 'The new version did not serve and was rolled back.' })
      .optional(),
    error: z
      .strictObject({
        code: z.enum([
          'pip_failed',
          'build_timeout',
          'dependencies_too_large',
          'rollout_failed',
          'rollout_timeout',
          'superseded',
          'app_deleted',
          'python_version_unavailable',
          'internal',
        ]),
        message: z.string().meta({
          description:
            "Why: pip's own error for pip_failed; why the new version did not start for rollout_failed.",
        }),
      })
      .optional(),
    links: z.strictObject({
      self: z.string().meta({ description: 'This build.' }),
      log: z.string().meta({ description: 'Its log (add follow=true to follow it).' }),
    }),
  })
  .meta({
    id: 'Build',
    description: 'One deploy of an app: bundle, dependency build, rollout (docs/deploy.md).',
  });
export const BuildListResponse = z.strictObject({ builds: z.array(BuildResponse) }).meta({ id: 'BuildList' });
export const BuildLogResponse = z
  .strictObject({
    lines: z.array(z.strictObject({ seq: z.number().int().min(1), text: z.string() })),
    complete: z.boolean().meta({ description: 'The build has finished: no more lines will come.' }),
    build: BuildResponse,
  })
  .meta({ id: 'BuildLog' });
export const AppResponse = z
  .strictObject({
    name: z.string().meta({ description: 'The app name.' }),
    runtime: z.enum(['cortex', 'custom']),
    ready: z.boolean().meta({ description: 'It serves calls.' }),
    ready_replicas: z.number().int().min(0),
    desired_replicas: z.number().int().min(0),
    message: z.string().meta({ description: 'Why it is not ready.' }).optional(),
    created_at: z.iso.datetime({ offset: true }).optional(),
    build_id: z
      .string()
      .meta({
        description:
          'The build that deployed the version that runs (absent for apps not deployed with apphost deploy).',
      })
      .optional(),
    bundle: digest('sha256:<hex> of the bundle that runs.').optional(),
    dependencies: digest('sha256:<hex> of the dependency set that runs.').optional(),
    url: z
      .string()
      .meta({
        description: 'Its run URL, {api_url}/v4/<project_id>/<app_name> (when the server knows {api_url}).',
      })
      .optional(),
    config: z
      .record(z.string(), z.unknown())
      .meta({ description: 'The app as apphost.toml says it (GET /schemas/apphost.schema.json).' }),
  })
  .meta({ id: 'App' });
export const AppListResponse = z.strictObject({ apps: z.array(AppResponse) }).meta({ id: 'AppList' });

const buildPath = (r: BuildRecord) => `/v2/projects/${r.projectId}/apps/${r.appName}/builds/${r.buildId}`;

export function presentBuild(r: BuildRecord): z.output<typeof BuildResponse> {
  return {
    build_id: r.buildId,
    app_name: r.appName,
    state: r.state,
    created_at: r.createdAt,
    ...(r.startedAt ? { started_at: r.startedAt } : {}),
    ...(r.finishedAt ? { finished_at: r.finishedAt } : {}),
    bundle: { digest: r.bundle, bytes: r.bundleBytes, files: r.files },
    ...(r.dependencies
      ? { dependencies: { digest: r.dependencies, cached: r.dependenciesCached === true } }
      : {}),
    ...(r.rollout ? { rollout: r.rollout } : {}),
    ...(r.rolledBack ? { rolled_back: true } : {}),
    ...(r.error ? { error: r.error } : {}),
    links: { self: buildPath(r), log: `${buildPath(r)}/log` },
  };
}

export function presentApp(a: DeployedApp, apiUrl: string | undefined): z.output<typeof AppResponse> {
  return {
    name: a.name,
    runtime: a.runtime,
    ready: a.ready,
    ready_replicas: a.readyReplicas,
    desired_replicas: a.desiredReplicas,
    ...(a.message ? { message: a.message } : {}),
    ...(a.createdAt ? { created_at: a.createdAt } : {}),
    ...(a.buildId ? { build_id: a.buildId } : {}),
    ...(a.bundle ? { bundle: a.bundle } : {}),
    ...(a.dependencies ? { dependencies: a.dependencies } : {}),
    ...(apiUrl ? { url: `${apiUrl.replace(/\/+$/, '')}/v4/${a.projectId}/${a.name}` } : {}),
    config: a.config,
  };
}

function needDeploy(deps: HandlerDeps): DeployApi {
  if (!deps.deploy) throw new ApiError(ErrorCode.NotFound, 'deploys are not available on this server');
  return deps.deploy;
}

/** `Content-Digest: sha-256=:<base64>:` (RFC 9530), when the client sends one, must match the body. */
function checkDigest(ctx: RouterContext, data: Buffer): void {
  const header = ctx.get('content-digest');
  if (!header) return;
  const m = /sha-256=:([A-Za-z0-9+/=]+):/.exec(header);
  if (!m) return;
  const actual = createHash('sha256').update(data).digest('base64');
  if (actual !== m[1])
    throw new ApiError(
      ErrorCode.InvalidBundle,
      'the body does not match its Content-Digest (sha-256): the upload was damaged',
      {
        details: { problem: 'digest_mismatch' },
      },
    );
}

export function registerAppRoutes(router: Router, deps: HandlerDeps): void {
  const app = (ctx: RouterContext) => parseOrThrow(resourceName, param(ctx, 'app_name'), 'app_name');
  const build = (ctx: RouterContext) => parseOrThrow(buildId, param(ctx, 'build_id'), 'build_id');
  const appNotFound = (name: string) => new ApiError(ErrorCode.NotFound, `app ${name} not found`);
  const buildNotFound = (id: string) => new ApiError(ErrorCode.NotFound, `build ${id} not found`);

  router.get('getAppConfigSchema', '/schemas/apphost.schema.json', (ctx) => {
    ctx.body = appConfigJsonSchema();
  });

  router.post('deployApp', '/v2/projects/:project_id/apps', async (ctx) => {
    const projectId = await projectScope(ctx, deps);
    const d = needDeploy(deps);
    const type = (ctx.get('content-type').split(';')[0] ?? '').trim().toLowerCase();
    if (!BUNDLE_MEDIA_TYPES.includes(type))
      throw new ApiError(
        ErrorCode.UnsupportedMediaType,
        `the body must be an app bundle (a tar.gz, Content-Type: application/gzip); got ${type || 'none'}`,
      );
    // Within the compressed bound (413 beyond it; the CLI checks it before uploading).
    const data = await readBody(ctx.req, d.deployments.bundleLimits.maxBytes);
    checkDigest(ctx, data);
    let record: BuildRecord;
    try {
      record = await d.deployments.submit(projectId, data);
    } catch (err) {
      if (err instanceof BundleError)
        throw new ApiError(ErrorCode.InvalidBundle, err.message, {
          details: {
            problem: err.problem,
            ...(err.path ? { path: err.path } : {}),
            ...(err.problems ? { problems: err.problems } : {}),
          },
        });
      throw err;
    }
    ctx.status = 202;
    ctx.set('location', buildPath(record));
    ctx.body = presentBuild(record);
  });

  router.get('listApps', '/v2/projects/:project_id/apps', async (ctx) => {
    const projectId = await projectScope(ctx, deps);
    const d = needDeploy(deps);
    ctx.body = { apps: (await d.target.list(projectId)).map((a) => presentApp(a, d.apiUrl)) };
  });

  router.get('getApp', '/v2/projects/:project_id/apps/:app_name', async (ctx) => {
    const projectId = await projectScope(ctx, deps);
    const d = needDeploy(deps);
    const name = app(ctx);
    const found = await d.target.get(projectId, name);
    if (!found) throw appNotFound(name);
    ctx.body = presentApp(found, d.apiUrl);
  });

  router.delete('deleteApp', '/v2/projects/:project_id/apps/:app_name', async (ctx) => {
    const projectId = await projectScope(ctx, deps);
    const d = needDeploy(deps);
    const name = app(ctx);
    const found = await d.target.get(projectId, name);
    if (!found || !(await d.target.delete(projectId, name))) throw appNotFound(name);
    await d.builds.removeApp(projectId, name);
    ctx.body = presentApp(found, d.apiUrl);
  });

  router.get('listBuilds', '/v2/projects/:project_id/apps/:app_name/builds', async (ctx) => {
    const projectId = await projectScope(ctx, deps);
    const d = needDeploy(deps);
    const name = app(ctx);
    const q = parseOrThrow(buildListQuery, { ...ctx.query }, 'query');
    const list = await d.builds.list(projectId, name, q.limit ?? DEFAULT_BUILD_LIST_LIMIT);
    ctx.body = { builds: list.map(presentBuild) };
  });

  router.get('getBuild', '/v2/projects/:project_id/apps/:app_name/builds/:build_id', async (ctx) => {
    const projectId = await projectScope(ctx, deps);
    const d = needDeploy(deps);
    const [name, id] = [app(ctx), build(ctx)];
    const r = await d.builds.get(projectId, name, id);
    if (!r) throw buildNotFound(id);
    ctx.body = presentBuild(r);
  });

  router.get('getBuildLog', '/v2/projects/:project_id/apps/:app_name/builds/:build_id/log', async (ctx) => {
    const projectId = await projectScope(ctx, deps);
    const d = needDeploy(deps);
    const [name, id] = [app(ctx), build(ctx)];
    const q = parseOrThrow(buildLogQuery, { ...ctx.query }, 'query');
    const record = await d.builds.get(projectId, name, id);
    if (!record) throw buildNotFound(id);
    const follow =
      q.follow === 'true' ||
      q.follow === '1' ||
      ctx.accepts('application/json', 'text/event-stream') === 'text/event-stream';
    if (!follow) {
      const { lines, complete } = await d.logs.read(projectId, name, id);
      ctx.body = { lines, complete, build: presentBuild(record) };
      return;
    }
    // Follow: each line as `log`, then `end` with the build as it finished (or why the follow ended).
    const after = Number(ctx.get('last-event-id') || 0) || 0;
    const { settings } = deps;
    const stream = openEventStream<'build_finished' | 'slow_client' | 'source_failed'>(ctx, {
      maxMs: settings.buildLogFollowMaxMs,
      heartbeatMs: settings.logsHeartbeatMs,
      maxBufferedBytes: settings.logsMaxBufferedBytes,
    });
    const log = ctx.state.log as { info(o: object, m: string): void };
    void (async () => {
      try {
        // A finished build's log has its end marker: the follow ends by itself after the last line.
        for await (const line of d.logs.follow(projectId, name, id, {
          after,
          signal: stream.signal,
        }) as AsyncIterable<BuildLogLine>) {
          if (stream.send('log', line, line.seq)) stream.end('slow_client');
        }
        if (!stream.signal.aborted) stream.reason = 'build_finished';
      } catch (err) {
        stream.reason = 'source_failed';
        log.info({ err: (err as Error).message }, 'build log follow ended');
      } finally {
        const now =
          stream.reason === 'client_closed'
            ? undefined
            : await d.builds.get(projectId, name, id).catch(() => undefined);
        stream.close({
          // The log ended before the build did (e.g. its marker was lost): say so, not "finished".
          ...(stream.reason === 'build_finished' && now && !isTerminalBuild(now)
            ? { reason: 'source_ended' }
            : {}),
          ...(now ? { build: presentBuild(now) } : {}),
        });
      }
    })();
  });
}

const BUILD_PARAMS = ['project_id', 'app_name', 'build_id'] as const;

export const appPaths: Paths = {
  '/v2/projects/{project_id}/apps': {
    get: operation({
      operationId: 'listApps',
      tag: TAG.apps,
      summary: 'List the apps of a project',
      params: ['project_id'],
      responses: { '200': ok('The apps, by name.', AppListResponse) },
    }),
    post: (() => {
      const o = operation({
        operationId: 'deployApp',
        tag: TAG.apps,
        summary: 'Deploy an app: upload its bundle (a tar.gz of its folder with apphost.toml)',
        params: ['project_id'],
        responses: {
          '202': ok(
            'The bundle is checked and stored; its build is queued (Location and links.log say where to follow it).',
            BuildResponse,
          ),
        },
      });
      return {
        ...o,
        requestBody: {
          required: true,
          description:
            'The bundle: a gzip-compressed tar of the app folder (what apphost deploy makes). An optional ' +
            '`Content-Digest: sha-256=:<base64>:` header is checked against it.',
          content: { 'application/gzip': { schema: { type: 'string', format: 'binary' } } },
        },
        responses: {
          ...o.responses,
          '400': errorResponse(
            'A bad bundle or apphost.toml; nothing is stored or changed. Code invalid_bundle with `problem` ' +
              '(too_large (unpacked), too_many_files, unsafe_path, symlink_out, unsupported_entry, duplicate_entry, ' +
              'not_an_archive, missing_file, invalid_config, digest_mismatch), `path`, and for invalid_config ' +
              '`problems` (each key path and its rule).',
          ),
          '413': errorResponse('The bundle is larger than the compressed bound (`limit_bytes`).'),
          '415': errorResponse('The body is not application/gzip.'),
        },
      };
    })(),
  },
  '/v2/projects/{project_id}/apps/{app_name}': {
    get: operation({
      operationId: 'getApp',
      tag: TAG.apps,
      summary: 'Get an app: its state, the version that runs, its configuration',
      params: ['project_id', 'app_name'],
      responses: { '200': ok('The app.', AppResponse) },
    }),
    delete: operation({
      operationId: 'deleteApp',
      tag: TAG.apps,
      summary: 'Delete an app (its replicas stop) and its build records',
      params: ['project_id', 'app_name'],
      responses: { '200': ok('The deleted app, as it was.', AppResponse) },
    }),
  },
  '/v2/projects/{project_id}/apps/{app_name}/builds': {
    get: operation({
      operationId: 'listBuilds',
      tag: TAG.apps,
      summary: 'List the builds (deploys) of an app, newest first',
      params: ['project_id', 'app_name'],
      query: buildListQuery,
      responses: { '200': ok('The builds.', BuildListResponse) },
    }),
  },
  '/v2/projects/{project_id}/apps/{app_name}/builds/{build_id}': {
    get: operation({
      operationId: 'getBuild',
      tag: TAG.apps,
      summary: 'Get a build: state, bundle, dependency set, rollout, error',
      params: BUILD_PARAMS,
      responses: { '200': ok('The build.', BuildResponse) },
    }),
  },
  '/v2/projects/{project_id}/apps/{app_name}/builds/{build_id}/log': {
    get: operation({
      operationId: 'getBuildLog',
      tag: TAG.apps,
      summary: "A build's log (pip output, rollout), or followed as server-sent events",
      params: BUILD_PARAMS,
      query: buildLogQuery,
      responses: {
        '200': {
          description: 'The lines so far (JSON), or followed, a server-sent event stream.',
          content: {
            'application/json': { schema: BuildLogResponse },
            'text/event-stream': { schema: { type: 'string' } },
          },
        },
      },
    }),
  },
  '/schemas/apphost.schema.json': {
    get: {
      operationId: 'getAppConfigSchema',
      tags: [TAG.apps],
      summary: 'The JSON Schema of apphost.toml (for editors)',
      security: [],
      responses: {
        '200': {
          description: 'JSON Schema (draft 2020-12).',
          content: { 'application/json': { schema: { type: 'object' } } },
        },
      },
    },
  },
};
