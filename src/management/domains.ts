/** Domain rules shared by the JSON routes and the dashboard. */
import { ApiError, ErrorCode } from '../shared/errors.ts';
import type { Domain, ManagementStore } from './store/types.ts';

/** Routes a project's domain to one of its apps: unknown domain → 404, unknown app → 422. */
export async function assignDomainToApp(
  store: ManagementStore,
  projectId: string,
  domainId: string,
  appName: string,
): Promise<Domain> {
  const notFound = () => new ApiError(ErrorCode.NotFound, `domain ${domainId} not found`);
  if (!(await store.getDomain(projectId, domainId))) throw notFound();
  if (!(await store.appExists(projectId, appName)))
    throw new ApiError(ErrorCode.Unprocessable, `app ${appName} does not exist in project ${projectId}`);
  const d = await store.assignDomain(projectId, domainId, appName);
  if (!d) throw notFound();
  return d;
}
