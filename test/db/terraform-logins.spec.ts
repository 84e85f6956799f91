/**
 * The logins `terraform login` keeps in flight (terraform_logins), on a real database (embedded
 * PGlite, or PostgreSQL under scripts/with-postgres.sh): each is taken out once, by one of any
 * number of callers at once; an expired one is taken out and reported expired, and the token
 * endpoint refuses its code; expired rows are dropped as new ones arrive; sign-ins nobody
 * finishes, however many, do not keep a person the provider has answered from their code.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../src/config/config';
import { sha256Hex } from '../../src/auth/tokens/token.service';
import type { OidcService } from '../../src/auth/oidc/oidc.service';
import type { ApiTokenService } from '../../src/auth/tokens/api-token.service';
import {
  MAX_LOGINS_IN_FLIGHT,
  TerraformLoginRepository,
} from '../../src/tfe/terraform-login.repository';
import {
  bindingCookieName,
  OAuthError,
  TerraformLoginService,
} from '../../src/tfe/terraform-login.service';
import { DATABASE_KIND, onTestDatabase, TestDatabase } from '../support/database';

jest.setTimeout(60_000);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe(`terraform logins in flight (${DATABASE_KIND})`, () => {
  let db: TestDatabase;
  let repo: TerraformLoginRepository;
  onTestDatabase((d) => {
    db = d;
    repo = new TerraformLoginRepository(d.dataSource);
  });

  it('of 8 callers taking one login at once, exactly one gets it', async () => {
    const key = sha256Hex('race');
    expect(await repo.add(key, 'code', { n: 1 }, 60)).toBe(true);
    const taken = await Promise.all(Array.from({ length: 8 }, () => repo.take(key, 'code')));
    expect(taken.filter((t) => t !== undefined)).toEqual([{ data: { n: 1 }, expired: false }]);
  });

  it('a login is taken only at its own stage', async () => {
    const key = sha256Hex('stage');
    await repo.add(key, 'authorize', {}, 60);
    expect(await repo.take(key, 'code')).toBeUndefined();
    expect(await repo.take(key, 'authorize')).toEqual({ data: {}, expired: false });
  });

  it('an expired login is taken out and reported expired; expired rows go as new ones arrive', async () => {
    const key = sha256Hex('late');
    await repo.add(key, 'code', {}, 0.05);
    await sleep(100);
    expect(await repo.take(key, 'code')).toEqual({ data: {}, expired: true });
    expect(await repo.take(key, 'code')).toBeUndefined();

    const stale = sha256Hex('stale');
    await repo.add(stale, 'authorize', {}, 0.05);
    await sleep(100);
    await repo.add(sha256Hex('fresh'), 'authorize', {}, 60);
    const left = await db.dataSource.query(
      'SELECT key_sha256 FROM terraform_logins WHERE key_sha256 = $1',
      [stale],
    );
    expect(left).toEqual([]);
  });

  /** The service on this database, with the provider (and the token maker) given. */
  const loginService = (oidc: Partial<OidcService> = {}) =>
    new TerraformLoginService(
      loadConfig({
        NODE_ENV: 'test',
        STATEHOUSE_DATA_DIR: mkdtempSync(join(tmpdir(), 'statehouse-tflogins-')),
        STATEHOUSE_STORAGE: 'memory',
        STATEHOUSE_OIDC_ISSUER: 'https://idp.example.test',
        STATEHOUSE_OIDC_CLIENT_ID: 'statehouse-web',
      }),
      oidc as OidcService,
      {} as ApiTokenService,
      repo,
    );

  it('the token endpoint refuses an expired code (invalid_grant), and it stays used', async () => {
    // Neither is reached: an expired code is refused before the provider or a token is asked.
    const service = loginService();
    const code = randomBytes(32).toString('base64url');
    await repo.add(sha256Hex(code), 'code', { redirectUri: 'http://localhost:10000/login' }, 0.05);
    await sleep(100);
    const form = new URLSearchParams({
      grant_type: 'authorization_code',
      client_id: 'terraform',
      code,
      redirect_uri: 'http://localhost:10000/login',
      code_verifier: randomBytes(32).toString('base64url'),
    });
    await expect(service.token(form)).rejects.toEqual(
      new OAuthError(400, 'invalid_grant', 'the code has expired'),
    );
    await expect(service.token(form)).rejects.toEqual(
      new OAuthError(400, 'invalid_grant', 'the code is unknown or was already used'),
    );
  });

  it('a person back from the provider gets their code though sign-ins nobody finishes fill the table', async () => {
    await db.dataSource.query('DELETE FROM terraform_logins');
    const attacker = sha256Hex('attacker');
    const service = loginService({
      authorizationUrl: ({ state }) =>
        Promise.resolve(`https://idp.example.test/auth?state=${state}`),
      // While the provider is asked, a waiting caller takes the place the sign-in left.
      redeemCode: async () => {
        expect(await repo.add(attacker, 'authorize', {}, 600)).toBe(true);
        return { subject: 'user:ida' };
      },
    });
    const verifier = randomBytes(32).toString('base64url');
    const started = await service.authorize(
      new URLSearchParams({
        client_id: 'terraform',
        response_type: 'code',
        redirect_uri: 'http://localhost:10000/login',
        state: 'tf-state',
        code_challenge_method: 'S256',
        code_challenge: createHash('sha256').update(verifier).digest('base64url'),
      }),
    );
    const state = new URL(started.location).searchParams.get('state') as string;
    await db.dataSource.query(
      `INSERT INTO terraform_logins (key_sha256, stage, data, expires_at)
       SELECT lpad(to_hex(g), 64, '0'), 'authorize', '{}', now() + interval '10 minutes'
       FROM generate_series(1, $1) g`,
      [MAX_LOGINS_IN_FLIGHT - 1],
    );
    expect(await repo.add(sha256Hex('one more'), 'authorize', {}, 600)).toBe(false);

    const back = new URL(
      await service.callback(
        new URLSearchParams({ state, code: 'provider-code' }),
        new Map([[bindingCookieName(state), started.cookie.value]]),
      ),
    );
    expect(back.searchParams.get('code')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    // Sign-ins not yet at the provider stay bounded.
    expect(await repo.add(sha256Hex('and another'), 'authorize', {}, 600)).toBe(false);
    await db.dataSource.query('DELETE FROM terraform_logins');
  });
});
