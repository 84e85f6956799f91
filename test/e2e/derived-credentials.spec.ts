/**
 * Credentials never outlive the credential that minted them, through the real server process,
 * the AWS SDK on the `/s3` door and a real OpenID provider (the `oidc-provider` package in its
 * own process): S3 credentials minted with an API token stop within a second of its revocation
 * — on one server, and on the other of two replicas on PostgreSQL (the revocation delay is
 * measured by polling every 10 ms) —; a login's access token and its S3 credentials stop at
 * logout; expiry never exceeds the parent's; bootstrap-admin mints no S3 credentials.
 */
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { ON_POSTGRES } from '../support/database';
import { startOidcProvider, TestOidcProvider } from '../support/oidc';
import { s3ClientFor } from '../support/s3-client';
import { callJson, onFreshReplicas, onFreshServer, RunningServer } from '../support/server';

jest.setTimeout(180_000);

const CLIENT_ID = 'statehouse-cli';
const POLL_MS = 10;

interface Creds {
  AccessKeyId: string;
  SecretAccessKey: string;
  SessionToken: string;
  Expiration: string;
}

function api(
  s: RunningServer,
  method: string,
  path: string,
  bearer: string,
  body?: unknown,
): Promise<{ status: number; json: Record<string, unknown> }> {
  return callJson(s, method, path, bearer, body);
}

async function apiToken(
  s: RunningServer,
  subject: string,
  expiresAt?: string,
): Promise<{ id: string; token: string; expiresAt: string | null }> {
  const r = await api(s, 'POST', '/v1/auth/tokens', s.token, {
    name: `derived ${subject}`,
    subject,
    ...(expiresAt ? { expiresAt } : {}),
  });
  expect(r.status).toBe(201);
  return r.json as unknown as { id: string; token: string; expiresAt: string | null };
}

async function mint(s: RunningServer, bearer: string): Promise<Creds> {
  const r = await api(s, 'POST', '/v1/auth/issue-s3-creds', bearer);
  expect(r.status).toBe(200);
  return r.json as unknown as Creds;
}

/** The status a ListObjectsV2 through `s` answers with `creds` (one attempt, no retries). */
async function s3Status(s: RunningServer, creds: Creds): Promise<number> {
  const client = s3ClientFor(s, creds);
  try {
    const out = await client.send(new ListObjectsV2Command({ Bucket: 'tfstate' }));
    return out.$metadata.httpStatusCode ?? 0;
  } catch (e) {
    const err = e as { $metadata?: { httpStatusCode?: number }; name?: string };
    if (err.$metadata?.httpStatusCode === 403) expect(err.name).toBe('AccessDenied');
    return err.$metadata?.httpStatusCode ?? -1;
  } finally {
    client.destroy();
  }
}

/** Milliseconds until `refused()` says yes, polling every 10 ms (Infinity after 5 s). */
async function delayUntil(refused: () => Promise<boolean>): Promise<number> {
  const t0 = Date.now();
  while (!(await refused())) {
    if (Date.now() - t0 > 5000) return Infinity;
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
  return Date.now() - t0;
}

const claims = (jwt: string): { exp: number; parent: string } =>
  JSON.parse(Buffer.from(jwt.split('.')[1], 'base64url').toString()) as {
    exp: number;
    parent: string;
  };

async function login(
  s: RunningServer,
  provider: TestOidcProvider,
  sub: string,
): Promise<{ access_token: string; refresh_token: string; expires_in: number }> {
  const idToken = await provider.mint({
    sub,
    aud: CLIENT_ID,
    email: `${sub}@example.com`,
    email_verified: true,
    groups: ['platform'],
  });
  const r = await fetch(`${s.url}/v1/auth/exchange`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ id_token: idToken }),
  });
  expect(r.status).toBe(200);
  return (await r.json()) as { access_token: string; refresh_token: string; expires_in: number };
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

let provider: TestOidcProvider;
beforeAll(async () => {
  provider = await startOidcProvider();
});
afterAll(async () => {
  await provider?.stop();
});

