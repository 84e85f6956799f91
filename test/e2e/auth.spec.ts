/**
 * Identity through the real server process and a real OpenID provider (the `oidc-provider`
 * package in its own process): every bad input of the identity issue is a 401 JSON error that
 * names the failed check and never echoes the token, and is logged (without the secret); OIDC
 * exchange, refresh rotation and reuse, API tokens, JWKS, restarts, replicas, rate limiting and
 * STATEHOUSE_AUTH_DISABLE.
 */
import { generateKeyPairSync, KeyObject, randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeProtectedHeader, importJWK, JWK, jwtVerify, SignJWT } from 'jose';
import { freshServerEnv, ON_POSTGRES } from '../support/database';
import { startOidcProvider, TestOidcProvider } from '../support/oidc';
import { onFreshReplicas, onFreshServer, RunningServer, spawnServer } from '../support/server';
import { tfStateText } from '../support/tf-state';

jest.setTimeout(180_000);

const PUBLIC_URL = 'http://statehouse.e2e.test';
const KID = 'e2e-key-1';
const CLIENT_ID = 'statehouse-cli';

interface Reply {
  status: number;
  headers: Headers;
  text: string;
  json: Record<string, unknown> & { message?: string; code?: string };
  requestId: string;
}

/** One request; the request id is chosen here so log lines can be matched to it. */
async function call(
  base: string,
  path: string,
  opts: {
    method?: string;
    bearer?: string;
    basicPassword?: string;
    body?: unknown;
    rawBody?: string;
  } = {},
): Promise<Reply> {
  const requestId = `auth-e2e-${randomUUID()}`;
  const headers: Record<string, string> = { 'X-Request-Id': requestId };
  if (opts.bearer !== undefined) headers.Authorization = `Bearer ${opts.bearer}`;
  if (opts.basicPassword !== undefined) {
    headers.Authorization = `Basic ${Buffer.from(`terraform:${opts.basicPassword}`).toString('base64')}`;
  }
  let body: string | undefined;
  if (opts.body !== undefined) {
    headers['Content-Type'] = 'application/json';
    body = JSON.stringify(opts.body);
  } else if (opts.rawBody !== undefined) {
    body = opts.rawBody;
  }
  const res = await fetch(`${base}${path}`, {
    method: opts.method ?? (body === undefined ? 'GET' : 'POST'),
    headers,
    body,
  });
  const text = await res.text();
  let json: Reply['json'] = {};
  try {
    json = JSON.parse(text) as Reply['json'];
  } catch {
    // not JSON; the assertions say so
  }
  return { status: res.status, headers: res.headers, text, json, requestId };
}

/** A 401 JSON error whose message names the check and holds no part of the secret. */
function expect401(r: Reply, presented: string, check: RegExp): void {
  expect({ status: r.status, message: r.json.message }).toEqual({
    status: 401,
    message: expect.stringMatching(check),
  });
  expect(r.headers.get('content-type')).toMatch(/^application\/json/);
  expect(r.json.code).toBe('unauthenticated');
  expect(r.json.requestId).toBe(r.requestId);
  expectNoSecret(r.text, presented);
}

/** Neither the secret nor any sizeable part of it (a JWT segment) appears in `text`. */
function expectNoSecret(text: string, secret: string): void {
  expect(text).not.toContain(secret);
  for (const part of secret.split('.')) {
    if (part.length >= 16) expect(text).not.toContain(part);
  }
}

/** The JSON log lines of a server. */
function logLines(server: RunningServer): Record<string, unknown>[] {
  return server
    .output()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => {
      try {
        return JSON.parse(l) as Record<string, unknown>;
      } catch {
        return {};
      }
    });
}

const reqIdOf = (line: Record<string, unknown>): unknown =>
  (line.req as { id?: unknown } | undefined)?.id;

/** Waits until the server has logged the completion of request `id` (logs are asynchronous). */
async function waitForRequestLog(server: RunningServer, id: string): Promise<void> {
  const deadline = Date.now() + 5000;
  while (Date.now() < deadline) {
    if (logLines(server).some((l) => reqIdOf(l) === id && l.msg === 'request completed')) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`no "request completed" log line for ${id}`);
}

interface AuditLine {
  type: string;
  outcome: string;
  requestId?: string;
  details?: Record<string, unknown>;
}
const auditEvents = (server: RunningServer): AuditLine[] =>
  logLines(server)
    .map((l) => l.audit as AuditLine | undefined)
    .filter((a): a is AuditLine => a !== undefined);

const b64 = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url');
const now = (): number => Math.floor(Date.now() / 1000);

