/**
 * The one naming scheme of apphost's images. The chart's values, the operator's default runtime image,
 * the Dockerfiles and the docs all say these names; test/integration/chart/image-names.test.ts checks it.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(import.meta.dirname, '..', '..');

/** The release version: package.json's, which is also the chart's appVersion. */
export const VERSION: string = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version;

export const REGISTRY = 'ghcr.io/apphost';

export const IMAGES = {
  /** The platform: operator, gateway (+ run worker), webhook dispatcher, management API. */
  apphost: `${REGISTRY}/apphost`,
  /** The cortex (Python) runtime that App pods run. */
  runtimePython: `${REGISTRY}/runtime-python`,
} as const;

export const ref = (repository: string, tag = VERSION) => `${repository}:${tag}`;
