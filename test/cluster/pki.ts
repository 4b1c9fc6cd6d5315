/**
 * The node's certificates and tokens, made with openssl: one CA; the API server's serving certificate
 * (node address, the `kubernetes` Service address and names, and 127.0.0.1 for the runner's relay);
 * its client certificate towards the kubelet (system:masters); the service-account key pair; and a
 * static token per identity (admin, the node, kube-proxy, the scheduler, the controller manager).
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

const exec = promisify(execFile);

export interface Pki {
  dir: string;
  caCert: string;
  caKey: string;
  apiserverCert: string;
  apiserverKey: string;
  kubeletClientCert: string;
  kubeletClientKey: string;
  saKey: string;
  saPub: string;
  tokenFile: string;
  tokens: Record<'admin' | 'node' | 'proxy' | 'scheduler' | 'controllerManager', string>;
}

async function openssl(args: string[]): Promise<void> {
  await exec('openssl', args);
}

async function signed(
  dir: string,
  name: string,
  subject: string,
  ca: { cert: string; key: string },
  ext: string,
): Promise<{ cert: string; key: string }> {
  const key = join(dir, `${name}.key`);
  const csr = join(dir, `${name}.csr`);
  const cert = join(dir, `${name}.crt`);
  const extFile = join(dir, `${name}.ext`);
  await writeFile(extFile, ext);
  await openssl([
    'req',
    '-new',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-keyout',
    key,
    '-out',
    csr,
    '-subj',
    subject,
  ]);
  await openssl([
    'x509',
    '-req',
    '-in',
    csr,
    '-CA',
    ca.cert,
    '-CAkey',
    ca.key,
    '-CAcreateserial',
    '-days',
    '2',
    '-out',
    cert,
    '-extfile',
    extFile,
  ]);
  return { cert, key };
}

export async function makePki(
  dir: string,
  nodeName: string,
  nodeIp: string,
  apiServiceIp: string,
): Promise<Pki> {
  await mkdir(dir, { recursive: true });
  const caKey = join(dir, 'ca.key');
  const caCert = join(dir, 'ca.crt');
  await openssl([
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-keyout',
    caKey,
    '-out',
    caCert,
    '-days',
    '2',
    '-subj',
    '/CN=apphost-test-ca',
  ]);
  const ca = { cert: caCert, key: caKey };
  const sans = [
    `IP:${nodeIp}`,
    `IP:${apiServiceIp}`,
    'IP:127.0.0.1',
    'DNS:localhost',
    'DNS:kubernetes',
    'DNS:kubernetes.default',
    'DNS:kubernetes.default.svc',
    'DNS:kubernetes.default.svc.cluster.local',
    `DNS:${nodeName}`,
  ].join(',');
  const apiserver = await signed(
    dir,
    'apiserver',
    '/CN=kube-apiserver',
    ca,
    `subjectAltName=${sans}\nextendedKeyUsage=serverAuth\n`,
  );
  const kubeletClient = await signed(
    dir,
    'apiserver-kubelet-client',
    '/O=system:masters/CN=kube-apiserver-kubelet-client',
    ca,
    'extendedKeyUsage=clientAuth\n',
  );
  const saKey = join(dir, 'sa.key');
  const saPub = join(dir, 'sa.pub');
  await openssl(['genpkey', '-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048', '-out', saKey]);
  await openssl(['pkey', '-in', saKey, '-pubout', '-out', saPub]);
  const token = () => randomBytes(24).toString('hex');
  const tokens = {
    admin: token(),
    node: token(),
    proxy: token(),
    scheduler: token(),
    controllerManager: token(),
  };
  const tokenFile = join(dir, 'tokens.csv');
  await writeFile(
    tokenFile,
    [
      `${tokens.admin},admin,admin,"system:masters"`,
      `${tokens.node},system:node:${nodeName},node,"system:nodes"`,
      `${tokens.proxy},system:kube-proxy,kube-proxy`,
      `${tokens.scheduler},system:kube-scheduler,kube-scheduler`,
      `${tokens.controllerManager},system:kube-controller-manager,kube-controller-manager`,
      '',
    ].join('\n'),
    { mode: 0o600 },
  );
  return {
    dir,
    caCert,
    caKey,
    apiserverCert: apiserver.cert,
    apiserverKey: apiserver.key,
    kubeletClientCert: kubeletClient.cert,
    kubeletClientKey: kubeletClient.key,
    saKey,
    saPub,
    tokenFile,
    tokens,
  };
}

/** A kubeconfig for `server` with a bearer token, trusting the test CA. */
export function kubeconfig(server: string, caPem: string, token: string, user: string): string {
  const ca = Buffer.from(caPem).toString('base64');
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    '- name: apphost-test',
    '  cluster:',
    `    server: ${server}`,
    `    certificate-authority-data: ${ca}`,
    'users:',
    `- name: ${user}`,
    '  user:',
    `    token: ${token}`,
    'contexts:',
    '- name: apphost-test',
    `  context: {cluster: apphost-test, user: ${user}, namespace: default}`,
    'current-context: apphost-test',
    '',
  ].join('\n');
}