/** An Ed25519 key in a PKCS#8 file, configured as the server's signing key. */
function signingKeyFile(): { file: string; privateKey: KeyObject; publicKey: KeyObject } {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const file = join(mkdtempSync(join(tmpdir(), 'statehouse-e2e-key-')), 'signing.pem');
  writeFileSync(file, privateKey.export({ type: 'pkcs8', format: 'pem' }));
  return { file, privateKey, publicKey };
}

function oidcEnv(provider: TestOidcProvider): Record<string, string> {
  return { STATEHOUSE_OIDC_ISSUER: provider.issuer, STATEHOUSE_OIDC_CLIENT_ID: CLIENT_ID };
}

/** An ID token for `sub` from the provider, with any claims overridden. */
function idToken(
  provider: TestOidcProvider,
  sub: string,
  claims: Record<string, unknown> = {},
  header?: Record<string, unknown>,
): Promise<string> {
  return provider.mint(
    {
      sub,
      aud: CLIENT_ID,
      email: `${sub}@example.com`,
      email_verified: true,
      groups: ['platform', `${sub}-group`],
      ...claims,
    },
    header,
  );
}

async function login(
  server: RunningServer,
  provider: TestOidcProvider,
  sub: string,
  claims: Record<string, unknown> = {},
): Promise<{ access_token: string; refresh_token: string; expires_in: number }> {
  const r = await call(server.url, '/v1/auth/exchange', {
    body: { id_token: await idToken(provider, sub, claims) },
  });
  expect({ status: r.status, body: r.json }).toMatchObject({ status: 200 });
  return r.json as unknown as { access_token: string; refresh_token: string; expires_in: number };
}

function tfState(serial: number): string {
  return tfStateText({ serial, lineage: 'auth-e2e-lineage' });
}

let provider: TestOidcProvider;
let otherProvider: TestOidcProvider;

beforeAll(async () => {
  [provider, otherProvider] = await Promise.all([startOidcProvider(), startOidcProvider()]);
});
afterAll(async () => {
  await Promise.all([provider?.stop(), otherProvider?.stop()]);
});

