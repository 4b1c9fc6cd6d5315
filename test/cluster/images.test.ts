/**
 * The archives `make images` writes: reproducible (a build from scratch, in an empty store, gives the
 * same digest), readable as an OCI archive and as a Docker archive (what `skopeo copy oci-archive:` and
 * `docker load` read), labelled, and running as uid 10001. `ctr images import` (what
 * `kind load image-archive` does) is what the suite's own setup loads them with.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { builtImages } from './node.ts';
import { REPO } from './platform.ts';

const exec = promisify(execFile);
const tmp = mkdtempSync(join(tmpdir(), 'apphost-images-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const skopeo = async (...args: string[]) => (await exec('skopeo', args, { maxBuffer: 16 << 20 })).stdout;

describe('image archives', () => {
  it('rebuilds the runtime image from scratch with the same digest', { timeout: 600_000 }, async () => {
    const built = builtImages()['runtime-python'];
    expect(built).toBeDefined();
    await exec(process.execPath, [join(REPO, 'hack', 'images', 'build.ts'), 'runtime-python'], {
      env: { ...process.env, APPHOST_IMAGE_STORE: join(tmp, 'store'), APPHOST_IMAGE_OUT: join(tmp, 'out') },
      maxBuffer: 16 << 20,
    });
    const again = JSON.parse(readFileSync(join(tmp, 'out', 'images.json'), 'utf8'))['runtime-python'];
    expect(again.digest).toBe(built?.digest);
  });

  for (const name of ['apphost', 'runtime-python']) {
    it(`${name}: an OCI archive and a Docker archive of the same image, labelled, uid 10001`, async () => {
      const img = builtImages()[name];
      if (!img) throw new Error(`${name} not built`);
      const oci = JSON.parse(await skopeo('inspect', `oci-archive:${img.archive}`));
      expect(oci.Digest).toBe(img.digest);
      expect(oci.Labels['org.opencontainers.image.version']).toBe(
        JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')).version,
      );
      expect(oci.Labels['org.opencontainers.image.source']).toMatch(/apphost/);
      const ociConfig = JSON.parse(await skopeo('inspect', '--config', `oci-archive:${img.archive}`));
      expect(ociConfig.config.User).toBe('10001:10001');
      // docker load reads manifest.json: the same config and layers under the image's name.
      const docker = JSON.parse(await skopeo('inspect', '--config', `docker-archive:${img.archive}`));
      expect(docker.rootfs.diff_ids).toEqual(ociConfig.rootfs.diff_ids);
      expect(await skopeo('list-tags', `docker-archive:${img.archive}`)).toContain(img.ref.split(':')[0]);
      await skopeo('copy', '--quiet', `oci-archive:${img.archive}`, `dir:${join(tmp, `${name}-copy`)}`);
    });
  }
});
