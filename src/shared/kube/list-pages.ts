/**
 * A whole list, page by page, whichever client fetches the pages (client.ts on client-node, reader.ts on
 * undici): follow `continue` to the end, keep the last page's resourceVersion (to watch from), and give
 * each item the apiVersion and kind a list leaves out, so cached objects are complete.
 */
import type { ListResult } from './client.ts';
import type { ObjectWithMeta, ResourceType } from './objects.ts';

/** Items per list page. */
export const KUBE_LIST_PAGE_SIZE = 500;

/** One page as the API server sends it. */
export interface ListPage<T> {
  items?: T[] | null;
  metadata?: { resourceVersion?: string; continue?: string };
}

export async function listAllPages<T extends ObjectWithMeta>(
  type: ResourceType,
  fetchPage: (cont: string | undefined) => Promise<ListPage<T>>,
): Promise<ListResult<T>> {
  const items: T[] = [];
  let resourceVersion = '';
  let cont: string | undefined;
  do {
    const page = await fetchPage(cont);
    for (const it of page.items ?? []) items.push({ ...it, apiVersion: type.apiVersion, kind: type.kind });
    resourceVersion = page.metadata?.resourceVersion ?? '';
    cont = page.metadata?.continue || undefined;
  } while (cont);
  return { items, resourceVersion };
}