describe('bad input on the API: 401 naming the check, never the token, and logged', () => {
  let server: RunningServer;
  let cleanup: () => Promise<void>;
  const key = signingKeyFile();
  /** Every secret presented to this server: none may ever appear in its output. */
  const presented: string[] = [];
  /** Request ids of refused authentications, with the check each must be logged with. */
  const refusals: { requestId: string; check: RegExp }[] = [];

  /** A token signed with the server's real key, like the ones it issues, with overrides. */
  async function serverToken(
    spec: {
      claims?: Record<string, unknown>;
      header?: Record<string, unknown>;
      key?: KeyObject;
    } = {},
  ): Promise<string> {
    const t = now();
    return new SignJWT({
      iss: PUBLIC_URL,
      sub: 'user:mallory',
      aud: ['api'],
      iat: t,
      exp: t + 600,
      jti: randomUUID(),
      parent: `refresh_family:${randomUUID()}`, // the login session it belongs to
      ...spec.claims,
    })
      .setProtectedHeader({ alg: 'EdDSA', kid: KID, typ: 'JWT', ...spec.header })
      .sign(spec.key ?? key.privateKey);
  }

  /** Presents `token` as a bearer on /v1/auth/me and checks the refusal. */
  async function refusedBearer(token: string, check: RegExp, path = '/v1/auth/me') {
    presented.push(token);
    const r = await call(server.url, path, { bearer: token });
    expect401(r, token, check);
    refusals.push({ requestId: r.requestId, check });
    return r;
  }

  beforeAll(async () => {
    const fresh = await freshServerEnv();
    cleanup = fresh.cleanup;
    server = await spawnServer({
      ...fresh.env,
      ...oidcEnv(provider),
      STATEHOUSE_PUBLIC_URL: PUBLIC_URL,
      STATEHOUSE_TOKENS_PRIVATE_KEY_FILE: key.file,
      STATEHOUSE_TOKENS_KID: KID,
      STATEHOUSE_LOG_LEVEL: 'debug',
      STATEHOUSE_AUTH_RATE_LIMIT: '100000',
    });
  });
  afterAll(async () => {
    await server?.stop();
    await cleanup?.();
  });

  it('control: a token minted like the bad ones but valid is accepted', async () => {
    const r = await call(server.url, '/v1/auth/me', { bearer: await serverToken() });
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ subject: 'user:mallory', via: 'access-token' });
  });

  it('an expired access token (expired)', async () => {
    const t = now();
    await refusedBearer(
      await serverToken({ claims: { iat: t - 7200, exp: t - 120 } }),
      /\(expired\)/,
    );
  });

  it('a not-yet-valid access token (not_yet_valid)', async () => {
    await refusedBearer(await serverToken({ claims: { nbf: now() + 300 } }), /\(not_yet_valid\)/);
  });

  it('an access token from another issuer (wrong_issuer)', async () => {
    await refusedBearer(
      await serverToken({ claims: { iss: 'http://evil.example.test' } }),
      /\(wrong_issuer\)/,
    );
  });

  it('an access token naming no login session (missing_claim)', async () => {
    await refusedBearer(
      await serverToken({ claims: { parent: undefined } }),
      /names no login session .*\(missing_claim\)/,
    );
    await refusedBearer(
      await serverToken({ claims: { parent: `api_token:${randomUUID()}` } }),
      /\(missing_claim\)/,
    );
  });

  it('the server’s own s3 SessionToken used on the API (wrong_audience)', async () => {
    const svc = await call(server.url, '/v1/auth/tokens', {
      bearer: server.token,
      body: { name: 'mints-s3', subject: 'svc:mints-s3' },
    });
    expect(svc.status).toBe(201);
    presented.push(svc.json.token as string);
    const creds = await call(server.url, '/v1/auth/issue-s3-creds', {
      method: 'POST',
      bearer: svc.json.token as string,
    });
    expect(creds.status).toBe(200);
    const sessionToken = creds.json.SessionToken as string;
    expect(decodeProtectedHeader(sessionToken).kid).toBe(KID);
    presented.push(creds.json.SecretAccessKey as string);
    await refusedBearer(sessionToken, /\(wrong_audience\)/);
    // …nor as the basic-auth password of the HTTP backend.
    const r = await call(server.url, '/v1/backend/auth-e2e/s3-token', {
      basicPassword: sessionToken,
    });
    expect401(r, sessionToken, /\(wrong_audience\)/);
  });

  it('an access token for another audience (wrong_audience)', async () => {
    await refusedBearer(await serverToken({ claims: { aud: [CLIENT_ID] } }), /\(wrong_audience\)/);
  });

  it('an unsigned token, alg "none" (bad_algorithm)', async () => {
    const t = now();
    const none = `${b64({ alg: 'none', kid: KID, typ: 'JWT' })}.${b64({
      iss: PUBLIC_URL,
      sub: 'bootstrap-admin',
      aud: ['api'],
      iat: t,
      exp: t + 600,
      jti: randomUUID(),
    })}.`;
    await refusedBearer(none, /\(bad_algorithm\)/);
  });

  it('an HS256 token keyed with the server’s published public key (bad_algorithm)', async () => {
    const jwks = await call(server.url, '/.well-known/jwks.json');
    const jwk = (jwks.json.keys as JWK[]).find((k) => k.kid === KID) as JWK;
    const t = now();
    const forged = await new SignJWT({ aud: ['api'], jti: randomUUID() })
      .setProtectedHeader({ alg: 'HS256', kid: KID, typ: 'JWT' })
      .setIssuer(PUBLIC_URL)
      .setSubject('bootstrap-admin')
      .setIssuedAt(t)
      .setExpirationTime(t + 600)
      .sign(Buffer.from(jwk.x as string, 'base64url'));
    await refusedBearer(forged, /\(bad_algorithm\)/);
  });

  it('a token signed by a key of an unknown kid (unknown_key)', async () => {
    const stranger = generateKeyPairSync('ed25519').privateKey;
    await refusedBearer(
      await serverToken({ key: stranger, header: { kid: 'not-a-statehouse-key' } }),
      /\(unknown_key\)/,
    );
  });

  it('a token signed by another key that claims the server’s kid (bad_signature)', async () => {
    const stranger = generateKeyPairSync('ed25519').privateKey;
    await refusedBearer(await serverToken({ key: stranger }), /\(bad_signature\)/);
  });

  it('a tampered payload (bad_signature)', async () => {
    const [h, p, s] = (await serverToken()).split('.');
    const claims = JSON.parse(Buffer.from(p, 'base64url').toString()) as Record<string, unknown>;
    await refusedBearer(
      `${h}.${b64({ ...claims, sub: 'bootstrap-admin' })}.${s}`,
      /\(bad_signature\)/,
    );
  });

  it('a tampered signature (bad_signature)', async () => {
    const [h, p, s] = (await serverToken()).split('.');
    const sig = Buffer.from(s, 'base64url');
    sig[10] ^= 0x40;
    await refusedBearer(`${h}.${p}.${sig.toString('base64url')}`, /\(bad_signature\)/);
  });

  it('garbage shaped like a JWT (malformed)', async () => {
    await refusedBearer('garbage0garbage.garbage1garbage.garbage2garbage', /\(malformed\)/);
  });

  it('garbage of no known kind (the token is not valid)', async () => {
    await refusedBearer('completely-unknown-credential-0123456789', /not valid/);
  });

  it('a token without a subject (missing_claim)', async () => {
    const t = now();
    const noSub = await new SignJWT({ iss: PUBLIC_URL, aud: ['api'], jti: randomUUID() })
      .setProtectedHeader({ alg: 'EdDSA', kid: KID })
      .setIssuedAt(t)
      .setExpirationTime(t + 600)
      .sign(key.privateKey);
    await refusedBearer(noSub, /\(missing_claim\)/);
  });

  it('an API token used after it was revoked', async () => {
    const created = await call(server.url, '/v1/auth/tokens', {
      bearer: server.token,
      body: { name: 'revoke-me', subject: 'svc:revoke-me' },
    });
    expect(created.status).toBe(201);
    const secret = created.json.token as string;
    presented.push(secret);
    expect((await call(server.url, '/v1/auth/me', { bearer: secret })).status).toBe(200);
    const del = await call(server.url, `/v1/auth/tokens/${created.json.id as string}`, {
      method: 'DELETE',
      bearer: server.token,
    });
    expect(del.status).toBe(204);
    await refusedBearer(secret, /revoked/);
    const basic = await call(server.url, '/v1/backend/auth-e2e/revoked', {
      basicPassword: secret,
    });
    expect401(basic, secret, /revoked/);
  });

  it('a refresh token reused: 401, and the whole family is revoked', async () => {
    const first = await login(server, provider, 'reuser');
    presented.push(first.refresh_token, first.access_token);
    const second = await call(server.url, '/v1/auth/token', {
      body: { refresh_token: first.refresh_token },
    });
    expect(second.status).toBe(200);
    expect(second.json).toMatchObject({ token_type: 'Bearer', expires_in: 3600 });
    const next = second.json.refresh_token as string;
    presented.push(next, second.json.access_token as string);
    expect(next).not.toBe(first.refresh_token);

    const reuse = await call(server.url, '/v1/auth/token', {
      body: { refresh_token: first.refresh_token },
    });
    expect401(reuse, first.refresh_token, /already used/);
    refusals.push({ requestId: reuse.requestId, check: /./ });

    const revoked = await call(server.url, '/v1/auth/token', { body: { refresh_token: next } });
    expect401(revoked, next, /revoked/);
    refusals.push({ requestId: revoked.requestId, check: /revoked/ });
    expect(
      auditEvents(server).some(
        (a) => a.type === 'auth.refresh_reuse' && a.requestId === reuse.requestId,
      ),
    ).toBe(true);
  });

  it('logout ends the session: its refresh token is refused afterwards', async () => {
    const s = await login(server, provider, 'leaver');
    presented.push(s.refresh_token, s.access_token);
    const out = await call(server.url, '/v1/auth/logout', {
      body: { refresh_token: s.refresh_token },
    });
    expect(out.status).toBe(204);
    const r = await call(server.url, '/v1/auth/token', {
      body: { refresh_token: s.refresh_token },
    });
    expect401(r, s.refresh_token, /revoked/);
    refusals.push({ requestId: r.requestId, check: /revoked/ });
  });

  describe('ID tokens at /v1/auth/exchange', () => {
    async function refusedIdToken(idTok: string, check: RegExp, nonce?: string) {
      presented.push(idTok);
      const r = await call(server.url, '/v1/auth/exchange', {
        body: nonce === undefined ? { id_token: idTok } : { id_token: idTok, nonce },
      });
      expect401(r, idTok, check);
      refusals.push({ requestId: r.requestId, check });
      return r;
    }

    it('a valid ID token is exchanged; email kept (verified) and groups carried', async () => {
      const idTok = await idToken(provider, 'alice', { groups: ['platform', 'ops'] });
      presented.push(idTok);
      const r = await call(server.url, '/v1/auth/exchange', { body: { id_token: idTok } });
      expect(r.status).toBe(200);
      expect(r.json).toMatchObject({ token_type: 'Bearer', expires_in: 3600 });
      expect(r.json.refresh_token).toMatch(/^shr_/);
      const access = r.json.access_token as string;
      presented.push(access, r.json.refresh_token as string);
      const me = await call(server.url, '/v1/auth/me', { bearer: access });
      expect(me.json).toEqual({
        subject: 'user:alice',
        kind: 'user',
        via: 'access-token',
        email: 'alice@example.com',
        groups: ['platform', 'ops'],
      });
    });

    it.each([
      ['false', false],
      ['absent', undefined],
      ['the string "true"', 'true'],
    ])('the email is dropped when email_verified is %s', async (_what, verified) => {
      const s = await login(server, provider, 'unverified-bob', { email_verified: verified });
      presented.push(s.access_token, s.refresh_token);
      const me = await call(server.url, '/v1/auth/me', { bearer: s.access_token });
      expect(me.status).toBe(200);
      expect(me.json.subject).toBe('user:unverified-bob');
      expect(me.json).not.toHaveProperty('email');
      expect(me.json.groups).toEqual(['platform', 'unverified-bob-group']);
    });

    it('the nonce is checked when the client sends one, and a matching one passes', async () => {
      const idTok = await idToken(provider, 'noncer', { nonce: 'n-123' });
      presented.push(idTok);
      const ok = await call(server.url, '/v1/auth/exchange', {
        body: { id_token: idTok, nonce: 'n-123' },
      });
      expect(ok.status).toBe(200);
      presented.push(ok.json.access_token as string, ok.json.refresh_token as string);
    });

    it('an ID token with a wrong nonce', async () => {
      await refusedIdToken(
        await idToken(provider, 'alice', { nonce: 'nonce-of-another-login' }),
        /nonce/,
        'the-nonce-this-login-sent',
      );
    });

    it('an ID token without a nonce when the client sent one', async () => {
      await refusedIdToken(await idToken(provider, 'alice'), /nonce/, 'the-nonce-this-login-sent');
    });

    it('an ID token for another client (aud)', async () => {
      await refusedIdToken(await idToken(provider, 'alice', { aud: 'other-client' }), /\(aud\)/);
    });

    it('an ID token naming another issuer (iss)', async () => {
      await refusedIdToken(
        await idToken(provider, 'alice', { iss: otherProvider.issuer }),
        /issuer \(iss\)/,
      );
    });

    it('an ID token from another OpenID provider (another issuer, signed by its key)', async () => {
      await refusedIdToken(await idToken(otherProvider, 'alice'), /issuer \(iss\)/);
    });

    it('an expired ID token (exp)', async () => {
      const t = now();
      await refusedIdToken(
        await idToken(provider, 'alice', { iat: t - 3600, exp: t - 300 }),
        /expired \(exp\)/,
      );
    });

    it('an ID token signed with a key the provider does not publish (kid)', async () => {
      await refusedIdToken(
        await idToken(provider, 'alice', {}, { kid: 'retired-or-forged-key' }),
        /\(kid\)/,
      );
    });

    it('an unsigned ID token (alg none)', async () => {
      const t = now();
      await refusedIdToken(
        `${b64({ alg: 'none', typ: 'JWT' })}.${b64({
          iss: provider.issuer,
          sub: 'alice',
          aud: CLIENT_ID,
          iat: t,
          exp: t + 300,
        })}.`,
        /algorithm/,
      );
    });

    it('an ID token that is not a JWT', async () => {
      await refusedIdToken('not-an-id-token-0123456789abcdef', /not a valid ID token/);
    });
  });

  it('every refused authentication is logged as a security event with its reason', async () => {
    expect(refusals.length).toBeGreaterThan(20);
    const last = refusals[refusals.length - 1];
    await waitForRequestLog(server, last.requestId);
    const events = auditEvents(server);
    const missing: string[] = [];
    for (const { requestId, check } of refusals) {
      const e = events.find(
        (a) =>
          a.requestId === requestId &&
          a.outcome === 'denied' &&
          (a.type === 'auth.failed' || a.type === 'auth.refresh_reuse'),
      );
      if (!e) {
        const line = logLines(server).find(
          (l) => reqIdOf(l) === requestId && l.msg === 'request completed',
        );
        missing.push(`${requestId} (${String((line?.req as { url?: string })?.url)})`);
        continue;
      }
      if (e.type === 'auth.failed') expect(String(e.details?.reason)).toMatch(check);
    }
    expect(missing).toEqual([]);
  });

  it('no presented secret appears anywhere in the server’s output', () => {
    expect(presented.length).toBeGreaterThan(20);
    const out = server.output();
    for (const secret of presented) expectNoSecret(out, secret);
  });

  it('an access token is verified once per request (debug line "access token verified")', async () => {
    const s = await login(server, provider, 'counter');
    presented.push(s.access_token, s.refresh_token);
    for (const [method, path] of [
      ['GET', '/v1/auth/me'],
      ['POST', '/v1/auth/issue-s3-creds'],
      ['GET', '/v1/units'],
    ]) {
      const r = await call(server.url, path, { method, bearer: s.access_token });
      expect(r.status).toBe(200);
      await waitForRequestLog(server, r.requestId);
      const verified = logLines(server).filter(
        (l) => l.msg === 'access token verified' && reqIdOf(l) === r.requestId,
      );
      expect(`${method} ${path}: ${verified.length}`).toBe(`${method} ${path}: 1`);
    }
  });
});

