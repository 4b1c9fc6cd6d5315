/**
 * One image naming scheme (hack/images/names.ts) everywhere a user or the cluster reads an image name:
 * the chart's defaults, the rendered manifests, the operator's default runtime image, the Dockerfiles
 * and the docs. A name that drifts here is an image nobody builds.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { IMAGES, REGISTRY, ref, VERSION } from '../../../hack/images/names.ts';
import { DEFAULT_RUNTIME_IMAGE, defaultOperatorSettings } from '../../../src/operator/settings.ts';
import { REPO } from './helpers.ts';

const read = (p: string) => readFileSync(join(REPO, p), 'utf8');

describe('image names', () => {
  it('the chart installs the images make images builds', () => {
    const values = parse(read('charts/apphost/values.yaml'));
    const chart = parse(read('charts/apphost/Chart.yaml'));
    expect(values.image.repository).toBe(IMAGES.apphost);
    expect(chart.appVersion).toBe(VERSION);
    expect(values.runtimeImage).toBe(ref(IMAGES.runtimePython));
    const manifests = read('manifests/10-apphost.yaml');
    expect(manifests).toContain(`image: ${ref(IMAGES.apphost)}`);
    expect(manifests).toContain(ref(IMAGES.runtimePython));
  });

  it("the operator's default runtime image is the runtime image", () => {
    expect(DEFAULT_RUNTIME_IMAGE).toBe(ref(IMAGES.runtimePython));
    expect(defaultOperatorSettings().runtimeImage).toBe(ref(IMAGES.runtimePython));
    // A deployed App's init container (fetch-artifacts) is the platform image.
    expect(defaultOperatorSettings().artifactFetch.platformImage).toBe(ref(IMAGES.apphost));
  });

  it('the Dockerfiles tag and the docs name the same images', () => {
    expect(read('Dockerfile')).toContain(`docker build -t ${ref(IMAGES.apphost)} .`);
    expect(read('runtime/python/Dockerfile')).toContain(
      `docker build -t ${ref(IMAGES.runtimePython)} runtime/python`,
    );
    expect(read('docs/runtimes.md')).toContain(`RUNTIME_IMAGE=${ref(IMAGES.runtimePython)}`);
    expect(read('docs/install.md')).toContain(IMAGES.apphost);
  });

  it('no other name for them appears in the repository', () => {
    const files = execFileSync(
      'git',
      ['ls-files', '*.md', '*.ts', '*.yaml', '*.json', '*Dockerfile', '*.txt'],
      {
        cwd: REPO,
        encoding: 'utf8',
      },
    )
      .split('\n')
      .filter((f) => f && !f.startsWith('node_modules/') && f !== 'package-lock.json');
    const known = new Set<string>(Object.values(IMAGES));
    const strays: string[] = [];
    for (const f of files) {
      const text = readFileSync(join(REPO, f), 'utf8');
      for (const m of text.matchAll(/(?:ghcr\.io\/apphost\/[a-z0-9._-]+|apphost\/python-runtime)/g)) {
        if (!known.has(m[0]) && m[0] !== REGISTRY) strays.push(`${f}: ${m[0]}`);
      }
    }
    expect(strays).toEqual([]);
  });
});
