import { DATABASE_KIND } from '../support/database';
import { apiFetch, onFreshServer, RunningServer } from '../support/server';
import { tfState } from '../support/services';

/**
 * The HTTP backend's GET, LOCK and UNLOCK are served below Express (`BackendReadRoute`,
 * `BackendLockRoute`), every other backend request by its controller. A query parameter the
 * backend ignores (`statehouse-parity`) sends the same request to the controller instead: every
 * answer of a lean route — the state, a lock taken, held, released, and each kind of refusal —
 * must be the controller's, header for header and byte for byte, but for the request id and
 * the date.
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

  describe('LOCK and UNLOCK', () => {
    const LOCK_UNIT = 'parity/locked';
    const info = (id: string) =>
      JSON.stringify({
        ID: id,
        Operation: 'OperationTypeApply',
        Info: '',
        Who: 'parity@host',
        Version: '1.11.4',
        Created: '2026-12-04T03:00:00Z',
        Path: '',
      });
    const send = (method: string, path: string, auth: string | undefined, body?: string) =>
      fetch(`${server.url}/v1/backend/${path}`, {
        method,
        body,
        headers: auth === undefined ? {} : { Authorization: auth },
      });
    const withParity = (path: string) =>
      `${path}${path.includes('?') ? '&' : '?'}statehouse-parity=1`;

    /**
     * The same request through the lean route and through the controller, each from the same
     * starting point: `setup` before each, and whatever lock is left released after each.
     */
    async function expectSameLock(
      method: string,
      path: string,
      auth: string | undefined,
      body: string | undefined,
      status: number,
      setup: () => Promise<void> = () => Promise.resolve(),
    ): Promise<void> {
      const answers: Answer[] = [];
      for (const p of [path, withParity(path)]) {
        await setup();
        answers.push(await answer(await send(method, p, auth, body)));
        const cleared = await send('UNLOCK', LOCK_UNIT, basic(tokens.reader));
        expect(cleared.status).toBe(200);
      }
      expect(answers[0].status).toBe(status);
      expect(answers[0]).toEqual(answers[1]);
    }

    const holdBy = (id: string) => async () => {
      const r = await send('LOCK', LOCK_UNIT, basic(tokens.reader), info(id));
      expect(r.status).toBe(200);
    };

    it('a lock taken, a lock held (423 with the holder), released, force-unlocked', async () => {
      const reader = basic(tokens.reader);
      await expectSameLock('LOCK', LOCK_UNIT, reader, info('lock-a'), 200);
      await expectSameLock('LOCK', LOCK_UNIT, reader, info('lock-b'), 423, holdBy('lock-a'));
      await expectSameLock('UNLOCK', LOCK_UNIT, reader, info('lock-a'), 200, holdBy('lock-a'));
      await expectSameLock('UNLOCK', LOCK_UNIT, reader, info('lock-b'), 409, holdBy('lock-a'));
      await expectSameLock('UNLOCK', LOCK_UNIT, reader, undefined, 200, holdBy('lock-a'));
      await expectSameLock('UNLOCK', LOCK_UNIT, reader, info('lock-a'), 200);
    });

    it('refusals: no credential, no access, a bad body, too large a body, a bad name', async () => {
      const reader = basic(tokens.reader);
      await expectSameLock('LOCK', LOCK_UNIT, undefined, info('x'), 401);
      await expectSameLock('LOCK', LOCK_UNIT, basic(tokens.nobody), info('x'), 403);
      await expectSameLock('LOCK', LOCK_UNIT, reader, '{"ID":', 400);
      await expectSameLock('LOCK', LOCK_UNIT, reader, 'x'.repeat(70_000), 413);
      await expectSameLock('LOCK', 'parity/a%2Fb', reader, info('x'), 400);
    });
  });
});