describe('OIDC login, API tokens and JWKS', () => {
  let server: RunningServer;
  let serverEnv: Record<string, string>;
  let cleanup: () => Promise<void>;

  beforeAll(async () => {
    const fresh = await freshServerEnv();
    cleanup = fresh.cleanup;
    serverEnv = { ...fresh.env, ...oidcEnv(provider) };
    server = await spawnServer(serverEnv);
  });
  afterAll(async () => {
    await server?.stop();
    await cleanup?.();
  });

  it('/v1/auth/config names the issuer, the public client id and the scopes', async () => {
    const r = await call(server.url, '/v1/auth/config');
    expect(r.status).toBe(200);
    expect(r.json).toEqual({
      issuer: provider.issuer,
      client_id: CLIENT_ID,
      scopes: ['openid', 'email', 'profile'],
      public_url: expect.stringMatching(/^http:\/\//),
    });
  });

  it('/.well-known/jwks.json publishes the Ed25519 key that verifies the access tokens', async () => {
    const s = await login(server, provider, 'jwks-reader');
    const kid = decodeProtectedHeader(s.access_token).kid;
    expect(decodeProtectedHeader(s.access_token).alg).toBe('EdDSA');
    const r = await call(server.url, '/.well-known/jwks.json');
    expect(r.status).toBe(200);
    const keys = r.json.keys as JWK[];
    const jwk = keys.find((k) => k.kid === kid);
    expect(jwk).toMatchObject({ kty: 'OKP', crv: 'Ed25519', alg: 'EdDSA', use: 'sig' });
    for (const k of keys) expect(k).not.toHaveProperty('d');
    const { payload } = await jwtVerify(s.access_token, await importJWK(jwk as JWK, 'EdDSA'), {
      audience: 'api',
    });
    expect(payload).toMatchObject({
      sub: 'user:jwks-reader',
      aud: ['api'],
      email: 'jwks-reader@example.com',
      groups: ['platform', 'jwks-reader-group'],
    });
    expect(typeof payload.jti).toBe('string');
    expect((payload.exp as number) - (payload.iat as number)).toBe(3600);
  });

  it('API tokens: created (secret once, sht_), listed without secrets, used as bearer and basic-auth password, revoked', async () => {
    const alice = await login(server, provider, 'alice');
    const created = await call(server.url, '/v1/auth/tokens', {
      bearer: alice.access_token,
      body: { name: 'ci-network-prod' },
    });
    expect(created.status).toBe(201);
    const secret = created.json.token as string;
    expect(secret).toMatch(/^sht_[A-Za-z0-9_-]{40,}$/);
    expect(created.json).toMatchObject({
      name: 'ci-network-prod',
      subject: 'user:alice',
      createdBy: 'user:alice',
      revokedAt: null,
    });

    const list = await call(server.url, '/v1/auth/tokens', { bearer: alice.access_token });
    expect(list.status).toBe(200);
    expect((list.json as unknown as { id: string }[]).map((t) => t.id)).toContain(created.json.id);
    expect(list.text).not.toContain(secret.slice(4));
    for (const t of list.json as unknown as Record<string, unknown>[])
      expect(t).not.toHaveProperty('token');

    const me = await call(server.url, '/v1/auth/me', { bearer: secret });
    expect(me.json).toMatchObject({ subject: 'user:alice', via: 'api-token' });

    const put = await call(server.url, '/v1/backend/auth-e2e/api-token', {
      method: 'POST',
      basicPassword: secret,
      rawBody: tfState(1),
    });
    expect(put.status).toBe(200);
    const get = await call(server.url, '/v1/backend/auth-e2e/api-token', {
      basicPassword: secret,
    });
    expect(get.status).toBe(200);
    expect(get.text).toBe(tfState(1));

    const listed = await call(server.url, '/v1/auth/tokens', { bearer: alice.access_token });
    const mine = (listed.json as unknown as { id: string; lastUsedAt: string | null }[]).find(
      (t) => t.id === created.json.id,
    );
    expect(mine?.lastUsedAt).not.toBeNull();

    const del = await call(server.url, `/v1/auth/tokens/${created.json.id as string}`, {
      method: 'DELETE',
      bearer: alice.access_token,
    });
    expect(del.status).toBe(204);
    expect401(await call(server.url, '/v1/auth/me', { bearer: secret }), secret, /revoked/);
    expect401(
      await call(server.url, '/v1/backend/auth-e2e/api-token', { basicPassword: secret }),
      secret,
      /revoked/,
    );
    expect(server.output()).not.toContain(secret.slice(4));
  });

  it('svc: tokens: bootstrap-admin may create one, a user may not, bootstrap-admin not for itself', async () => {
    const svc = await call(server.url, '/v1/auth/tokens', {
      bearer: server.token,
      body: { name: 'pipeline', subject: 'svc:pipeline' },
    });
    expect(svc.status).toBe(201);
    const me = await call(server.url, '/v1/auth/me', { bearer: svc.json.token as string });
    expect(me.json).toEqual({ subject: 'svc:pipeline', kind: 'service', via: 'api-token' });

    const bob = await login(server, provider, 'bob');
    const refused = await call(server.url, '/v1/auth/tokens', {
      bearer: bob.access_token,
      body: { name: 'sneaky', subject: 'svc:pipeline' },
    });
    expect(refused.status).toBe(403);

    const self = await call(server.url, '/v1/auth/tokens', {
      bearer: server.token,
      body: { name: 'admin-forever' },
    });
    expect(self.status).toBe(400);
  });

  it('tokens stay valid after a server restart on the same data', async () => {
    const s = await login(server, provider, 'restarter');
    const api = await call(server.url, '/v1/auth/tokens', {
      bearer: s.access_token,
      body: { name: 'survives-restart' },
    });
    expect(api.status).toBe(201);
    const kidBefore = decodeProtectedHeader(s.access_token).kid;

    await server.stop();
    server = await spawnServer(serverEnv);

    expect((await call(server.url, '/v1/auth/me', { bearer: s.access_token })).json).toMatchObject({
      subject: 'user:restarter',
      via: 'access-token',
    });
    expect(
      (await call(server.url, '/v1/auth/me', { bearer: api.json.token as string })).status,
    ).toBe(200);
    const refreshed = await call(server.url, '/v1/auth/token', {
      body: { refresh_token: s.refresh_token },
    });
    expect(refreshed.status).toBe(200);
    expect(decodeProtectedHeader(refreshed.json.access_token as string).kid).toBe(kidBefore);
  });
});

describe('a server without OIDC', () => {
  let server: RunningServer;

  onFreshServer(
    (started) => (server = started),
    () => ({ STATEHOUSE_PUBLIC_URL: PUBLIC_URL }),
  );

  it('/v1/auth/config says OIDC login is not configured', async () => {
    const r = await call(server.url, '/v1/auth/config');
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ issuer: null, client_id: null, scopes: [], public_url: PUBLIC_URL });
  });

  it('/v1/auth/exchange refuses with a JSON error naming the missing setting', async () => {
    const r = await call(server.url, '/v1/auth/exchange', {
      body: { id_token: await idToken(provider, 'alice') },
    });
    expect(r.status).toBe(400);
    expect(r.json.message).toMatch(/STATEHOUSE_OIDC_ISSUER/);
  });

  it('/.well-known/jwks.json still publishes the generated Ed25519 key', async () => {
    const r = await call(server.url, '/.well-known/jwks.json');
    expect(r.json.keys).toEqual([
      expect.objectContaining({ kty: 'OKP', crv: 'Ed25519', alg: 'EdDSA' }),
    ]);
  });
});

