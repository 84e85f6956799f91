/**
 * Authorization fails closed. A real server on real PostgreSQL, reached through a TCP proxy
 * the test cuts: with the database gone (connections refused) and with a database that hangs
 * (connections accepted, never answered), a request that was allowed a moment before — and
 * whose decision was cached — is answered 503 through every door (S3 `ServiceUnavailable`),
 * never 200, never 403 or 500, and a write stores nothing. When the database is back, the same
 * requests work again without a restart.
 *
 * The S3 door is the sharp case: its credentials and session token are verified without the
 * database. (Every operation also reads or writes the database itself, so a stale cached allow
 * would still end in a 503 here; that the cache is off while its LISTEN connection is down is
 * shown directly in test/db/rbac.spec.ts.)
 *
 * Only meaningful on PostgreSQL (the embedded database lives in the server's own process).
 */
import {
  GetObjectCommand,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
} from '@aws-sdk/client-s3';
import { freshServerEnv, ON_POSTGRES } from '../support/database';
import { RunningServer, spawnServer } from '../support/server';
import { startTcpProxy, TcpProxy } from '../support/tcp-proxy';

jest.setTimeout(120_000);

const describeOnPostgres = ON_POSTGRES ? describe : describe.skip;
const SUITE = 'RBAC fails closed when the database is down or hangs';
const NOT_APPLICABLE = `${SUITE} — needs PostgreSQL: run via scripts/with-postgres.sh`;
if (!ON_POSTGRES)
  console.warn(`rbac-fail-closed.spec.ts skipped (not applicable): ${NOT_APPLICABLE}`);

const UNIT = 'team/app';
const KEY = `${UNIT}/terraform.tfstate`;

function state(serial: number): string {
  return `${JSON.stringify(
    {
      version: 4,
      terraform_version: '1.11.4',
      serial,
      lineage: 'fail-closed',
      outputs: { n: { value: serial, type: 'number' } },
      resources: [],
      check_results: null,
    },
    null,
    2,
  )}\n`;
}

interface Creds {
  AccessKeyId: string;
  SecretAccessKey: string;
  SessionToken: string;
}

