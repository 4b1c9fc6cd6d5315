/**
 * The test control plane: etcd + kube-apiserver (+ kube-controller-manager for garbage collection
 * and Deployment→ReplicaSet) on loopback, the way controller-runtime's envtest starts them.
 * Authentication is a static admin token in system:masters, or a client certificate in system:masters
 * signed by a client CA made with openssl; the serving certificate is the one the apiserver self-signs
 * into its cert dir, read back as the CA.
 */
import { execFile } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Agent, request } from 'undici';
import { binaryPath } from './binaries.ts';
import { freePort, type ManagedProcess, startProcess, waitFor } from './process.ts';

/** Bound on each process becoming ready; envtest's default is 20 s, our CI machine has 2 cores. */
export const CONTROL_PLANE_START_TIMEOUT_MS = Number(
  process.env.APPHOST_TEST_CONTROL_PLANE_TIMEOUT_MS ?? 90_000,
);

export interface ControlPlane {
  readonly server: string;
  readonly token: string;
  readonly caData: string;
  readonly dir: string;
  readonly kubeconfigPath: string;
  readonly kubeconfigYaml: string;
  /** PEM files of a client certificate the API server accepts as an admin (system:masters). */
  readonly clientCert: { certFile: string; keyFile: string };
  readonly etcdUrl: string;
  stop(): Promise<void>;
}

export interface ControlPlaneOptions {
  /** Start kube-controller-manager (garbage collector, deployment, replicaset, namespace controllers). */
  controllerManager?: boolean;
  /** ClusterIP range; the default /24 holds ~250 Services, too few for the 1000-App benchmark. */
  serviceClusterIpRange?: string;
}