const describeOnPostgres = ON_POSTGRES ? describe : describe.skip;
const REPLICAS = 'two server processes on one PostgreSQL database accept each other’s tokens';
const REPLICAS_NA = `${REPLICAS} — needs PostgreSQL: run via scripts/with-postgres.sh`;
if (!ON_POSTGRES) console.warn(`auth.spec.ts: skipped (not applicable): ${REPLICAS_NA}`);

describeOnPostgres(ON_POSTGRES ? REPLICAS : REPLICAS_NA, () => {
  let a: RunningServer;
  let b: RunningServer;

  // Started at the same moment: they race to generate the signing key and STS secret.
  onFreshReplicas(
    () => ({ ...oidcEnv(provider), STATEHOUSE_PUBLIC_URL: PUBLIC_URL }),
    (first, second) => ([a, b] = [first, second]),
  );

  it('both publish the same signing key', async () => {
    const ka = (await call(a.url, '/.well-known/jwks.json')).json.keys;
    const kb = (await call(b.url, '/.well-known/jwks.json')).json.keys;
    expect(ka).toEqual(kb);
    expect(ka).toHaveLength(1);
  });

  it('an access token and a refresh token from one replica work on the other', async () => {
    const s = await login(a, provider, 'replicated');
    expect((await call(b.url, '/v1/auth/me', { bearer: s.access_token })).json).toMatchObject({
      subject: 'user:replicated',
    });
    const r = await call(b.url, '/v1/auth/token', { body: { refresh_token: s.refresh_token } });
    expect(r.status).toBe(200);
    expect(
      (await call(a.url, '/v1/auth/me', { bearer: r.json.access_token as string })).status,
    ).toBe(200);
    // The first refresh token, reused on the replica that did not rotate it, is still reuse.
    const reuse = await call(a.url, '/v1/auth/token', {
      body: { refresh_token: s.refresh_token },
    });
    expect401(reuse, s.refresh_token, /already used/);
  });

  it('an API token created on one replica works on the other', async () => {
    const created = await call(a.url, '/v1/auth/tokens', {
      bearer: a.token,
      body: { name: 'replica-ci', subject: 'svc:replica-ci' },
    });
    expect(created.status).toBe(201);
    const me = await call(b.url, '/v1/auth/me', { bearer: created.json.token as string });
    expect(me.json).toMatchObject({ subject: 'svc:replica-ci', via: 'api-token' });
  });
});