describeOnPostgres(ON_POSTGRES ? SUITE : NOT_APPLICABLE, () => {
  let server: RunningServer;
  let proxy: TcpProxy;
  let cleanup: (() => Promise<void>) | undefined;
  let writerToken: string;
  let s3: S3Client;

  const api = (token: string, method: string, path: string, body?: unknown) =>
    fetch(`${server.url}${path}`, {
      method,
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });

  /** Every door's read of the state, by the writer: each answer's status (and S3 code). */
  async function readThroughEachDoor(): Promise<Record<string, string>> {
    const basic = `Basic ${Buffer.from(`ci:${writerToken}`).toString('base64')}`;
    const http = await fetch(`${server.url}/v1/backend/${UNIT}`, {
      headers: { Authorization: basic },
    });
    const mgmt = await api(writerToken, 'GET', `/v1/units/${encodeURIComponent(UNIT)}/state`);
    return {
      s3: await s3Status(() => s3.send(new GetObjectCommand({ Bucket: 'tfstate', Key: KEY }))),
      http: String(http.status),
      api: String(mgmt.status),
    };
  }

  async function s3Status(op: () => Promise<unknown>): Promise<string> {
    try {
      await op();
      return '200';
    } catch (e) {
      if (e instanceof S3ServiceException) return `${e.$metadata.httpStatusCode} ${e.name}`;
      throw e;
    }
  }

  async function versionCount(): Promise<number> {
    const r = await api(
      server.token,
      'GET',
      `/v1/units/${encodeURIComponent(UNIT)}/versions?workspace=default`,
    );
    expect(r.status).toBe(200);
    return ((await r.json()) as { items: unknown[] }).items.length;
  }

  async function waitFor(what: string, check: () => Promise<boolean>, ms: number): Promise<void> {
    const deadline = Date.now() + ms;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  const ALL_OK = { s3: '200', http: '200', api: '200' };
  const ALL_503 = { s3: '503 ServiceUnavailable', http: '503', api: '503' };

  beforeAll(async () => {
    const fresh = await freshServerEnv();
    cleanup = fresh.cleanup;
    const db = new URL(fresh.env.DATABASE_URL);
    proxy = await startTcpProxy({ host: db.hostname, port: Number(db.port) });
    db.hostname = '127.0.0.1';
    db.port = String(proxy.port);
    server = await spawnServer({ ...fresh.env, DATABASE_URL: db.toString() });

    const token = async (name: string): Promise<string> => {
      const r = await api(server.token, 'POST', '/v1/auth/tokens', {
        name,
        subject: `svc:${name}`,
      });
      expect(r.status).toBe(201);
      return ((await r.json()) as { token: string }).token;
    };
    const admin = await token('admin');
    writerToken = await token('writer');
    expect(
      (await api(server.token, 'POST', '/v1/rbac/init', { admin: { subject: 'svc:admin' } }))
        .status,
    ).toBe(201);
    for (const [path, body] of [
      [
        '/v1/rbac/permissions',
        {
          name: 'team-rw',
          rules: [
            {
              effect: 'allow',
              actions: ['unit.create', 'unit.read', 'unit.write', 'unit.lock'],
              resources: ['team/**'],
            },
          ],
        },
      ],
      ['/v1/rbac/roles', { name: 'team-rw', permissions: ['team-rw'] }],
      ['/v1/rbac/assignments', { role: 'team-rw', subject: 'svc:writer' }],
    ] as const) {
      expect((await api(admin, 'POST', path, body)).status).toBe(201);
    }
    const creds = (await (
      await api(writerToken, 'POST', '/v1/auth/issue-s3-creds')
    ).json()) as Creds;
    s3 = new S3Client({
      endpoint: `${server.url}/s3`,
      forcePathStyle: true,
      region: 'us-east-1',
      maxAttempts: 1, // the SDK would retry a 503: each answer is looked at as it is
      credentials: {
        accessKeyId: creds.AccessKeyId,
        secretAccessKey: creds.SecretAccessKey,
        sessionToken: creds.SessionToken,
      },
    });
    await s3.send(
      new PutObjectCommand({
        Bucket: 'tfstate',
        Key: KEY,
        Body: state(1),
        ContentType: 'application/json',
      }),
    );
  });

  afterAll(async () => {
    s3?.destroy();
    proxy?.up();
    await server?.stop();
    await proxy?.close();
    await cleanup?.();
  });

  it('with the database up, the writer reads through every door (and the decisions are cached)', async () => {
    expect(await readThroughEachDoor()).toEqual(ALL_OK);
    expect(await readThroughEachDoor()).toEqual(ALL_OK);
  });

  it('database gone: 503 through every door, never an allow; a write stores nothing', async () => {
    proxy.down('refuse');
    await waitFor(
      'the server to notice',
      () => Promise.resolve(/notifications lost/.test(server.output())),
      10_000,
    );
    expect(await readThroughEachDoor()).toEqual(ALL_503);
    expect(
      await s3Status(() =>
        s3.send(new PutObjectCommand({ Bucket: 'tfstate', Key: KEY, Body: state(2) })),
      ),
    ).toBe('503 ServiceUnavailable');
    // Readiness says so too.
    expect((await fetch(`${server.url}/readyz`)).status).toBe(503);

    proxy.up();
    await waitFor(
      'the doors to answer again',
      async () => JSON.stringify(await readThroughEachDoor()) === JSON.stringify(ALL_OK),
      30_000,
    );
    expect(await versionCount()).toBe(1); // the refused write left nothing
  });

  it('database hanging (accepts, never answers): 503 after the connection timeout, never an allow', async () => {
    proxy.down('silent');
    const started = Date.now();
    const s3Answer = await s3Status(() =>
      s3.send(new GetObjectCommand({ Bucket: 'tfstate', Key: KEY })),
    );
    const waited = Date.now() - started;
    expect(s3Answer).toBe('503 ServiceUnavailable');
    // The pool's connection timeout (10 s) bounds the wait; the answer is not a hang.
    expect(waited).toBeLessThan(30_000);
    const mgmt = await api(writerToken, 'GET', `/v1/units/${encodeURIComponent(UNIT)}/state`);
    expect(mgmt.status).toBe(503);

    proxy.up();
    await waitFor(
      'the doors to answer again',
      async () => JSON.stringify(await readThroughEachDoor()) === JSON.stringify(ALL_OK),
      60_000,
    );
  });

  it('what the log said: the decisions were not taken from a cache while the listener was down', () => {
    const out = server.output();
    expect(out).toMatch(/RBAC change notifications lost/);
    expect(out).not.toContain(writerToken);
  });
});
