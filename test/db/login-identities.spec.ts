/**
 * Groups and email from the identity provider are never more durable than a recent login: an
 * API token acting as a person carries what that person's most recent login said (renewed by
 * each login, kept across logout) for one refresh-token lifetime after it, and nothing after.
 * `svc:` tokens carry no groups at all. On a real database (embedded PGlite, or PostgreSQL under
 * scripts/with-postgres.sh), with the services wired by hand; and the migration that moves
 * existing installations over (each person's newest live session becomes their latest login).
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DataSource } from 'typeorm';
import { CredentialLineage1764640000000 } from '../../migrations/1764640000000-credential-lineage';
import { IdentityRepository } from '../../src/auth/identity.repository';
import { Principal } from '../../src/common/principal';
import { CredentialRevocations } from '../../src/auth/revocation/credential-revocations.service';
import { RevocationRepository } from '../../src/auth/revocation/revocation.repository';
import { StsService } from '../../src/auth/sts/sts.service';
import { ApiTokenService } from '../../src/auth/tokens/api-token.service';
import { Identity, TokenService } from '../../src/auth/tokens/token.service';
import { SigningKeys } from '../../src/auth/tokens/signing-keys.service';
import { loadConfig } from '../../src/config/config';
import { SharedSecrets } from '../../src/database/shared-secrets.service';
import { AuthorizationService } from '../../src/rbac/authorization.service';
import { RbacCache } from '../../src/rbac/rbac-cache';
import { RbacRepository } from '../../src/rbac/rbac.repository';
import { RbacService } from '../../src/rbac/rbac.service';
import { DATABASE_KIND, onTestDatabase, TestDatabase } from '../support/database';
import { ADMIN, RecordingAudit } from '../support/services';

jest.setTimeout(120_000);

async function wire(ds: DataSource) {
  const config = loadConfig({
    NODE_ENV: 'test',
    STATEHOUSE_DATA_DIR: mkdtempSync(join(tmpdir(), 'statehouse-logins-')),
    STATEHOUSE_STORAGE: 'memory',
  });
  const cache = new RbacCache(config);
  const revocations = new CredentialRevocations(config, new RevocationRepository(ds), cache);
  const keys = new SigningKeys(config, ds);
  await keys.onModuleInit();
  const audit = new RecordingAudit();
  const identities = new IdentityRepository(ds);
  const rbacRepo = new RbacRepository(ds);
  const authz = new AuthorizationService(rbacRepo, cache, audit);
  const sts = new StsService(config, new SharedSecrets(ds), keys, audit, revocations);
  await sts.onModuleInit();
  return {
    config,
    authz,
    sts,
    rbac: new RbacService(rbacRepo, authz, cache, audit),
    tokens: new TokenService(config, keys, identities, audit, revocations),
    apiTokens: new ApiTokenService(identities, authz, audit, revocations),
  };
}

const ADMINS = 'platform-admins';
const person = (groups: string[]): Identity => ({
  subject: 'user:dana',
  email: 'dana@example.com',
  groups,
});

describe(`API tokens acting as a person (${DATABASE_KIND})`, () => {
  let db: TestDatabase;
  let w: Awaited<ReturnType<typeof wire>>;
  /** Dana's API token, made while she was in platform-admins. */
  let secret: string;
  let tokenId: string;

  const asToken = async (): Promise<Principal> => (await w.apiTokens.verify(secret)) as Principal;
  const mayManageRbac = async (): Promise<boolean> =>
    w.authz.can(await asToken(), 'rbac.manage', { unit: '*' });

  onTestDatabase(async (opened) => {
    db = opened;
    w = await wire(db.dataSource);
    await w.rbac.init(ADMIN, { group: ADMINS });
    const login = await w.tokens.startSession(person([ADMINS, 'team-a']));
    const dana = (await w.tokens.verify(login.access_token)) as Principal;
    const created = await w.apiTokens.create(dana, { name: 'dana-pipeline' });
    secret = created.token;
    tokenId = created.id;
  });

  it('carries the groups and verified email of the latest login', async () => {
    expect(await asToken()).toMatchObject({
      subject: 'user:dana',
      email: 'dana@example.com',
      groups: [ADMINS, 'team-a'],
    });
    expect(await mayManageRbac()).toBe(true);
    expect((await w.apiTokens.create(await asToken(), { name: 's', subject: 'svc:s' })).id).toEqual(
      expect.any(String),
    );
  });

  it('the IdP drops the group, she logs in again: the old token loses the group’s rights', async () => {
    await w.tokens.startSession(person(['team-a']));
    const p = await asToken();
    expect(p.groups).toEqual(['team-a']);
    expect(await mayManageRbac()).toBe(false);
    const e = await w.apiTokens.create(p, { name: 's2', subject: 'svc:s2' }).catch((x: Error) => x);
    expect(e).toMatchObject({ code: 'forbidden' });
  });

  it('logging out does not strip them (a laptop logout must not break her pipelines)', async () => {
    const login = await w.tokens.startSession(person([ADMINS]));
    expect(await mayManageRbac()).toBe(true);
    await w.tokens.logout(login.refresh_token);
    expect((await asToken()).groups).toEqual([ADMINS]);
    expect(await mayManageRbac()).toBe(true);
  });

  it('one refresh-token lifetime after the login they stop, until a newer login renews them', async () => {
    await db.dataSource.query(
      `UPDATE login_identities SET expires_at = now() - interval '1 second' WHERE subject = 'user:dana'`,
    );
    const p = await asToken();
    expect(p).toMatchObject({ subject: 'user:dana', kind: 'user', via: 'api-token' });
    expect(p.groups).toBeUndefined();
    expect(p.email).toBeUndefined();
    expect(await mayManageRbac()).toBe(false);
    await w.tokens.startSession(person([ADMINS]));
    expect(await mayManageRbac()).toBe(true);
  });

  it('S3 credentials minted with the token end when the login they carry the groups of does', async () => {
    await db.dataSource.query(
      `UPDATE login_identities SET expires_at = now() + interval '2 minutes' WHERE subject = 'user:dana'`,
    );
    const creds = await w.sts.issue(await asToken());
    expect(Date.parse(creds.Expiration) - Date.now()).toBeLessThanOrEqual(120_000);
    const claims = JSON.parse(
      Buffer.from(creds.SessionToken.split('.')[1], 'base64url').toString(),
    ) as { groups: string[]; parent: string };
    expect(claims).toMatchObject({ groups: [ADMINS], parent: `api_token:${tokenId}` });
  });

  it('a svc: token carries only the svc: subject’s own rights, whatever a login table says', async () => {
    const svc = await w.apiTokens.create(ADMIN, { name: 'ci', subject: 'svc:ci' });
    // Not something a login can write (OIDC subjects are user:…), planted to prove the rule.
    await db.dataSource.query(
      `INSERT INTO login_identities (subject, email, groups, expires_at)
       VALUES ('svc:ci', 'x@example.com', $1, now() + interval '1 day')`,
      [JSON.stringify([ADMINS])],
    );
    const p = (await w.apiTokens.verify(svc.token)) as Principal;
    expect(p).toEqual({
      subject: 'svc:ci',
      kind: 'service',
      via: 'api-token',
      credential: { parent: { kind: 'api_token', id: svc.id } },
    });
    expect(await w.authz.can(p, 'rbac.manage', { unit: '*' })).toBe(false);
  });
});

