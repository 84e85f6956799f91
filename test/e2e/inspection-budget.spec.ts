/**
 * The server-wide bound on state bytes under inspection (STATEHOUSE_INSPECTION_MAX_BYTES):
 * while a write holds the budget, another that does not fit waits in the queue and goes in
 * when there is room — or, with no room in the queue, is refused at once on every door: 503
 * with `Retry-After` (JSON on the API and the HTTP backend, `SlowDown` on the S3 door; the TFE
 * door answers a JSON:API 429 with `Retry-After` and `X-RateLimit-Reset`), storing nothing.
 */
import { PutObjectCommand, S3Client, S3ServiceException } from '@aws-sdk/client-s3';
import { createHash } from 'node:crypto';
import { request } from 'node:http';
import { freshServerEnv } from '../support/database';
import { RunningServer, spawnServer } from '../support/server';

jest.setTimeout(180_000);

const KiB = 1024;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A valid state of about `bytes` bytes. */
const stateOf = (bytes: number, serial = 1): string => {
  const head = `{"version":4,"serial":${serial},"lineage":"budget","outputs":{"pad":{"value":"`;
  const tail = `","type":"string"}},"resources":[]}`;
  return head + 'x'.repeat(bytes - head.length - tail.length) + tail;
};

/**
 * A PUT of `body` whose first kilobyte is sent now and the rest only when `finish` is called:
 * it holds its share of the budget meanwhile.
 */
/** Requests left half-sent by a failing test: cut before the server is stopped. */
const open = new Set<{ destroy: () => void }>();

function slowPut(
  server: RunningServer,
  unit: string,
  body: string,
): { finish: () => Promise<number> } {
  const req = request(`${server.url}/v1/units/${encodeURIComponent(unit)}/state`, {
    method: 'PUT',
    headers: { ...server.auth, 'Content-Length': Buffer.byteLength(body) },
  });
  const answered = new Promise<number>((resolve, reject) => {
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
  });
  answered.catch(() => undefined); // a request cut by afterAll is no failure of its own
  req.write(body.slice(0, KiB));
  open.add(req);
  return {
    finish: () => {
      req.end(body.slice(KiB));
      return answered.finally(() => open.delete(req));
    },
  };
}

async function put(server: RunningServer, unit: string, body: string) {
  const r = await fetch(`${server.url}/v1/units/${encodeURIComponent(unit)}/state`, {
    method: 'PUT',
    headers: server.auth,
    body,
  });
  return { status: r.status, retryAfter: r.headers.get('retry-after'), json: await r.json() };
}

async function stateStatus(server: RunningServer, unit: string): Promise<number> {
  const r = await fetch(`${server.url}/v1/units/${encodeURIComponent(unit)}/state`, {
    headers: server.auth,
  });
  await r.arrayBuffer();
  return r.status;
}

/** A server with a 1 MiB budget (and largest state) for the tests of one describe block. */
function budgetServer(extra: Record<string, string> = {}): () => RunningServer {
  let server: RunningServer | undefined;
  let cleanup: (() => Promise<void>) | undefined;
  beforeAll(async () => {
    const env = await freshServerEnv();
    cleanup = env.cleanup;
    server = await spawnServer({
      ...env.env,
      STATEHOUSE_MAX_STATE_BYTES: '1MiB',
      STATEHOUSE_INSPECTION_MAX_BYTES: '1MiB',
      ...extra,
    });
  });
  afterAll(async () => {
    for (const req of open) req.destroy();
    open.clear();
    await server?.stop();
    await cleanup?.();
  });
  return () => server as RunningServer;
}

