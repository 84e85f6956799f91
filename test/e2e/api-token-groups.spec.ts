/**
 * Group memberships from the identity provider are never more durable than a recent login,
 * through the real server process and a real OpenID provider (the `oidc-provider` package in
 * its own process, signing the ID tokens): a person's API token carries the groups of that
 * person's most recent login — the IdP drops `platform-admins`, she logs in again, and her old
 * token can no longer manage RBAC or mint `svc:` tokens —; logging out does not strip them; one
 * refresh-token lifetime (STATEHOUSE_TOKENS_REFRESH_TTL, short here) after the last login they
 * are gone, until a newer login brings them back.
 */
import { freshServerEnv } from '../support/database';
import { startOidcProvider, TestOidcProvider } from '../support/oidc';
import { callJson, RunningServer, spawnServer } from '../support/server';

jest.setTimeout(180_000);

const CLIENT_ID = 'statehouse-cli';
const REFRESH_TTL_SECONDS = 15;
const ADMINS = 'platform-admins';

let provider: TestOidcProvider;
let server: RunningServer;
let cleanup: () => Promise<void>;

function call(
  method: string,
  path: string,
  bearer?: string,
  body?: unknown,
): Promise<{ status: number; json: Record<string, unknown> }> {
  return callJson(server, method, path, bearer, body);
}

/** Dana logs in; the provider's ID token lists `groups`. When it happened (ms). */
async function login(groups: string[]): Promise<{ refresh: string; access: string; at: number }> {
  const idToken = await provider.mint({
    sub: 'dana',
    aud: CLIENT_ID,
    email: 'dana@example.com',
    email_verified: true,
    groups,
  });
  const at = Date.now();
  const r = await call('POST', '/v1/auth/exchange', undefined, { id_token: idToken });
  expect(r.status).toBe(200);
  return { refresh: r.json.refresh_token as string, access: r.json.access_token as string, at };
}

/** What Dana's old API token may do now: manage RBAC, mint svc: tokens; and who it is. */
async function rightsOf(token: string) {
  const me = await call('GET', '/v1/auth/me', token);
  const roles = await call('GET', '/v1/rbac/roles', token);
  const svc = await call('POST', '/v1/auth/tokens', token, {
    name: 'minted by dana',
    subject: `svc:dana-${Date.now()}`,
  });
  return {
    authenticates: me.status,
    groups: me.json.groups ?? [],
    email: me.json.email ?? null,
    rbacManage: roles.status,
    svcToken: svc.status,
  };
}

const ADMIN_RIGHTS = {
  authenticates: 200,
  groups: [ADMINS],
  email: 'dana@example.com',
  rbacManage: 200,
  svcToken: 201,
};

beforeAll(async () => {
  provider = await startOidcProvider();
  const fresh = await freshServerEnv();
  cleanup = fresh.cleanup;
  server = await spawnServer({
    ...fresh.env,
    STATEHOUSE_OIDC_ISSUER: provider.issuer,
    STATEHOUSE_OIDC_CLIENT_ID: CLIENT_ID,
    STATEHOUSE_TOKENS_REFRESH_TTL: `${REFRESH_TTL_SECONDS}s`,
  });
  const init = await call('POST', '/v1/rbac/init', server.token, { admin: { group: ADMINS } });
  expect(init.status).toBe(201);
});
afterAll(async () => {
  await server?.stop();
  await cleanup?.();
  await provider?.stop();
});

describe('a person’s API token and the groups of her latest login', () => {
  let token: string;

  it('made while she is in platform-admins, it manages RBAC and mints svc: tokens', async () => {
    const s = await login([ADMINS]);
    const created = await call('POST', '/v1/auth/tokens', s.access, { name: 'dana-ci' });
    expect(created.status).toBe(201);
    token = created.json.token as string;
    expect(await rightsOf(token)).toEqual(ADMIN_RIGHTS);
  });

  it('the IdP drops the group and she logs in again: the old token loses the group’s rights', async () => {
    await login([]);
    expect(await rightsOf(token)).toEqual({
      authenticates: 200,
      groups: [],
      email: 'dana@example.com',
      rbacManage: 403,
      svcToken: 403,
    });
  });

  it('back in the group, then logged out: the token keeps them (logout is not a group change)', async () => {
    const s = await login([ADMINS]);
    expect(await rightsOf(token)).toEqual(ADMIN_RIGHTS);
    const out = await call('POST', '/v1/auth/logout', undefined, { refresh_token: s.refresh });
    expect(out.status).toBe(204);
    expect(await rightsOf(token)).toEqual(ADMIN_RIGHTS);
  });

  it(`${REFRESH_TTL_SECONDS} s (the refresh-token lifetime) after her last login they are gone; a new login renews them`, async () => {
    const last = await login([ADMINS]);
    expect(await rightsOf(token)).toEqual(ADMIN_RIGHTS);
    const wait = last.at + REFRESH_TTL_SECONDS * 1000 + 1500 - Date.now();
    await new Promise((r) => setTimeout(r, Math.max(0, wait)));
    expect(await rightsOf(token)).toEqual({
      authenticates: 200, // still Dana: only the IdP's say is gone
      groups: [],
      email: null,
      rbacManage: 403,
      svcToken: 403,
    });
    await login([ADMINS]);
    expect(await rightsOf(token)).toEqual(ADMIN_RIGHTS);
  });
});