describe(`the migration to latest logins (${DATABASE_KIND})`, () => {
  let db: TestDatabase;

  onTestDatabase((opened) => {
    db = opened;
  });

  it('each person’s newest live session becomes their latest login; api_tokens keep no copies', async () => {
    const migration = new CredentialLineage1764640000000();
    const q = db.dataSource.createQueryRunner();
    await q.connect();
    try {
      await migration.down(q);
      const session = (subject: string, groups: string[], expiresIn: string, family: string) =>
        q.query(
          `INSERT INTO refresh_tokens (family_id, token_hash, subject, email, groups, family_expires_at)
           VALUES ($1, md5(random()::text) || md5(random()::text), $2, $3, $4, now() + $5::interval)`,
          [family, subject, `${subject.slice(5)}@example.com`, JSON.stringify(groups), expiresIn],
        );
      await session('user:old', ['a'], '10 days', '00000000-0000-4000-8000-000000000001');
      await session('user:old', ['b'], '20 days', '00000000-0000-4000-8000-000000000002');
      await session('user:gone', ['c'], '-1 day', '00000000-0000-4000-8000-000000000003');
      await q.query(
        `INSERT INTO api_tokens (name, token_hash, subject, email, groups, created_by)
         VALUES ('t', repeat('a', 64), 'user:old', 'old@example.com', '["stale"]', 'user:old')`,
      );
      await migration.up(q);
      const rows = (await q.query(
        `SELECT subject, groups, round(extract(epoch FROM expires_at - now()) / 86400)::int AS days
           FROM login_identities ORDER BY subject`,
      )) as { subject: string; groups: string[]; days: number }[];
      expect(rows).toEqual([{ subject: 'user:old', groups: ['b'], days: 20 }]);
      const columns = (await q.query(
        `SELECT column_name FROM information_schema.columns WHERE table_name = 'api_tokens'`,
      )) as { column_name: string }[];
      expect(columns.map((c) => c.column_name)).not.toEqual(expect.arrayContaining(['groups']));
      expect(columns.map((c) => c.column_name)).not.toContain('email');
    } finally {
      await q.release();
    }
  });
});
