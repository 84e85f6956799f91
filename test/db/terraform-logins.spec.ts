/**
 * The logins `terraform login` keeps in flight (terraform_logins), on a real database (embedded
 * PGlite, or PostgreSQL under scripts/with-postgres.sh): each is taken out once, by one of any
 * number of callers at once; an expired one is taken out and reported expired, and the token
 * endpoint refuses its code; expired rows are dropped as new ones arrive.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../src/config/config';
import { sha256Hex } from '../../src/auth/tokens/token.service';
import type { OidcService } from '../../src/auth/oidc/oidc.service';
import type { ApiTokenService } from '../../src/auth/tokens/api-token.service';
import { TerraformLoginRepository } from '../../src/tfe/terraform-login.repository';
import { OAuthError, TerraformLoginService } from '../../src/tfe/terraform-login.service';
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

  it('the token endpoint refuses an expired code (invalid_grant), and it stays used', async () => {
    const config = loadConfig({
      NODE_ENV: 'test',
      STATEHOUSE_DATA_DIR: mkdtempSync(join(tmpdir(), 'statehouse-tflogins-')),
      STATEHOUSE_STORAGE: 'memory',
      STATEHOUSE_OIDC_ISSUER: 'https://idp.example.test',
      STATEHOUSE_OIDC_CLIENT_ID: 'statehouse-web',
    });
    // Neither is reached: an expired code is refused before the provider or a token is asked.
    const service = new TerraformLoginService(
      config,
      {} as OidcService,
      {} as ApiTokenService,
      repo,
    );
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
});
