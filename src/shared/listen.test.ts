import { createServer } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { listen } from './listen.ts';

const servers: ReturnType<typeof createServer>[] = [];
const server = () => {
  const s = createServer();
  servers.push(s);
  return s;
};
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

describe('listen', () => {
  it('resolves with the bound port and leaves no start-up error listener behind', async () => {
    const s = server();
    const port = await listen(s, 0, '127.0.0.1', 'TEST_PORT');
    expect(port).toBeGreaterThan(0);
    expect(s.listenerCount('error')).toBe(0);
  });

  it('names the setting when the port is in use', async () => {
    const port = await listen(server(), 0, '127.0.0.1', 'TEST_PORT');
    await expect(listen(server(), port, '127.0.0.1', 'TEST_PORT')).rejects.toThrow(
      `127.0.0.1:${port} is already in use; choose another with TEST_PORT`,
    );
  });
});
