/** `apphost apps list|get|delete`: the project's apps through the management API. */
import { stringify as toToml } from 'smol-toml';
import { clientCommand } from './client-command.ts';
import type { AppView, BuildView } from './deploy.ts';
import { group } from './group.ts';
import { age, fields, json, table } from './output.ts';

const list = clientCommand(
  {
    name: 'apps list',
    summary: "List the project's apps: ready replicas, the build that runs, the run URL.",
    examples: ['apphost apps list', 'apphost apps list --json | jq -r ".apps[].name"'],
  },
  async (ctx) => {
    const client = ctx.client();
    const { apps } = await client.json<{ apps: AppView[] }>(client.projectPath('apps'));
    if (ctx.json) ctx.io.out(json({ apps }));
    else if (apps.length === 0)
      ctx.io.out("no apps (deploy one: 'apphost init NAME', then 'apphost deploy')");
    else
      ctx.io.out(
        table(
          ['NAME', 'RUNTIME', 'READY', 'REPLICAS', 'BUILD', 'AGE', 'URL'],
          apps.map((a) => [
            a.name,
            a.runtime,
            a.ready ? 'yes' : 'no',
            `${a.ready_replicas}/${a.desired_replicas}`,
            a.build_id,
            age(a.created_at, ctx.now()),
            a.url,
          ]),
        ),
      );
    return 0;
  },
);

const get = clientCommand(
  {
    name: 'apps get',
    summary: 'Show an app: its state, the version that runs, its recent builds and its apphost.toml.',
    args: [{ name: 'APP', description: 'the app name' }],
    examples: ['apphost apps get hello', 'apphost apps get hello --json'],
  },
  async (ctx) => {
    const client = ctx.client();
    const name = ctx.args.APP as string;
    const app = await client.json<AppView>(client.projectPath('apps', name));
    const { builds } = await client.json<{ builds: BuildView[] }>(
      client.projectPath('apps', name, 'builds'),
      {
        query: { limit: 5 },
      },
    );
    if (ctx.json) {
      ctx.io.out(json({ app, builds }));
      return 0;
    }
    ctx.io.out(
      fields([
        ['app', app.name],
        ['runtime', app.runtime],
        ['ready', `${app.ready ? 'yes' : 'no'} (${app.ready_replicas}/${app.desired_replicas} replicas)`],
        ['why', app.message],
        ['url', app.url],
        ['build', app.build_id],
        ['bundle', app.bundle],
        ['dependencies', app.dependencies],
        ['created', app.created_at ? `${app.created_at} (${age(app.created_at, ctx.now())})` : undefined],
      ]),
    );
    if (builds.length > 0) {
      ctx.io.out('');
      ctx.io.out('recent builds:');
      ctx.io.out(
        table(
          ['BUILD', 'STATE', 'DEPENDENCIES', 'ERROR'],
          builds.map((b) => [
            b.build_id,
            `${b.state}${b.rolled_back ? ' (rolled back)' : ''}`,
            b.dependencies ? (b.dependencies.cached ? 'cached' : 'built') : 'none',
            b.error ? `${b.error.code}: ${b.error.message.split('\n')[0]}` : undefined,
          ]),
        ),
      );
    }
    ctx.io.out('');
    ctx.io.out('apphost.toml:');
    ctx.io.out(toToml(app.config).trimEnd());
    return 0;
  },
);

const remove = clientCommand(
  {
    name: 'apps delete',
    summary: 'Delete an app: its replicas stop, its calls answer 404, its build records go.',
    args: [{ name: 'APP', description: 'the app name' }],
    examples: ['apphost apps delete hello'],
  },
  async (ctx) => {
    const client = ctx.client();
    const app = await client.json<AppView>(client.projectPath('apps', ctx.args.APP as string), {
      method: 'DELETE',
    });
    ctx.io.out(ctx.json ? json(app) : `deleted ${app.name}`);
    return 0;
  },
);

export const APPS_SUBCOMMANDS = { list, get, delete: remove };
export const runAppsCommand = group('apps', "The project's apps: list, get, delete.", APPS_SUBCOMMANDS);