describe('inspection budget: nothing waits, nothing fits', () => {
  const current = budgetServer({ STATEHOUSE_INSPECTION_QUEUE: '0' });

  it('a write that does not fit beside one in progress is refused with 503 (TFE: 429) and Retry-After on every door, storing nothing', async () => {
    const server = current();
    const big = stateOf(600 * KiB);
    const holding = slowPut(server, 'budget/holder', big);
    await sleep(1500); // its headers are in: it holds 600 KiB of the 1 MiB

    const api = await put(server, 'budget/api', big);
    expect(api).toEqual({
      status: 503,
      retryAfter: '2',
      json: expect.objectContaining({
        code: 'slow_down',
        message: expect.stringContaining('STATEHOUSE_INSPECTION_MAX_BYTES'),
      }),
    });

    const backend = await fetch(`${server.url}/v1/backend/budget/backend`, {
      method: 'POST',
      headers: { Authorization: `Basic ${Buffer.from(`tf:${server.token}`).toString('base64')}` },
      body: big,
    });
    expect(backend.status).toBe(503);
    expect(backend.headers.get('retry-after')).toBe('2');
    expect(((await backend.json()) as { code: string }).code).toBe('slow_down');

    // The S3 door: an S3 client sees SlowDown (which SDKs retry; here it may not).
    const token = await fetch(`${server.url}/v1/auth/tokens`, {
      method: 'POST',
      headers: { ...server.auth, 'Content-Type': 'application/json' },
      body: JSON.stringify({ name: 'budget', subject: 'svc:budget' }),
    });
    expect(token.status).toBe(201);
    const creds = await fetch(`${server.url}/v1/auth/issue-s3-creds`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${((await token.json()) as { token: string }).token}` },
    });
    expect(creds.status).toBe(200);
    const c = (await creds.json()) as {
      AccessKeyId: string;
      SecretAccessKey: string;
      SessionToken: string;
    };
    const s3 = new S3Client({
      endpoint: `${server.url}/s3`,
      forcePathStyle: true,
      region: 'us-east-1',
      maxAttempts: 1,
      credentials: {
        accessKeyId: c.AccessKeyId,
        secretAccessKey: c.SecretAccessKey,
        sessionToken: c.SessionToken,
      },
    });
    const refused = await s3
      .send(
        new PutObjectCommand({
          Bucket: 'tfstate',
          Key: 'budget/s3/terraform.tfstate',
          Body: Buffer.from(big),
        }),
      )
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    s3.destroy();
    expect(refused).toBeInstanceOf(S3ServiceException);
    expect((refused as S3ServiceException).name).toBe('SlowDown');
    expect((refused as S3ServiceException).$metadata.httpStatusCode).toBe(503);

    // The TFE door: the upload of an announced state version answers a JSON:API 429 with
    // Retry-After and X-RateLimit-Reset, which go-tfe waits out and retries.
    const tfe = async (method: string, path: string, body?: unknown) => {
      const r = await fetch(`${server.url}/api/v2${path}`, {
        method,
        headers: { ...server.auth, 'Content-Type': 'application/vnd.api+json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return (await r.json()) as { data: { id: string; attributes: Record<string, string> } };
    };
    const ws = await tfe('POST', '/organizations/budget/workspaces', {
      data: { type: 'workspaces', attributes: { name: 'tfe' } },
    });
    await tfe('POST', `/workspaces/${ws.data.id}/actions/lock`, {});
    const announced = await tfe('POST', `/workspaces/${ws.data.id}/state-versions`, {
      data: {
        type: 'state-versions',
        attributes: {
          serial: 1,
          lineage: 'budget',
          md5: createHash('md5').update(big).digest('hex'),
        },
      },
    });
    const uploadUrl = new URL(announced.data.attributes['hosted-state-upload-url']);
    const upload = await fetch(`${server.url}${uploadUrl.pathname}${uploadUrl.search}`, {
      method: 'PUT',
      headers: { 'Content-Type': 'application/octet-stream' },
      body: big,
    });
    expect(upload.status).toBe(429);
    expect(upload.headers.get('retry-after')).toBe('2');
    expect(upload.headers.get('x-ratelimit-reset')).toBe('2');
    expect(((await upload.json()) as { errors: { status: string }[] }).errors[0].status).toBe(
      '429',
    );

    // Nothing was stored by the refused writes; the one holding the budget goes through.
    for (const unit of ['budget/api', 'budget/backend', 'budget/s3', 'budget/tfe']) {
      expect(await stateStatus(server, unit)).not.toBe(200);
    }
    expect(await holding.finish()).toBe(200);
    expect(await stateStatus(server, 'budget/holder')).toBe(200);
    // The refused upload left its URL good: go-tfe's retry goes in.
    const retried = await fetch(`${server.url}${uploadUrl.pathname}${uploadUrl.search}`, {
      method: 'PUT',
      headers: { 'Content-Type': 'application/octet-stream' },
      body: big,
    });
    expect(retried.status).toBe(200);
    expect(await stateStatus(server, 'budget/tfe')).toBe(200);

    // Room again: the same write now succeeds.
    expect((await put(server, 'budget/api', big)).status).toBe(200);
  });
});

describe('inspection budget: a write that does not fit waits its turn', () => {
  const current = budgetServer();

  it('goes in once the write ahead of it has finished', async () => {
    const server = current();
    const big = stateOf(600 * KiB);
    const holding = slowPut(server, 'queue/holder', big);
    await sleep(1500);
    let done = false;
    const waiting = put(server, 'queue/waiter', big).finally(() => (done = true));
    await sleep(1500);
    expect(done).toBe(false); // it waits (its body unread) while the first holds the budget
    expect(await holding.finish()).toBe(200);
    expect((await waiting).status).toBe(200);
    expect(await stateStatus(server, 'queue/waiter')).toBe(200);
  });
});
