import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect, it } from 'vitest';
import { Agent, errors } from './undici-agent.ts';

it("are undici's own Agent and errors (its index re-exports the same modules), with the request API", async () => {
  const s = createServer((_req, res) => res.end('ok'));
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  try {
    const agent = new Agent();
    const res = await agent.request({
      origin: `http://127.0.0.1:${(s.address() as AddressInfo).port}`,
      path: '/',
      method: 'GET',
    });
    expect(await res.body.text()).toBe('ok');
    await agent.close();
  } finally {
    s.close();
  }
  const undici = await import('undici');
  expect(Agent).toBe(undici.Agent);
  expect(errors).toBe(undici.errors);
  expect(errors.BodyTimeoutError).toBe(undici.errors.BodyTimeoutError);
});
