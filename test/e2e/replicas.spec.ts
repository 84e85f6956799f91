/**
 * Two `statehouse serve` processes (replicas) on one PostgreSQL database, started at the same
 * moment (they race on migrations and generated keys). Many concurrent lock attempts on the same
 * state, spread over both replicas: exactly one wins, every time, and every loser is told who
 * holds the lock. A state written through one replica reads back byte for byte through the
 * other, and a lock taken through one is released through the other.
 *
 * Only meaningful on PostgreSQL (the embedded database serves one process): without
 * DATABASE_URL the suite is reported as skipped, by a name that says how to run it.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freshServerEnv, ON_POSTGRES } from '../support/database';
import { RunningServer, spawnServer } from '../support/server';
import { tfStateText } from '../support/tf-state';

jest.setTimeout(120_000);

const ROUNDS = 20;
const ATTEMPTS_PER_ROUND = 40;

const describeOnPostgres = ON_POSTGRES ? describe : describe.skip;
const SUITE = 'two server processes on one PostgreSQL database';
const NOT_APPLICABLE = `${SUITE} — needs PostgreSQL: run via scripts/with-postgres.sh`;

// Jest prints no names for a file whose tests are all skipped: say it here too.
if (!ON_POSTGRES) console.warn(`replicas.spec.ts skipped (not applicable): ${NOT_APPLICABLE}`);

function lockInfo(who: string): string {
  return JSON.stringify({
    ID: randomUUID(),
    Operation: 'OperationTypeApply',
    Info: '',
    Who: who,
    Version: '1.11.4',
    Created: new Date().toISOString(),
    Path: '',
  });
}

function tfState(serial: number, lineage: string, padding = 0): string {
  return tfStateText({ serial, lineage, outputs: { note: 'x'.repeat(padding) } });
}

describeOnPostgres(ON_POSTGRES ? SUITE : NOT_APPLICABLE, () => {
  let a: RunningServer;
  let b: RunningServer;
  let cleanup: (() => Promise<void>) | undefined;
  let secondDataDir: string | undefined;

  const basic = (s: RunningServer): string =>
    `Basic ${Buffer.from(`terraform:${s.token}`).toString('base64')}`;

  function backend(
    s: RunningServer,
    unit: string,
    method: string,
    body?: string | Buffer,
    query = '',
  ): Promise<Response> {
    return fetch(`${s.url}/v1/backend/${unit}${query}`, {
      method,
      headers: { Authorization: basic(s), 'Content-Type': 'application/json' },
      body,
    });
  }

  async function heldLock(s: RunningServer, unit: string): Promise<Response> {
    return fetch(`${s.url}/v1/units/${encodeURIComponent(unit)}/lock`, { headers: s.auth });
  }

  beforeAll(async () => {
    const fresh = await freshServerEnv();
    cleanup = fresh.cleanup;
    secondDataDir = mkdtempSync(join(tmpdir(), 'statehouse-replica-'));
    // Both at once: they race on migrations and on everything generated at first start.
    [a, b] = await Promise.all([
      spawnServer(fresh.env),
      spawnServer({ ...fresh.env, STATEHOUSE_DATA_DIR: secondDataDir }),
    ]);
  }, 120_000);

  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    await cleanup?.();
    if (secondDataDir) rmSync(secondDataDir, { recursive: true, force: true });
  });

  it('both replicas are ready and share the database', async () => {
    for (const s of [a, b]) expect((await fetch(`${s.url}/readyz`)).status).toBe(200);
    expect(a.port).not.toBe(b.port);
    expect(a.output()).toMatch(/database postgresql/);
    expect(b.output()).toMatch(/database postgresql/);
  });

  it(`${ATTEMPTS_PER_ROUND} concurrent LOCKs over both replicas: exactly one wins, ${ROUNDS} rounds out of ${ROUNDS}`, async () => {
    const failures: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const unit = `replicas/race-${round}-${randomUUID().slice(0, 8)}`; // created by the LOCKs
      const attempts = Array.from({ length: ATTEMPTS_PER_ROUND }, (_, i) => ({
        via: i % 2 === 0 ? a : b,
        replica: i % 2 === 0 ? 'A' : 'B',
        info: lockInfo(`racer-${i}@round-${round}`),
      }));
      const answers = await Promise.all(
        attempts.map(async (x) => {
          const r = await backend(x.via, unit, 'LOCK', x.info);
          return { ...x, status: r.status, body: await r.text() };
        }),
      );
      const won = answers.filter((x) => x.status === 200);
      const refused = answers.filter((x) => x.status === 423);
      const other = answers.filter((x) => x.status !== 200 && x.status !== 423);
      if (won.length !== 1 || other.length > 0) {
        failures.push(
          `round ${round}: ${won.length} won, ${refused.length} got 423, others: ` +
            JSON.stringify(other.map((x) => ({ via: x.replica, status: x.status, body: x.body }))),
        );
        continue;
      }
      const [winner] = won;
      // The winner is told its own LockInfo; every loser gets the winner's, byte for byte.
      expect(winner.body).toBe(winner.info);
      const wrongBodies = refused.filter((x) => x.body !== winner.info);
      if (wrongBodies.length > 0) {
        failures.push(
          `round ${round}: ${wrongBodies.length} refusals did not carry the winner's LockInfo, e.g. ${wrongBodies[0].body}`,
        );
      }
      // Both replicas see the same holder.
      const winnerId = (JSON.parse(winner.info) as { ID: string }).ID;
      for (const s of [a, b]) {
        const r = await heldLock(s, unit);
        const view = r.status === 200 ? ((await r.json()) as { id: string }) : undefined;
        if (view?.id !== winnerId) {
          failures.push(`round ${round}: GET lock via ${s.url} → ${r.status} ${view?.id}`);
        }
      }
      // The holder releases through the replica it did not lock through.
      const release = await backend(winner.via === a ? b : a, unit, 'UNLOCK', winner.info);
      if (release.status !== 200) failures.push(`round ${round}: UNLOCK → ${release.status}`);
    }
    expect(failures).toEqual([]);
  });

  it('a state written through replica A reads back byte for byte through replica B', async () => {
    const unit = `replicas/write-${randomUUID().slice(0, 8)}`;
    const lineage = randomUUID();
    const small = Buffer.from(tfState(1, lineage));
    const large = Buffer.from(tfState(2, lineage, 6 * 1024 * 1024)); // spans several chunks

    for (const [body, serial] of [
      [small, 1],
      [large, 2],
    ] as const) {
      const put = await backend(a, unit, 'POST', body);
      expect(put.status).toBe(200);
      const got = await backend(b, unit, 'GET');
      expect(got.status).toBe(200);
      const bytes = Buffer.from(await got.arrayBuffer());
      expect(bytes.length).toBe(body.length);
      expect(bytes.equals(body)).toBe(true);
      const viaApi = await fetch(`${b.url}/v1/units/${encodeURIComponent(unit)}/state`, {
        headers: b.auth,
      });
      expect(viaApi.headers.get('x-statehouse-version')).toBe(String(serial));
      expect(Buffer.from(await viaApi.arrayBuffer()).equals(body)).toBe(true);
    }
  });

  it('UNLOCK through replica B releases a lock taken through replica A', async () => {
    const unit = `replicas/unlock-${randomUUID().slice(0, 8)}`;
    const info = lockInfo('holder@a');
    expect((await backend(a, unit, 'LOCK', info)).status).toBe(200);

    const other = lockInfo('other@b');
    const refused = await backend(b, unit, 'LOCK', other);
    expect(refused.status).toBe(423);
    expect(await refused.text()).toBe(info);

    expect((await backend(b, unit, 'UNLOCK', info)).status).toBe(200);
    expect((await heldLock(a, unit)).status).toBe(404);
    expect((await heldLock(b, unit)).status).toBe(404);
    // Released for everyone: the other client now gets it through A.
    const next = await backend(a, unit, 'LOCK', other);
    expect(next.status).toBe(200);
    expect(await next.text()).toBe(other);
    expect((await backend(a, unit, 'UNLOCK', other)).status).toBe(200);
  });
  it('an API token revoked through replica A is refused by replica B at once, though B had just used it', async () => {
    const created = await fetch(`${a.url}/v1/auth/tokens`, {
      method: 'POST',
      headers: { ...a.auth, 'Content-Type': 'application/json' },
      body: JSON.stringify({ name: 'revoked-elsewhere', subject: 'svc:revoked-elsewhere' }),
    });
    expect(created.status).toBe(201);
    const { id, token } = (await created.json()) as { id: string; token: string };
    const me = () =>
      fetch(`${b.url}/v1/auth/me`, { headers: { Authorization: `Bearer ${token}` } });
    expect((await me()).status).toBe(200); // anything B keeps of a token in use must not outlive this
    expect((await me()).status).toBe(200);
    const del = await fetch(`${a.url}/v1/auth/tokens/${id}`, { method: 'DELETE', headers: a.auth });
    expect(del.status).toBe(204);
    // Whatever B keeps is dropped by the revocation's NOTIFY, which arrives asynchronously.
    const deadline = Date.now() + 3_000;
    let status = (await me()).status;
    while (status === 200 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
      status = (await me()).status;
    }
    expect(status).toBe(401);
  });
});
