import { onFreshServer, RunningServer } from '../support/server';

describe('server smoke', () => {
  let server: RunningServer;

  onFreshServer((started) => (server = started));

  it('answers /healthz and /readyz without a token', async () => {
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    const ready = await fetch(`${server.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ status: 'ok' });
  });

  it('refuses the API without a token', async () => {
    const r = await fetch(`${server.url}/v1/units`);
    expect(r.status).toBe(401);
    expect(await r.json()).toMatchObject({ code: 'unauthenticated' });
  });
});
