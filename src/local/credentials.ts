/** What a newcomer needs for the first curl: printed in the banner and written as JSON. */
import { writeSecretFile } from './state.ts';

export interface Credentials {
  project_id: string;
  /** Base of the run API: `{api_url}/v4/<project_id>/<app>/run`. */
  api_url: string;
  /** Base of the management API: `{base_url}/v2/projects/<project_id>/...`. */
  base_url: string;
  run_token: string;
  service_account_token: string;
}

export function writeCredentials(file: string, creds: Credentials): void {
  writeSecretFile(file, `${JSON.stringify(creds, null, 2)}\n`);
}

/** URL host for a listen address: wildcard binds are reached through loopback. */
export function urlHost(listenHost: string): string {
  if (listenHost === '0.0.0.0' || listenHost === '::' || listenHost === '') return '127.0.0.1';
  return listenHost.includes(':') ? `[${listenHost}]` : listenHost;
}

export function banner(opts: {
  creds: Credentials;
  apps: Array<{ name: string; functions?: readonly string[] }>;
  domains: Array<{ hostname: string; appName: string | undefined }>;
  natsUrl: string;
  natsStarted: boolean;
  credentialsOut: string | undefined;
  /** Where the CLI profile was written. */
  profile?: { file: string; name: string };
  opsUrl: string;
}): string {
  const { creds } = opts;
  const hello = opts.apps.find((a) => a.name === 'hello')?.name ?? opts.apps[0]?.name ?? '<app>';
  const lines = [
    '',
    'apphost dev is running',
    `  project     ${creds.project_id}`,
    `  api_url     ${creds.api_url}      (run API: POST {api_url}/v4/${creds.project_id}/<app>/run)`,
    `  base_url    ${creds.base_url}      (management API: {base_url}/v2/projects/${creds.project_id}/...)`,
    `  ops         ${opts.opsUrl}      (/healthz /readyz /metrics)`,
    `  nats        ${opts.natsUrl}${opts.natsStarted ? '  (started for this session, removed on exit)' : '  (NATS_URL)'}`,
    `  apps        ${opts.apps.map((a) => a.name).join(', ') || '(none)'}`,
    ...opts.domains.map((d) => `  domain      ${d.hostname} -> ${d.appName ?? '(unassigned)'}`),
    '',
    '  Webhooks to loopback addresses (127.0.0.0/8, ::1) are ALLOWED in local mode (the SSRF guard allow-list);',
    '  a cluster install refuses them.',
    '',
    `  export RUN_TOKEN='${creds.run_token}'`,
    `  export SA_TOKEN='${creds.service_account_token}'`,
    ...(opts.credentialsOut ? [`  (also written to ${opts.credentialsOut})`] : []),
    '',
    `  curl -s -X POST "${creds.api_url}/v4/${creds.project_id}/${hello}/run" \\`,
    `    -H "Authorization: Bearer $RUN_TOKEN" -H 'Content-Type: application/json' -d '{"name": "you"}'`,
    ...(opts.profile
      ? [
          '',
          `  or with the CLI (profile '${opts.profile.name}' of ${opts.profile.file}):`,
          `  apphost run ${hello} run --data '{"name": "you"}'     apphost logs ${hello} --follow     apphost runs list`,
        ]
      : []),
    '',
    '  Ctrl-C stops everything.',
    '',
  ];
  return lines.join('\n');
}
