/**
 * `terraform login` (login.v1) at the protocol level, against the real server process and the
 * real test OpenID provider: the requests Terraform makes (TFE-WIRE.md §5) made by hand, the
 * provider's pages followed by a small form browser. The real Terraform and a real Chromium
 * drive the same flow in test/terraform/tfe-login.spec.ts.
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { freshServerEnv } from '../support/database';
import { FormBrowser } from '../support/form-browser';
import { startOidcProvider, TestOidcProvider } from '../support/oidc';
import { freePort } from '../support/ports';
import { callJson, onFreshServer, RunningServer, spawnServer } from '../support/server';

jest.setTimeout(60_000);

const LOOPBACK = 'http://localhost:10003/login';

interface Started {
  verifier: string;
  state: string;
  url: URL;
}

function loginRequest(base: string, overrides: Record<string, string> = {}): Started {
  const verifier = randomBytes(32).toString('base64url');
  const state = randomUUID();
  const url = new URL('/oauth/terraform/authorize', base);
  const params: Record<string, string> = {
    response_type: 'code',
    client_id: 'terraform',
    redirect_uri: LOOPBACK,
    state,
    code_challenge: createHash('sha256').update(verifier).digest('base64url'),
    code_challenge_method: 'S256',
    ...overrides,
  };
  for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
  return { verifier, state, url };
}

async function tokenRequest(
  base: string,
  form: Record<string, string>,
  init: { contentType?: string; body?: string } = {},
): Promise<{ status: number; json: Record<string, unknown>; headers: Headers }> {
  const res = await fetch(`${base}/oauth/terraform/token`, {
    method: 'POST',
    headers: { 'content-type': init.contentType ?? 'application/x-www-form-urlencoded' },
    body: init.body ?? new URLSearchParams(form).toString(),
  });
  return {
    status: res.status,
    json: (await res.json()) as Record<string, unknown>,
    headers: res.headers,
  };
}

describe('terraform login (login.v1) with an OpenID provider', () => {
  let provider: TestOidcProvider;
  let server: RunningServer;
  let cleanup: (() => Promise<void>) | undefined;
  let base: string;

  /** Signs `login` in through the provider and answers the loopback URL Terraform would get. */
  async function signIn(login: string, start = loginRequest(base)): Promise<URL> {
    return new URL(await new FormBrowser().authorize(start.url, login));
  }

  const redeem = (code: string, verifier: string, extra: Record<string, string> = {}) =>
    tokenRequest(base, {
      grant_type: 'authorization_code',
      client_id: 'terraform',
      code,
      redirect_uri: LOOPBACK,
      code_verifier: verifier,
      ...extra,
    });

  beforeAll(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    provider = await startOidcProvider([`${base}/oauth/terraform/callback`]);
    const fresh = await freshServerEnv();
    cleanup = fresh.cleanup;
    server = await spawnServer({
      ...fresh.env,
      PORT: String(port),
      STATEHOUSE_PUBLIC_URL: base,
      STATEHOUSE_OIDC_ISSUER: provider.issuer,
      STATEHOUSE_OIDC_CLIENT_ID: 'statehouse-web',
      STATEHOUSE_OIDC_SCOPES: 'openid email groups',
    });
  });

  afterAll(async () => {
    await server?.stop();
    await provider?.stop();
    await cleanup?.();
  });

  it('discovery advertises login.v1: client terraform, authz and token paths, ports 10000-10010', async () => {
    const r = await callJson(server, 'GET', '/.well-known/terraform.json');
    expect(r.json['login.v1']).toEqual({
      client: 'terraform',
      grant_types: ['authz_code'],
      authz: '/oauth/terraform/authorize',
      token: '/oauth/terraform/token',
      ports: [10000, 10010],
    });
  });

  it('a sign-in gives Terraform one code, redeemed once for an API token of that person', async () => {
    const start = loginRequest(base);
    const back = await signIn('alice', start);
    expect(`${back.origin}${back.pathname}`).toBe(LOOPBACK);
    expect(back.searchParams.get('state')).toBe(start.state);
    const code = back.searchParams.get('code') as string;
    expect(code).toMatch(/^[A-Za-z0-9_-]{43}$/);

    const r = await redeem(code, start.verifier);
    expect(r.status).toBe(200);
    expect(r.headers.get('cache-control')).toBe('no-store');
    expect(r.json.token_type).toBe('bearer');
    const token = r.json.access_token as string;
    expect(token).toMatch(/^sht_/);

    const me = await callJson(server, 'GET', '/v1/auth/me', token);
    expect(me.status).toBe(200);
    expect(me.json).toMatchObject({
      subject: 'user:alice',
      email: 'alice@example.com',
      groups: ['platform', 'alice-group'],
    });
    const again = await redeem(code, start.verifier);
    expect(again.status).toBe(400);
    expect(again.json.error).toBe('invalid_grant');

    // Named for the host and the date, listed and revocable like any API token.
    const list = await callJson(server, 'GET', '/v1/auth/tokens', token);
    const host = new URL(base).host;
    const today = new Date().toISOString().slice(0, 10);
    const mine = (list.json as unknown as { id: string; name: string; subject: string }[]).find(
      (t) => t.name === `terraform login ${host} ${today}`,
    );
    expect(mine?.subject).toBe('user:alice');
    const revoked = await fetch(`${base}/v1/auth/tokens/${mine?.id}`, {
      method: 'DELETE',
      headers: { Authorization: `Bearer ${token}` },
    });
    expect(revoked.status).toBe(204);
    expect((await callJson(server, 'GET', '/v1/auth/me', token)).status).toBe(401);
  });

  it('a wrong code_verifier is refused, and the code is gone even for the right one', async () => {
    const start = loginRequest(base);
    const code = (await signIn('bob', start)).searchParams.get('code') as string;
    const wrong = await redeem(code, randomBytes(32).toString('base64url'));
    expect(wrong.status).toBe(400);
    expect(wrong.json).toMatchObject({
      error: 'invalid_grant',
      error_description: 'code_verifier does not match the code_challenge',
    });
    expect((await redeem(code, start.verifier)).json.error).toBe('invalid_grant');
  });

  it('a code is redeemed for the redirect it was sent to only', async () => {
    const start = loginRequest(base);
    const code = (await signIn('carol', start)).searchParams.get('code') as string;
    const r = await redeem(code, start.verifier, { redirect_uri: 'http://localhost:10004/login' });
    expect(r.json).toMatchObject({ error: 'invalid_grant' });
    expect(r.json.error_description).toMatch(/redirect_uri/);
  });

  it('two redemptions of one code at once: exactly one token', async () => {
    const start = loginRequest(base);
    const code = (await signIn('dave', start)).searchParams.get('code') as string;
    const both = await Promise.all([redeem(code, start.verifier), redeem(code, start.verifier)]);
    expect(both.map((r) => r.status).sort()).toEqual([200, 400]);
  });

  it('token requests that are not Terraform’s are refused in OAuth form, nothing made', async () => {
    const cases: [
      Record<string, string>,
      { contentType?: string; body?: string },
      number,
      string,
    ][] = [
      [{ grant_type: 'password', client_id: 'terraform' }, {}, 400, 'unsupported_grant_type'],
      [{ grant_type: 'authorization_code', client_id: 'other' }, {}, 401, 'invalid_client'],
      [
        { grant_type: 'authorization_code', client_id: 'terraform', code: 'x\u0000y' },
        {},
        400,
        'invalid_grant',
      ],
      [
        {},
        { contentType: 'application/json', body: '{"grant_type":"authorization_code"}' },
        400,
        'invalid_request',
      ],
      [
        {},
        { body: `grant_type=authorization_code&client_id=terraform&code=${'a'.repeat(17_000)}` },
        413,
        'invalid_request',
      ],
      [
        {},
        { body: 'grant_type=authorization_code&grant_type=password&client_id=terraform' },
        400,
        'invalid_request',
      ],
    ];
    for (const [form, init, status, error] of cases) {
      const r = await tokenRequest(base, form, init);
      expect([r.status, r.json.error]).toEqual([status, error]);
      expect(r.json.access_token).toBeUndefined();
    }
  });

  it('authorization requests Terraform would not make get a page and no redirect', async () => {
    const bad: Record<string, string>[] = [
      { redirect_uri: 'http://evil.example:10003/login' },
      { redirect_uri: 'http://localhost:9999/login' },
      { redirect_uri: 'http://localhost:10003/login/' },
      { redirect_uri: 'http://127.0.0.1:10003/login' },
      { code_challenge_method: 'plain' },
      { code_challenge: 'short' },
      { client_id: 'someone-else' },
      { response_type: 'token' },
      { state: 'has\u0000nul' },
      { state: '\ud800' },
    ];
    for (const overrides of bad) {
      const res = await fetch(loginRequest(base, overrides).url, { redirect: 'manual' });
      expect([JSON.stringify(overrides), res.status]).toEqual([JSON.stringify(overrides), 400]);
      expect(res.headers.get('location')).toBeNull();
      expect(res.headers.get('content-type')).toMatch(/^text\/html/);
      const html = await res.text();
      expect(html).toContain('terraform login did not complete');
      expect(html).not.toContain('<script');
    }
    const twice = loginRequest(base).url;
    twice.searchParams.append('state', 'another');
    const res = await fetch(twice, { redirect: 'manual' });
    expect(res.status).toBe(400);
    expect(await res.text()).toContain('state is given more than once');
  });

  it('the provider’s answer is taken only in the browser that started the sign-in, and once', async () => {
    const start = loginRequest(base);
    const browser = new FormBrowser();
    const callback = await browser.authorize(start.url, 'erin', `${base}/oauth/terraform/callback`);
    const elsewhere = await new FormBrowser().request(callback);
    expect(elsewhere.status).toBe(400);
    expect(await elsewhere.text()).toContain('started in another browser');
    // That attempt used the sign-in up: the right browser cannot finish it either.
    const late = await browser.request(callback);
    expect(late.status).toBe(400);
    expect(await late.text()).toContain('unknown or was already completed');
  });

  it('a sign-in refused at the provider tells Terraform’s listener (error, its state)', async () => {
    const start = loginRequest(base);
    const browser = new FormBrowser();
    const callback = new URL(
      await browser.authorize(start.url, 'frank', `${base}/oauth/terraform/callback`),
    );
    const denied = new URL('/oauth/terraform/callback', base);
    denied.searchParams.set('state', callback.searchParams.get('state') as string);
    denied.searchParams.set('error', 'access_denied');
    const res = await browser.request(denied.toString());
    expect(res.status).toBe(302);
    const back = new URL(res.headers.get('location') as string);
    expect(`${back.origin}${back.pathname}`).toBe(LOOPBACK);
    expect(back.searchParams.get('error')).toBe('access_denied');
    expect(back.searchParams.get('state')).toBe(start.state);
    expect(back.searchParams.get('code')).toBeNull();
  });

  it('no code, state or token of a login reaches the server’s log', async () => {
    const start = loginRequest(base);
    const back = await signIn('grace', start);
    const code = back.searchParams.get('code') as string;
    const r = await redeem(code, start.verifier);
    expect(r.status).toBe(200);
    const log = server.output();
    expect(log).toContain('/oauth/terraform/callback');
    expect(log).not.toContain(code);
    expect(log).not.toContain(r.json.access_token as string);
    for (const m of log.matchAll(/[?&](code|state)=([^&"\s]+)/g)) {
      expect(m[2]).toBe('[redacted]');
    }
  });

  it('a refusal from further down (a subject the database cannot store) is a page too', async () => {
    const browser = new FormBrowser();
    const callback = await browser.authorize(
      loginRequest(base).url,
      'nul\u0000name',
      `${base}/oauth/terraform/callback`,
    );
    const res = await browser.request(callback);
    expect([res.status, res.headers.get('content-type')]).toEqual([
      400,
      'text/html; charset=utf-8',
    ]);
    expect(await res.text()).toContain('cannot be stored');
  });

  it('a callback for no sign-in of this server is refused', async () => {
    for (const query of ['state=' + 'A'.repeat(43) + '&code=abc', 'code=abc', 'state=%00']) {
      const res = await fetch(`${base}/oauth/terraform/callback?${query}`, { redirect: 'manual' });
      expect(res.status).toBe(400);
      expect(res.headers.get('location')).toBeNull();
    }
  });
});

describe('terraform login without an OpenID provider', () => {
  let server: RunningServer;
  onFreshServer((s) => (server = s));

  it('discovery has no login.v1 (Terraform then offers to paste a token) and the routes say why', async () => {
    const disco = await callJson(server, 'GET', '/.well-known/terraform.json');
    expect(disco.json['tfe.v2']).toBe('/api/v2/');
    expect(disco.json['login.v1']).toBeUndefined();
    const page = await fetch(loginRequest(server.url).url, { redirect: 'manual' });
    expect(page.status).toBe(404);
    expect(await page.text()).toContain('STATEHOUSE_OIDC_ISSUER');
    const token = await tokenRequest(server.url, { grant_type: 'authorization_code' });
    expect(token.status).toBe(400);
    expect(token.json.error).toBe('unsupported_grant_type');
  });
});

describe('terraform login over the sign-in rate limit', () => {
  let server: RunningServer;
  onFreshServer(
    (s) => (server = s),
    () => ({ STATEHOUSE_AUTH_RATE_LIMIT: '1' }),
  );

  it('is refused in each step’s own form: a page in the browser, OAuth JSON to Terraform', async () => {
    for (const path of ['authorize', 'callback']) {
      const url = `${server.url}/oauth/terraform/${path}`;
      await (await fetch(url)).text();
      const res = await fetch(url, { redirect: 'manual' });
      expect([path, res.status, res.headers.get('content-type')]).toEqual([
        path,
        429,
        'text/html; charset=utf-8',
      ]);
      expect(await res.text()).toContain('terraform login did not complete');
    }
    await tokenRequest(server.url, {});
    const token = await tokenRequest(server.url, {});
    expect([token.status, token.json.error]).toEqual([429, 'temporarily_unavailable']);
  });
});
