/**
 * The audit log never loses an event because of another event's content (the real server;
 * embedded database, and PostgreSQL via scripts/with-postgres.sh). The attack: an
 * unauthenticated presigned S3 request whose `X-Amz-Credential` holds a NUL in its scope
 * (`SHK1…%2F%00%2F…`); the refusal's reason quotes it. Sent among other queued events — state
 * reads, bootstrap-token uses, refusals from other addresses — every one of them is stored,
 * the attacker's own refusal too (its NUL escaped as `\u0000`). Before, PostgreSQL refused the
 * whole batch and every event in it was dropped.
 */
import { randomUUID } from 'node:crypto';
import { freshServerEnv } from '../support/database';
import { RunningServer, spawnServer } from '../support/server';

jest.setTimeout(120_000);

interface AuditEvent {
  type: string;
  principal: string;
  requestId: string | null;
  clientIp: string | null;
  details: Record<string, unknown> | null;
}

let server: RunningServer;
let cleanup: (() => Promise<void>) | undefined;
let token: string;

function send(path: string, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${server.url}${path}`, { headers });
}

beforeAll(async () => {
  const fresh = await freshServerEnv();
  cleanup = fresh.cleanup;
  // 127.0.0.1 is a trusted proxy: each refusal can come from its own address.
  server = await spawnServer({ ...fresh.env, STATEHOUSE_TRUSTED_PROXIES: '127.0.0.1' });
  const t = await fetch(`${server.url}/v1/auth/tokens`, {
    method: 'POST',
    headers: { ...server.auth, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'audit-content', subject: 'svc:reader' }),
  });
  expect(t.status).toBe(201);
  token = ((await t.json()) as { token: string }).token;
  const put = await fetch(`${server.url}/v1/units/${encodeURIComponent('team/app')}/state`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${token}` },
    body: JSON.stringify({ version: 4, serial: 1, lineage: 'l', outputs: {}, resources: [] }),
  });
  expect(put.status).toBe(200);
});

afterAll(async () => {
  await server?.stop();
  await cleanup?.();
});

async function allEvents(): Promise<AuditEvent[]> {
  const out: AuditEvent[] = [];
  let cursor: string | undefined;
  for (;;) {
    const res = await send(`/v1/audit?limit=500${cursor ? `&cursor=${cursor}` : ''}`, server.auth);
    expect(res.status).toBe(200);
    const page = (await res.json()) as { items: AuditEvent[]; nextCursor?: string | null };
    out.push(...page.items);
    if (!page.nextCursor) return out;
    cursor = page.nextCursor;
  }
}

it('a NUL in X-Amz-Credential among other queued events: every event lands, that one escaped', async () => {
  const run = randomUUID().slice(0, 8);
  const ids = { reads: [] as string[], bootstrap: [] as string[], refusals: [] as string[] };
  const requests: Promise<Response>[] = [];
  const attackId = `attack-${run}`;
  const attack = () =>
    send(
      '/s3/tfstate/team/app/terraform.tfstate?X-Amz-Algorithm=AWS4-HMAC-SHA256' +
        '&X-Amz-Credential=SHK1AAAAAAAAAAAAAAAAAAAA%2F%00%2Fus-east-1%2Fs3%2Faws4_request' +
        '&X-Amz-Date=20261201T000000Z&X-Amz-Expires=900&X-Amz-SignedHeaders=host' +
        `&X-Amz-Signature=${'0'.repeat(64)}`,
      { 'x-request-id': attackId, 'x-forwarded-for': '203.0.113.250' },
    );
  for (let i = 0; i < 40; i++) {
    if (i === 20) requests.push(attack());
    const read = `read-${run}-${i}`;
    ids.reads.push(read);
    requests.push(
      send(`/v1/units/${encodeURIComponent('team/app')}/state`, {
        authorization: `Bearer ${token}`,
        'x-request-id': read,
      }),
    );
    if (i % 4 === 0) {
      const boot = `bootstrap-${run}-${i}`;
      ids.bootstrap.push(boot);
      requests.push(send('/v1/units', { ...server.auth, 'x-request-id': boot }));
      const refused = `refused-${run}-${i}`;
      ids.refusals.push(refused);
      requests.push(
        send('/v1/units', {
          authorization: 'Bearer not-a-token',
          'x-request-id': refused,
          'x-forwarded-for': `198.51.100.${i}`,
        }),
      );
    }
  }
  const answers = await Promise.all(requests);
  expect(answers.map((a) => a.status).filter((s) => s >= 500)).toEqual([]);

  const events = await allEvents();
  const byRequest = new Map<string, AuditEvent[]>();
  for (const e of events) {
    if (e.requestId) byRequest.set(e.requestId, [...(byRequest.get(e.requestId) ?? []), e]);
  }
  const missing = (list: string[], type: string) =>
    list.filter((id) => !(byRequest.get(id) ?? []).some((e) => e.type === type));
  expect(missing(ids.reads, 'state.read')).toEqual([]);
  expect(missing(ids.bootstrap, 'auth.bootstrap_token_used')).toEqual([]);
  expect(missing(ids.refusals, 'auth.failed')).toEqual([]);

  const [stored] = byRequest.get(attackId) ?? [];
  expect(stored).toMatchObject({
    type: 'auth.failed',
    principal: 'anonymous',
    clientIp: '203.0.113.250',
  });
  expect(String(stored.details?.reason)).toContain('\\u0000');
  expect(String(stored.details?.reason)).not.toContain('\u0000');
  // Nothing was lost, so nothing was logged as lost.
  expect(server.output()).not.toMatch(
    /audit event could not be stored|could not store \d+ audit events/,
  );
});
