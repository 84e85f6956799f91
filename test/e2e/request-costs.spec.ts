import { DATABASE_KIND, ON_POSTGRES } from '../support/database';
import { parseExposition, Sample, valueOf } from '../support/metrics';
import { sleep } from '../support/processes';
import { presignS3Get, S3Creds, sendRaw, signS3 } from '../support/s3-signer';
import { apiFetch, onFreshServer, RunningServer, s3CredentialsFor } from '../support/server';
import { tfState } from '../support/services';

/**
 * What one request on a hot path costs the server, counted from outside the process
 * (statehouse_database_statements_total, statehouse_token_verifications_total, the log lines
 * on its output) rather than timed: a read of an existing state needs at most one statement on
 * PostgreSQL and none on the embedded database while the current-version cache answers, one
 * verification of the credential it carries, and one log line.
 */

jest.setTimeout(120_000);

const N = 20;
const UNIT = 'costs/app';
const KEY = 'costs/app.tfstate';
const STATE = tfState(3, 'lineage-costs', { big: 'x'.repeat(2048) });

describe(`what a request costs: statements, token verifications, log lines (${DATABASE_KIND})`, () => {
  let server: RunningServer;
  let creds: S3Creds;
  /** An API token, sent as Terraform's HTTP backend sends it (basic auth). */
  let basic: string;
  let bootstrapGet: () => Promise<Response>;
  onFreshServer((s) => (server = s));

  beforeAll(async () => {
    const made = await apiFetch(server, '/v1/auth/tokens', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'svc:costs-backend', subject: 'svc:costs-backend' }),
    });
    expect(made.status).toBe(201);
    const token = ((await made.json()) as { token: string }).token;
    basic = `Basic ${Buffer.from(`terraform:${token}`).toString('base64')}`;
    creds = await s3CredentialsFor(server, 'svc:costs-s3');
    const put = await sendRaw(
      server.port,
      await signS3(server.port, creds, { method: 'PUT', key: KEY, body: Buffer.from(STATE) }),
    );
    expect(put.status).toBe(200);
    bootstrapGet = () => apiFetch(server, `/v1/backend/${UNIT}`);
    const post = await backend('POST', STATE);
    expect(post.status).toBe(200);
  });

  const backend = (method: string, body?: string) =>
    fetch(`${server.url}/v1/backend/${UNIT}`, { method, body, headers: { Authorization: basic } });

  /** The requests of each read path: one answered GET of the state each time. */
  const reads: Record<string, () => Promise<{ status: number; requestId: string }>> = {
    's3 GetObject, header-signed': async () => {
      const r = await sendRaw(
        server.port,
        await signS3(server.port, creds, { method: 'GET', key: KEY }),
      );
      return { status: r.status, requestId: String(r.headers['x-request-id']) };
    },
    's3 GetObject, presigned': async () => {
      const r = await fetch(`${server.url}${await presignS3Get(server.port, creds, KEY)}`);
      await r.arrayBuffer();
      return { status: r.status, requestId: String(r.headers.get('x-request-id')) };
    },
    'HTTP-backend GET, bootstrap': async () => {
      const r = await bootstrapGet();
      await r.arrayBuffer();
      return { status: r.status, requestId: String(r.headers.get('x-request-id')) };
    },
    'HTTP-backend GET': async () => {
      const r = await backend('GET');
      await r.arrayBuffer();
      return { status: r.status, requestId: String(r.headers.get('x-request-id')) };
    },
  };

  const scrape = async (): Promise<Sample[]> =>
    parseExposition(await (await fetch(`${server.url}/metrics`)).text());
  /**
   * Statements so far. A scrape may read the held locks from the database (when its last
   * reading is over 5 s old), sending that statement after it has read the counters: a count
   * taken `before` requests is scraped twice, so that its own reading is in it, and one taken
   * after them once, so that what it reads holds only the requests' statements.
   */
  const statements = async (when: 'before' | 'after') => {
    if (when === 'before') await scrape();
    const s = await scrape();
    return {
      audit: valueOf(s, 'statehouse_database_statements_total', { kind: 'audit' }) ?? NaN,
      other: valueOf(s, 'statehouse_database_statements_total', { kind: 'other' }) ?? NaN,
      misses: valueOf(s, 'statehouse_state_read_cache_total', { result: 'miss' }) ?? NaN,
    };
  };
  const verifications = async () => {
    const out: Record<string, number> = {};
    for (const x of await scrape()) {
      if (x.name === 'statehouse_token_verifications_total') {
        out[`${x.labels.credential}/${x.labels.result}`] = x.value;
      }
    }
    return out;
  };
  const delta = (after: Record<string, number>, before: Record<string, number>) =>
    Object.fromEntries(
      Object.entries(after)
        .map(([k, v]) => [k, v - (before[k] ?? 0)] as const)
        .filter(([, v]) => v !== 0),
    );

  async function burst(read: () => Promise<{ status: number }>, n = N): Promise<void> {
    for (let i = 0; i < n; i++) expect((await read()).status).toBe(200);
  }

  /** Sends `n` reads and answers the statements they cost (both kinds). */
  async function statementsOf(read: () => Promise<{ status: number }>, n = N) {
    await burst(read, 3); // warm-up: kept verdicts, the blob cache, the current-version pointer
    const before = await statements('before');
    await burst(read, n);
    const after = await statements('after');
    return {
      audit: after.audit - before.audit,
      other: after.other - before.other,
      misses: after.misses - before.misses,
    };
  }

  describe.each(Object.entries(reads))('%s', (_name, read) => {
    if (ON_POSTGRES) {
      it(`${N} reads cost at most ${N} statements besides the audit inserts (the current version and its blob key, in one query)`, async () => {
        const cost = await statementsOf(read);
        // No credential costs a statement: the HTTP backend's service token (basic auth) is
        // kept after its first use (dropped by a revocation's NOTIFY), the S3 door's session
        // token is a kept verdict, the bootstrap token is compared.
        expect(cost.other).toBeLessThanOrEqual(N);
      });
    } else {
      it(`${N} reads cost no statement but the lookups after an audit insert (the current version is kept in memory)`, async () => {
        const cost = await statementsOf(read);
        // Every statement is a current-version lookup the cache could not answer: the HTTP
        // backend's service token is kept after its first use, not looked up again.
        expect(cost.other).toBe(cost.misses);
        // A batched audit insert (every 250 ms: the reads' own events) ends the kept pointer;
        // the read running alongside it cannot keep what it found, so at most two lookups
        // each, and one for an insert just before the first read.
        expect(cost.misses).toBeLessThanOrEqual(1 + 2 * cost.audit);
      });
    }
  });

  it('an HTTP-backend write of a new version costs a pinned number of statements', async () => {
    const writes = 5;
    const before = await statements('before');
    for (let i = 0; i < writes; i++) {
      const r = await backend('POST', tfState(10 + i, 'lineage-costs', { i }));
      expect(r.status).toBe(200);
    }
    const after = await statements('after');
    /*
     * Per write, measured (fs blobs on the embedded database, the postgres blob store there):
     *  0  the API token: a service token's row is kept after its first use;
     *  1  the unit, by name (before the body is read);
     *  1  on PostgreSQL, the blob's one chunk (blob_chunks; fs blobs are files);
     *  1  the graph edges the new version's remote states may refer to;
     *  6  the write's transaction: START (READ COMMITTED is the database's default, checked once
     *     at start: no SET TRANSACTION), the unit FOR SHARE and the state row
     *     FOR NO KEY UPDATE (one statement for a state written before), its lock and the current
     *     version (one statement), INSERT the version, UPDATE the state's current version and
     *     INSERT the version's audit row (one statement), the discovered graph edges (DELETE the
     *     stale), COMMIT. No UPDATE of declared edges' recorded outputs: this consumer has none.
     *  No statement of kind "audit" of its own: the audit row is in the version's statement.
     */
    const perWrite = ON_POSTGRES ? 9 : 8;
    expect(after.other - before.other).toBeLessThanOrEqual(perWrite * writes);
    // Every write is audited all the same: one state.write row each, with its version.
    const res = await apiFetch(
      server,
      `/v1/audit?type=state.write&resource=${encodeURIComponent(UNIT)}&limit=${writes}`,
    );
    expect(res.status).toBe(200);
    const { items } = (await res.json()) as {
      items: { resource: string; details: { version: number; serial: number } }[];
    };
    expect(items.map((e) => e.details.serial)).toEqual([14, 13, 12, 11, 10]);
  });

  it('a LOCK and its UNLOCK through the HTTP backend cost one statement each, their audit rows in them, and no token lookup', async () => {
    const rounds = 5;
    const info = (i: number) =>
      JSON.stringify({ ID: `costs-lock-${i}`, Operation: 'OperationTypeApply' });
    // Warm-up: the state row exists and the service token's row is kept.
    expect((await backend('LOCK', info(0))).status).toBe(200);
    expect((await backend('UNLOCK', info(0))).status).toBe(200);
    const before = await statements('before');
    for (let i = 1; i <= rounds; i++) {
      expect((await backend('LOCK', info(i))).status).toBe(200);
      expect((await backend('UNLOCK', info(i))).status).toBe(200);
    }
    const after = await statements('after');
    // The acquire and the holder's release are one autocommit statement each, audit row
    // included (LockRepository.acquireAtOnce / releaseAtOnce); authorization is decided from
    // the kept rules, the credential from the kept token row.
    expect(after.other - before.other).toBe(2 * rounds);
  });

  it("the S3 door's lock object of a terraform plan — PutObject, its read, DeleteObject — costs one statement each, replay record and audit row in them", async () => {
    const rounds = 5;
    const LOCK = `${KEY}.tflock`;
    const send = async (method: string, i: number, body?: Buffer) =>
      (
        await sendRaw(
          server.port,
          await signS3(server.port, creds, {
            method,
            key: LOCK,
            body,
            headers: {
              'amz-sdk-invocation-id': `costs-${method}-${i}`,
              ...(method === 'PUT' ? { 'if-none-match': '*' } : {}),
            },
          }),
        )
      ).status;
    const info = (i: number) =>
      Buffer.from(JSON.stringify({ ID: `costs-s3-lock-${i}`, Operation: 'OperationTypePlan' }));
    // Warm-up: the state row exists (the PUT above made it).
    expect(await send('PUT', 0, info(0))).toBe(200);
    expect(await send('DELETE', 0)).toBe(204);
    const before = await statements('before');
    for (let i = 1; i <= rounds; i++) {
      expect(await send('PUT', i, info(i))).toBe(200);
      expect(await send('GET', i)).toBe(200);
      expect(await send('DELETE', i)).toBe(204);
    }
    const after = await statements('after');
    // The acquire (LockRepository.acquireAtOnce) and the release of the lock ID this process
    // saw the PutObject take (releaseAtOnce; without that, a holder read first) are one
    // autocommit statement each, replay record and audit row included; the read is one.
    expect(after.other - before.other).toBe(3 * rounds);
  });

  it("terraform's workspace listing (ListObjectsV2, below Express) costs one statement", async () => {
    const list = async () =>
      (
        await sendRaw(
          server.port,
          await signS3(server.port, creds, {
            method: 'GET',
            key: '',
            query: { 'list-type': '2', 'max-keys': '1000', prefix: 'env:/' },
          }),
        )
      ).status;
    expect(await list()).toBe(200);
    const before = await statements('before');
    for (let i = 0; i < N; i++) expect(await list()).toBe(200);
    const after = await statements('after');
    expect(after.other - before.other).toBe(N);
  });

  describe.each(Object.entries(reads))('%s', (_name, read) => {
    it('verifies its credential once per request (in full or a kept verdict), never twice', async () => {
      await burst(read, 1);
      const before = await verifications();
      await burst(read);
      const counted = delta(await verifications(), before);
      const total = Object.values(counted).reduce((a, b) => a + b, 0);
      if (_name.includes('bootstrap')) {
        expect(counted).toEqual({}); // the bootstrap token is compared, not a token verified
      } else if (_name.startsWith('s3')) {
        expect(counted).toEqual({ 'session_token/reused': N });
      } else {
        expect(counted).toEqual({ 'api_token/reused': N }); // its row, kept since the warm-up
      }
      expect(total).toBeLessThanOrEqual(N);
    });
  });

  /** The server's log lines after `from` (its output's length then), once they have settled. */
  async function linesSince(from: number) {
    await sleep(300);
    return server
      .output()
      .slice(from)
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map(
        (l) =>
          JSON.parse(l) as {
            msg: string;
            req?: { id: string };
            audit?: { type: string; requestId: string };
          },
      );
  }

  it('a LOCK, a write and its UNLOCK through the HTTP backend log one line each, their event on it', async () => {
    const info = JSON.stringify({ ID: 'costs-lines', Operation: 'OperationTypeApply' });
    await sleep(300); // the audit batch of earlier requests logs nothing, but let it pass
    const from = server.output().length;
    const sent: { id: string; type: string }[] = [];
    for (const [method, body, type] of [
      ['LOCK', info, 'lock.acquire'],
      ['POST', tfState(40, 'lineage-costs', { lines: 1 }), 'state.write'],
      ['UNLOCK', info, 'lock.release'],
    ] as const) {
      const r = await fetch(
        `${server.url}/v1/backend/${UNIT}${method === 'POST' ? '?ID=costs-lines' : ''}`,
        { method, body, headers: { Authorization: basic } },
      );
      expect([method, r.status]).toEqual([method, 200]);
      await r.arrayBuffer();
      sent.push({ id: String(r.headers.get('x-request-id')), type });
    }
    const lines = await linesSince(from);
    expect(lines.map((l) => ({ msg: l.msg, id: l.req?.id, type: l.audit?.type }))).toEqual(
      sent.map((x) => ({ msg: 'request completed', id: x.id, type: x.type })),
    );
  });

  // Every use of the bootstrap token is a security event on a line of its own, on purpose
  // (test/e2e/startup.spec.ts): it is the credential of last resort, not Terraform's.
  const logged = Object.entries(reads).filter(([name]) => !name.includes('bootstrap'));
  describe.each(logged)('%s', (_name, read) => {
    it('logs exactly one line per request at the default level, with its request id and read', async () => {
      await burst(read, 1);
      await sleep(300); // the audit batch of earlier reads logs nothing, but let it pass
      const from = server.output().length;
      const ids: string[] = [];
      for (let i = 0; i < N; i++) {
        const r = await read();
        expect(r.status).toBe(200);
        ids.push(r.requestId);
      }
      const lines = await linesSince(from);
      expect(lines.map((l) => l.req?.id)).toEqual(ids);
      for (const [i, l] of lines.entries()) {
        expect(l.msg).toBe('request completed');
        // The request's state read is on its line, not on one of its own.
        expect(l.audit).toMatchObject({ type: 'state.read', requestId: ids[i] });
      }
    });
  });
});