export async function startControlPlane(opts: ControlPlaneOptions = {}): Promise<ControlPlane> {
  const dir = mkdtempSync(join(tmpdir(), 'apphost-cp-'));
  const procs: ManagedProcess[] = [];
  const stop = async () => {
    for (const p of procs.reverse()) await p.stop();
    if (!process.env.APPHOST_TEST_KEEP_DIRS) rmSync(dir, { recursive: true, force: true });
  };
  try {
    const [etcdPort, peerPort, apiPort, kcmPort] = await Promise.all([
      freePort(),
      freePort(),
      freePort(),
      freePort(),
    ]);
    const etcdUrl = `http://127.0.0.1:${etcdPort}`;
    procs.push(
      startProcess(
        'etcd',
        binaryPath('etcd'),
        [
          `--data-dir=${join(dir, 'etcd')}`,
          `--listen-client-urls=${etcdUrl}`,
          `--advertise-client-urls=${etcdUrl}`,
          `--listen-peer-urls=http://127.0.0.1:${peerPort}`,
          `--initial-advertise-peer-urls=http://127.0.0.1:${peerPort}`,
          `--initial-cluster=default=http://127.0.0.1:${peerPort}`,
          '--unsafe-no-fsync=true',
          '--log-level=warn',
        ],
        { logFile: join(dir, 'etcd.log') },
      ),
    );
    await waitFor(
      'etcd /health',
      async () => (await fetch(`${etcdUrl}/health`)).ok,
      CONTROL_PLANE_START_TIMEOUT_MS,
    );

    const token = randomBytes(24).toString('hex');
    writeFileSync(join(dir, 'tokens.csv'), `${token},admin,admin-uid,"system:masters"\n`, { mode: 0o600 });
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    writeFileSync(join(dir, 'sa.key'), privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
    writeFileSync(join(dir, 'sa.pub'), publicKey.export({ type: 'spki', format: 'pem' }));

    const clientCert = await makeClientCertificate(dir);
    const server = `https://127.0.0.1:${apiPort}`;
    procs.push(
      startProcess(
        'kube-apiserver',
        binaryPath('kube-apiserver'),
        [
          `--etcd-servers=${etcdUrl}`,
          `--cert-dir=${join(dir, 'certs')}`,
          `--secure-port=${apiPort}`,
          '--bind-address=127.0.0.1',
          '--advertise-address=127.0.0.1',
          `--service-cluster-ip-range=${opts.serviceClusterIpRange ?? '10.0.0.0/24'}`,
          '--allow-privileged=true',
          '--disable-admission-plugins=ServiceAccount',
          '--authorization-mode=RBAC',
          `--token-auth-file=${join(dir, 'tokens.csv')}`,
          `--client-ca-file=${clientCert.caFile}`,
          `--service-account-issuer=${server}/`,
          `--service-account-key-file=${join(dir, 'sa.pub')}`,
          `--service-account-signing-key-file=${join(dir, 'sa.key')}`,
          '--v=0',
        ],
        { logFile: join(dir, 'kube-apiserver.log') },
      ),
    );
    const insecure = new Agent({ connect: { rejectUnauthorized: false } });
    await waitFor(
      'kube-apiserver /readyz',
      async () => {
        const res = await request(`${server}/readyz`, {
          dispatcher: insecure,
          headers: { authorization: `Bearer ${token}` },
        });
        await res.body.dump();
        return res.statusCode === 200;
      },
      CONTROL_PLANE_START_TIMEOUT_MS,
      200,
    );
    await insecure.close();
    const caPem = readFileSync(join(dir, 'certs', 'apiserver.crt'), 'utf8');
    const caData = Buffer.from(caPem).toString('base64');
    const kubeconfigYaml = kubeconfig(server, caData, token);
    const kubeconfigPath = join(dir, 'kubeconfig');
    writeFileSync(kubeconfigPath, kubeconfigYaml, { mode: 0o600 });

    if (opts.controllerManager) {
      procs.push(
        startProcess(
          'kube-controller-manager',
          binaryPath('kube-controller-manager'),
          [
            `--kubeconfig=${kubeconfigPath}`,
            '--leader-elect=false',
            `--service-account-private-key-file=${join(dir, 'sa.key')}`,
            '--use-service-account-credentials=false',
            '--controllers=garbage-collector-controller,namespace-controller,deployment-controller,replicaset-controller',
            `--secure-port=${kcmPort}`,
            '--bind-address=127.0.0.1',
            '--concurrent-gc-syncs=5',
          ],
          { logFile: join(dir, 'kube-controller-manager.log') },
        ),
      );
      const kcm = new Agent({ connect: { rejectUnauthorized: false } });
      await waitFor(
        'kube-controller-manager /healthz',
        async () => {
          const res = await request(`https://127.0.0.1:${kcmPort}/healthz`, { dispatcher: kcm });
          await res.body.dump();
          return res.statusCode === 200;
        },
        CONTROL_PLANE_START_TIMEOUT_MS,
        200,
      );
      await kcm.close();
    }
    return {
      server,
      token,
      caData,
      dir,
      kubeconfigPath,
      kubeconfigYaml,
      clientCert: { certFile: clientCert.certFile, keyFile: clientCert.keyFile },
      etcdUrl,
      stop,
    };
  } catch (err) {
    await stop().catch(() => {});
    throw err;
  }
}

/** A client CA and an admin certificate it signed (CN admin-cert, O system:masters), with openssl. */
async function makeClientCertificate(dir: string) {
  const exec = promisify(execFile);
  const [caFile, caKey, certFile, keyFile, csr, ext] = [
    'client-ca.crt',
    'client-ca.key',
    'admin-client.crt',
    'admin-client.key',
    'admin-client.csr',
    'admin-client.ext',
  ].map((f) => join(dir, f)) as [string, string, string, string, string, string];
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  await exec('openssl', [
    'req',
    '-x509',
    ...ec,
    '-keyout',
    caKey,
    '-out',
    caFile,
    '-days',
    '7',
    '-subj',
    '/CN=apphost-test-client-ca',
  ]);
  await exec('openssl', [
    'req',
    '-new',
    ...ec,
    '-keyout',
    keyFile,
    '-out',
    csr,
    '-subj',
    '/O=system:masters/CN=admin-cert',
  ]);
  writeFileSync(ext, 'extendedKeyUsage=clientAuth\n');
  await exec('openssl', [
    'x509',
    '-req',
    '-in',
    csr,
    '-CA',
    caFile,
    '-CAkey',
    caKey,
    '-CAcreateserial',
    '-out',
    certFile,
    '-days',
    '7',
    '-extfile',
    ext,
  ]);
  return { caFile, certFile, keyFile };
}

function kubeconfig(server: string, caData: string, token: string): string {
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    '- name: test',
    '  cluster:',
    `    server: ${server}`,
    `    certificate-authority-data: ${caData}`,
    'users:',
    '- name: admin',
    '  user:',
    `    token: ${token}`,
    'contexts:',
    '- name: test',
    '  context: {cluster: test, user: admin, namespace: default}',
    'current-context: test',
    '',
  ].join('\n');
}