describe('rate limiting (STATEHOUSE_AUTH_RATE_LIMIT=3)', () => {
  let server: RunningServer;

  onFreshServer(
    (started) => (server = started),
    () => ({ ...oidcEnv(provider), STATEHOUSE_AUTH_RATE_LIMIT: '3' }),
  );

  it('the 4th exchange within a minute gets a 429 JSON error', async () => {
    const statuses: number[] = [];
    let refresh = '';
    for (let i = 0; i < 4; i++) {
      const r = await call(server.url, '/v1/auth/exchange', {
        body: { id_token: await idToken(provider, `limited-${i}`) },
      });
      statuses.push(r.status);
      if (i === 0) refresh = r.json.refresh_token as string;
      if (i === 3) {
        expect(r.headers.get('content-type')).toMatch(/^application\/json/);
        expect(r.json).toMatchObject({ statusCode: 429, code: 'rate_limited' });
      }
    }
    expect(statuses).toEqual([200, 200, 200, 429]);

    // The token endpoint has its own budget: three rotations pass, the 4th is limited.
    const refreshes: number[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await call(server.url, '/v1/auth/token', { body: { refresh_token: refresh } });
      refreshes.push(r.status);
      if (r.status === 200) refresh = r.json.refresh_token as string;
      if (i === 3) expect(r.json).toMatchObject({ statusCode: 429, code: 'rate_limited' });
    }
    expect(refreshes).toEqual([200, 200, 200, 429]);
  });

  it('authenticated routes outside the auth endpoints are not limited', async () => {
    for (let i = 0; i < 6; i++) {
      expect((await call(server.url, '/v1/auth/me', { bearer: server.token })).status).toBe(200);
    }
  });
});

