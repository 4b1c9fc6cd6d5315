/** Tar.gz archives written entry by entry, so tests can make the bad bundles our packer never would. */
import { gzipSync } from 'node:zlib';
import tar from 'tar-stream';

export type Raw = {
  name: string;
  type?: tar.Header['type'];
  linkname?: string;
  content?: string;
  size?: number;
  mode?: number;
};

export async function rawTarGz(entries: Raw[]): Promise<Buffer> {
  const pack = tar.pack();
  const chunks: Buffer[] = [];
  const done = (async () => {
    for await (const c of pack) chunks.push(c as Buffer);
  })();
  for (const e of entries) {
    const body = e.content ?? '';
    const header: tar.Header = {
      name: e.name,
      type: e.type ?? 'file',
      mode: e.mode ?? 0o644,
      ...(e.linkname !== undefined ? { linkname: e.linkname } : {}),
      ...(e.size !== undefined ? { size: e.size } : {}),
    } as tar.Header;
    await new Promise<void>((resolve, reject) => {
      const cb = (err?: Error | null) => (err ? reject(err) : resolve());
      pack.entry(header, header.type === 'file' ? body : '', cb);
    });
  }
  pack.finalize();
  await done;
  return gzipSync(Buffer.concat(chunks));
}
