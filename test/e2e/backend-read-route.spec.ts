import { DATABASE_KIND } from '../support/database';
import { apiFetch, onFreshServer, RunningServer } from '../support/server';
import { tfState } from '../support/services';

/**
 * The HTTP backend's GET is served below Express (`BackendReadRoute`), every other backend
 * request by its controller. A query parameter the backend ignores (`statehouse-parity`) sends
 * the same GET to the controller instead: every answer of the lean route — the state, and each
 * kind of refusal — must be the controller's, header for header and byte for byte, but for the
 * request id and the date.
 */

jest.setTimeout(120_000);

const UNIT = 'parity/net';
const STATE = tfState(2, 'lineage-backend-parity', { out: 'y'.repeat(200) });
const PER_ANSWER = new Set(['x-request-id', 'date', 'connection', 'keep-alive']);

interface Answer {
  status: number;
  headers: Record<string, string>;
  text: string;
}

async function answer(r: Response): Promise<Answer> {
  const headers: Record<string, string> = {};
  const id = r.headers.get('x-request-id') ?? '';
  r.headers.forEach((v, k) => {
    if (!PER_ANSWER.has(k)) headers[k] = v;
  });
  const text = await r.text();
  return { status: r.status, headers, text: id === '' ? text : text.split(id).join('<id>') };
}

describe(`HTTP backend GET below Express answers as the controller does (${DATABASE_KIND})`, () => {
  let server: RunningServer;
  const tokens: Record<string, string> = {};
  onFreshServer((s) => (server = s));

  const token = async (subject: string): Promise<string> => {
    const r = await apiFetch(server, '/v1/auth/tokens', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: subject, subject }),
    });
    expect(r.status).toBe(201);
    return ((await r.json()) as { token: string }).token;
  };

  beforeAll(async () => {
    tokens.reader = await token('svc:parity-reader');
    tokens.nobody = await token('svc:parity-nobody');
    const basic = `Basic ${Buffer.from(`terraform:${tokens.reader}`).toString('base64')}`;
    for (const path of [UNIT, `${UNIT}?workspace=staging`]) {
      const post = await fetch(`${server.url}/v1/backend/${path}`, {
        method: 'POST',
        headers: { Authorization: basic },
        body: STATE,
      });
      expect(post.status).toBe(200);
    }
    const init = await apiFetch(server, '/v1/rbac/init', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ admin: { subject: 'svc:parity-reader' } }),
    });
    expect(init.status).toBeLessThan(300);
  });

  async function expectSame(
    path: string,
    authorization: string | undefined,
    status: number,
  ): Promise<void> {
    const get = (p: string) =>
      fetch(`${server.url}/v1/backend/${p}`, {
        headers: authorization === undefined ? {} : { Authorization: authorization },
      });
    const routed = `${path}${path.includes('?') ? '&' : '?'}statehouse-parity=1`;
    const lean = await answer(await get(path));
    const controller = await answer(await get(routed));
    expect(lean.status).toBe(status);
    expect(lean).toEqual(controller);
  }

  const basic = (t: string) => `Basic ${Buffer.from(`terraform:${t}`).toString('base64')}`;

  it('the state, by Bearer and by basic auth, in the default and another workspace', async () => {
    await expectSame(UNIT, `Bearer ${tokens.reader}`, 200);
    await expectSame(UNIT, basic(tokens.reader), 200);
    await expectSame(`${UNIT}?workspace=staging`, basic(tokens.reader), 200);
  });

  it('refusals: no credential, a bad one, no access, no such state, a bad name', async () => {
    await expectSame(UNIT, undefined, 401);
    await expectSame(UNIT, 'Bearer sht_not-a-token', 401);
    await expectSame(UNIT, basic(''), 401);
    await expectSame(UNIT, basic(tokens.nobody), 403);
    await expectSame('parity/none', basic(tokens.reader), 404);
    await expectSame(`${UNIT}?workspace=nowhere`, basic(tokens.reader), 404);
    await expectSame(`${UNIT}?workspace=a%20b`, basic(tokens.reader), 400);
    await expectSame('parity/a%2Fb', basic(tokens.reader), 400);
    await expectSame('parity/%00x', basic(tokens.reader), 400);
  });
});