describe('STATEHOUSE_AUTH_DISABLE', () => {
  async function refusedStart(env: Record<string, string>): Promise<string> {
    try {
      const s = await spawnServer(env, { timeoutMs: 30_000 });
      await s.stop();
    } catch (e) {
      return (e as Error).message;
    }
    throw new Error('the server started, but it must refuse to');
  }

  it('refuses to start with a non-loopback listen address', async () => {
    const fresh = await freshServerEnv();
    try {
      const out = await refusedStart({
        STATEHOUSE_DATA_DIR: fresh.dataDir,
        STATEHOUSE_AUTH_DISABLE: 'true',
        STATEHOUSE_HOST: '0.0.0.0',
      });
      expect(out).toMatch(/exited with 2/);
      expect(out).toMatch(
        /STATEHOUSE_AUTH_DISABLE is refused unless STATEHOUSE_HOST is a loopback/,
      );
    } finally {
      await fresh.cleanup();
    }
  });

  it('refuses to start with DATABASE_URL set (and does not print its password)', async () => {
    const out = await refusedStart({
      STATEHOUSE_DATA_DIR: mkdtempSync(join(tmpdir(), 'statehouse-e2e-')),
      STATEHOUSE_AUTH_DISABLE: 'true',
      DATABASE_URL: 'postgres://statehouse:pw-never-printed@127.0.0.1:9/statehouse',
    });
    expect(out).toMatch(/exited with 2/);
    expect(out).toMatch(/STATEHOUSE_AUTH_DISABLE is refused when DATABASE_URL is set/);
    expect(out).not.toContain('pw-never-printed');
  });

  it('on loopback with the embedded database it starts, warns, and every caller is an admin', async () => {
    // Always the embedded database (under with-postgres.sh too): DATABASE_URL is refused.
    const fresh = await freshServerEnv();
    const server = await spawnServer({
      STATEHOUSE_DATA_DIR: fresh.dataDir,
      STATEHOUSE_AUTH_DISABLE: 'true',
    });
    try {
      expect(server.output()).toMatch(/authentication is DISABLED/);
      const me = await call(server.url, '/v1/auth/me');
      expect(me.json).toEqual({ subject: 'anonymous', kind: 'bootstrap', via: 'auth-disabled' });
      // An admin: it may take an administrative action (token.manage).
      const svc = await call(server.url, '/v1/auth/tokens', {
        body: { name: 'dev', subject: 'svc:dev' },
      });
      expect(svc.status).toBe(201);
    } finally {
      await server.stop();
      await fresh.cleanup();
    }
  });
});
