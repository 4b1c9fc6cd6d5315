/** What the apps and builds routes need: the deploy pipeline and where apps run (src/builds/). */
import type { AppTarget } from '../builds/app-target.ts';
import type { Deployments } from '../builds/deployments.ts';
import type { BuildLogs } from '../builds/logs.ts';
import type { BuildStore } from '../builds/records.ts';

export interface DeployApi {
  deployments: Deployments;
  builds: BuildStore;
  logs: BuildLogs;
  target: AppTarget;
  /** {api_url}: apps are presented with their run URL when it is known. */
  apiUrl?: string;
}
