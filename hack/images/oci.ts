/**
 * Writes an image as one reproducible archive that `docker load`, `ctr images import`,
 * `kind load image-archive` and `skopeo copy oci-archive:` all accept: an OCI image layout
 * (oci-layout, index.json, blobs/) plus Docker's manifest.json pointing at the same blobs.
 * Same layer trees + same config → same bytes → same digests: every timestamp is pinned, owners are
 * numeric, entries are sorted (GNU tar), and gzip carries no name or time.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, mkdtemp, rename, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { promisify } from 'node:util';
import { createGzip } from 'node:zlib';

const exec = promisify(execFile);

/** Every file's mtime and the image's `created`: fixed, so a rebuild from the same inputs is identical. */
export const EPOCH = 0;
const CREATED = new Date(EPOCH * 1000).toISOString();

/** The flags that make GNU tar's output a function of the tree alone. */
export const REPRODUCIBLE_TAR = [
  '--sort=name',
  '--format=posix',
  '--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime',
  `--mtime=@${EPOCH}`,
  '--numeric-owner',
];

export interface ImageConfig {
  user: string;
  env: string[];
  workingDir: string;
  entrypoint: string[];
  cmd?: string[];
  exposedPorts?: number[];
  stopSignal?: string;
  labels: Record<string, string>;
}

export interface ImageSpec {
  /** Full reference, e.g. ghcr.io/apphost/apphost:0.1.0. */
  ref: string;
  /** Layer trees, bottom first; each is tarred as it is (owners and modes from the files). */
  layers: { dir: string; comment: string; paths?: string[] }[];
  config: ImageConfig;
}

export interface BuiltImage {
  ref: string;
  /** sha256 of the OCI manifest: what a registry and containerd call the image's digest. */
  digest: string;
  archive: string;
  bytes: number;
}

interface Blob {
  digest: string;
  size: number;
}

const sha256File = async (path: string): Promise<Blob> => {
  const hash = createHash('sha256');
  await pipeline(createReadStream(path), hash);
  return { digest: `sha256:${hash.digest('hex')}`, size: (await stat(path)).size };
};

async function putBlob(blobs: string, src: string): Promise<Blob> {
  const blob = await sha256File(src);
  await rename(src, join(blobs, blob.digest.slice('sha256:'.length)));
  return blob;
}

async function putJson(blobs: string, value: unknown): Promise<Blob & { bytes: Buffer }> {
  const bytes = Buffer.from(JSON.stringify(value));
  const digest = `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
  await writeFile(join(blobs, digest.slice('sha256:'.length)), bytes);
  return { digest, size: bytes.length, bytes };
}

/** Builds `spec` into the archive `out` (written to a temp file first, then renamed). */
export async function writeImageArchive(spec: ImageSpec, out: string): Promise<BuiltImage> {
  await mkdir(dirname(out), { recursive: true });
  const work = await mkdtemp(`${out}.work-`);
  try {
    const blobs = join(work, 'blobs', 'sha256');
    await mkdir(blobs, { recursive: true });
    const layers: Blob[] = [];
    const diffIds: string[] = [];
    for (const [i, layer] of spec.layers.entries()) {
      const tar = join(work, `layer${i}.tar`);
      await exec('tar', [
        '--create',
        `--file=${tar}`,
        `--directory=${layer.dir}`,
        ...REPRODUCIBLE_TAR,
        ...(layer.paths ?? ['.']),
      ]);
      diffIds.push((await sha256File(tar)).digest);
      const gz = join(work, `layer${i}.tar.gz`);
      await pipeline(createReadStream(tar), createGzip({ level: 6 }), createWriteStream(gz));
      await rm(tar);
      layers.push(await putBlob(blobs, gz));
    }
    const c = spec.config;
    const config = await putJson(blobs, {
      architecture: 'amd64',
      os: 'linux',
      created: CREATED,
      config: {
        User: c.user,
        Env: c.env,
        WorkingDir: c.workingDir,
        Entrypoint: c.entrypoint,
        ...(c.cmd ? { Cmd: c.cmd } : {}),
        ...(c.exposedPorts?.length
          ? { ExposedPorts: Object.fromEntries(c.exposedPorts.map((p) => [`${p}/tcp`, {}])) }
          : {}),
        ...(c.stopSignal ? { StopSignal: c.stopSignal } : {}),
        Labels: c.labels,
      },
      rootfs: { type: 'layers', diff_ids: diffIds },
      history: spec.layers.map((l) => ({ created: CREATED, created_by: l.comment })),
    });
    const manifest = await putJson(blobs, {
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
      config: {
        mediaType: 'application/vnd.oci.image.config.v1+json',
        digest: config.digest,
        size: config.size,
      },
      layers: layers.map((l) => ({
        mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip',
        digest: l.digest,
        size: l.size,
      })),
      annotations: pickOciAnnotations(c.labels),
    });
    const tag = spec.ref.slice(spec.ref.lastIndexOf(':') + 1);
    await writeFile(join(work, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
    await writeFile(
      join(work, 'index.json'),
      JSON.stringify({
        schemaVersion: 2,
        mediaType: 'application/vnd.oci.image.index.v1+json',
        manifests: [
          {
            mediaType: 'application/vnd.oci.image.manifest.v1+json',
            digest: manifest.digest,
            size: manifest.size,
            // containerd (ctr import, kind load) names the image from the first, skopeo and podman from the second.
            annotations: { 'io.containerd.image.name': spec.ref, 'org.opencontainers.image.ref.name': tag },
          },
        ],
      }),
    );
    const blobPath = (b: Blob) => `blobs/sha256/${b.digest.slice('sha256:'.length)}`;
    await writeFile(
      join(work, 'manifest.json'),
      JSON.stringify([{ Config: blobPath(config), RepoTags: [spec.ref], Layers: layers.map(blobPath) }]),
    );
    const tmpOut = `${out}.tmp`;
    await exec('tar', [
      '--create',
      `--file=${tmpOut}`,
      `--directory=${work}`,
      ...REPRODUCIBLE_TAR,
      '--owner=0',
      '--group=0',
      'blobs',
      'index.json',
      'manifest.json',
      'oci-layout',
    ]);
    await rename(tmpOut, out);
    return { ref: spec.ref, digest: manifest.digest, archive: out, bytes: (await stat(out)).size };
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/** The image's org.opencontainers.image.* labels, repeated as manifest annotations (the spec's convention). */
function pickOciAnnotations(labels: Record<string, string>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(labels).filter(([k]) => k.startsWith('org.opencontainers.image.')),
  );
}