describe('one server', () => {
  let server: RunningServer;

  onFreshServer(
    (started) => (server = started),
    () => ({
      STATEHOUSE_OIDC_ISSUER: provider.issuer,
      STATEHOUSE_OIDC_CLIENT_ID: CLIENT_ID,
      STATEHOUSE_TOKENS_REFRESH_TTL: '120s',
    }),
  );

  it('S3 credentials minted with an API token are refused within a second of revoking it', async () => {
    const t = await apiToken(server, 'svc:derived-one');
    const creds = await mint(server, t.token);
    expect(claims(creds.SessionToken).parent).toBe(`api_token:${t.id}`);
    expect(await s3Status(server, creds)).toBe(200);
    expect(await s3Status(server, creds)).toBe(200);
    expect((await api(server, 'DELETE', `/v1/auth/tokens/${t.id}`, server.token)).status).toBe(204);
    const ms = await delayUntil(async () => (await s3Status(server, creds)) === 403);
    expect(ms).toBeLessThan(1000);
    console.log(`derived credentials, one server: refused ${ms} ms after the revocation`);
  });

  it('a login’s access token and the S3 credentials minted with it stop at logout', async () => {
    const s = await login(server, provider, 'leaving');
    const creds = await mint(server, s.access_token);
    expect(claims(creds.SessionToken).parent).toMatch(/^refresh_family:/);
    expect(await s3Status(server, creds)).toBe(200);
    expect((await api(server, 'GET', '/v1/auth/me', s.access_token)).status).toBe(200);
    const out = await fetch(`${server.url}/v1/auth/logout`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ refresh_token: s.refresh_token }),
    });
    expect(out.status).toBe(204);
    const me = await api(server, 'GET', '/v1/auth/me', s.access_token);
    expect(me.status).toBe(401);
    expect(me.json.message).toMatch(/login session it belongs to has ended .*\(revoked\)/);
    expect(await s3Status(server, creds)).toBe(403);
  });

  it('no derived credential outlives its parent', async () => {
    // S3 credentials (15 min) from an API token that ends in 3 minutes.
    const end = new Date(Date.now() + 180_000).toISOString();
    const t = await apiToken(server, 'svc:derived-short', end);
    const creds = await mint(server, t.token);
    expect(Date.parse(creds.Expiration)).toBeLessThanOrEqual(Date.parse(end));
    // The session lasts 120 s (STATEHOUSE_TOKENS_REFRESH_TTL): its access token (1 h) does not
    // last longer, nor do S3 credentials minted with that token.
    const before = Date.now() / 1000;
    const s = await login(server, provider, 'brief');
    expect(s.expires_in).toBeLessThanOrEqual(120);
    expect(claims(s.access_token).exp).toBeLessThanOrEqual(before + 121);
    const fromAccess = await mint(server, s.access_token);
    expect(claims(fromAccess.SessionToken).exp).toBeLessThanOrEqual(claims(s.access_token).exp);
    expect(Date.parse(fromAccess.Expiration) / 1000).toBeLessThanOrEqual(
      claims(s.access_token).exp,
    );
  });

  it('bootstrap-admin mints no S3 credentials (403 saying to create an API token)', async () => {
    const r = await api(server, 'POST', '/v1/auth/issue-s3-creds', server.token);
    expect(r.status).toBe(403);
    expect(r.json).toMatchObject({ code: 'forbidden' });
    expect(r.json.message).toMatch(/bootstrap-admin is the break-glass account/);
    expect(r.json.message).toMatch(/create an API token/);
    // It keeps the management API: it may create that token.
    const t = await apiToken(server, 'svc:after-bootstrap');
    expect(await s3Status(server, await mint(server, t.token))).toBe(200);
  });
});

const describeOnPostgres = ON_POSTGRES ? describe : describe.skip;
const REPLICAS = 'two replicas on one PostgreSQL database: revocation reaches the other';
const REPLICAS_NA = `${REPLICAS} — needs PostgreSQL: run via scripts/with-postgres.sh`;
if (!ON_POSTGRES)
  console.warn(`derived-credentials.spec.ts: skipped (not applicable): ${REPLICAS_NA}`);

describeOnPostgres(ON_POSTGRES ? REPLICAS : REPLICAS_NA, () => {
  let a: RunningServer;
  let b: RunningServer;

  onFreshReplicas(
    () => ({ STATEHOUSE_OIDC_ISSUER: provider.issuer, STATEHOUSE_OIDC_CLIENT_ID: CLIENT_ID }),
    (first, second) => ([a, b] = [first, second]),
  );

  it('an API token revoked on A: its S3 credentials, just accepted by B, are refused by B within a second', async () => {
    const delays: number[] = [];
    for (let round = 0; round < 10; round++) {
      const t = await apiToken(a, `svc:replica-${round}`);
      const creds = await mint(a, t.token);
      expect(await s3Status(b, creds)).toBe(200);
      expect(await s3Status(b, creds)).toBe(200); // B has the answer cached
      expect((await api(a, 'DELETE', `/v1/auth/tokens/${t.id}`, a.token)).status).toBe(204);
      delays.push(await delayUntil(async () => (await s3Status(b, creds)) === 403));
    }
    for (const d of delays) expect(d).toBeLessThan(1000);
    console.log(
      `derived credentials, two replicas: B refused S3 credentials ${delays.join(', ')} ms after A revoked their API token (median ${median(delays)} ms, max ${Math.max(...delays)} ms; polling every ${POLL_MS} ms)`,
    );
  });

  it('a logout on A: B refuses the session’s access token within a second', async () => {
    const s = await login(a, provider, 'replica-leaver');
    expect((await api(b, 'GET', '/v1/auth/me', s.access_token)).status).toBe(200);
    const out = await fetch(`${a.url}/v1/auth/logout`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ refresh_token: s.refresh_token }),
    });
    expect(out.status).toBe(204);
    const ms = await delayUntil(
      async () => (await api(b, 'GET', '/v1/auth/me', s.access_token)).status === 401,
    );
    expect(ms).toBeLessThan(1000);
    console.log(
      `derived credentials, two replicas: B refused the access token ${ms} ms after logout on A`,
    );
  });
});
