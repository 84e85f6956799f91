/**
 * Derived credentials on a real database (embedded PGlite, or PostgreSQL under
 * scripts/with-postgres.sh), with the auth services wired by hand as the AuthModule wires them:
 * every access token names its login session and every S3 session token the API token or
 * session it was minted with; revoking that parent (revoking the token, logout, refresh reuse)
 * revokes them; none outlives its parent; bootstrap-admin mints nothing; the revocation list
 * keeps an entry only while something derived could still verify. On PostgreSQL, two
 * "replicas" show a revocation through one reaching the other within a second, and that with
 * the LISTEN connection killed every answer comes from the database (no stale cache).
 */
import { KeyObject, randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SignJWT } from 'jose';
import { DataSource } from 'typeorm';
import { IdentityRepository } from '../../src/auth/identity.repository';
import { Principal } from '../../src/common/principal';
import { CredentialRevocations } from '../../src/auth/revocation/credential-revocations.service';
import { RevocationRepository } from '../../src/auth/revocation/revocation.repository';
import { StsService } from '../../src/auth/sts/sts.service';
import { ApiTokenService } from '../../src/auth/tokens/api-token.service';
import { TokenRejected } from '../../src/auth/tokens/jwt';
import { SigningKeys } from '../../src/auth/tokens/signing-keys.service';
import { TokenService } from '../../src/auth/tokens/token.service';
import { DomainError } from '../../src/common/errors';
import { AppConfig, loadConfig } from '../../src/config/config';
import { SharedSecrets } from '../../src/database/shared-secrets.service';
import { AuthorizationService } from '../../src/rbac/authorization.service';
import { RbacCache } from '../../src/rbac/rbac-cache';
import { RbacRepository } from '../../src/rbac/rbac.repository';
import {
  DATABASE_KIND,
  ON_POSTGRES,
  onTestDatabase,
  terminateListeners,
  TestDatabase,
} from '../support/database';
import { ADMIN, RecordingAudit } from '../support/services';

jest.setTimeout(120_000);

interface Wired {
  config: AppConfig;
  cache: RbacCache;
  keys: SigningKeys;
  repo: RevocationRepository;
  revocations: CredentialRevocations;
  tokens: TokenService;
  apiTokens: ApiTokenService;
  sts: StsService;
}

/** What the AuthModule wires, by hand: one "replica" on `ds` (listening when `databaseUrl`). */
async function wire(
  ds: DataSource,
  env: Record<string, string> = {},
  databaseUrl?: string,
): Promise<Wired> {
  const config = loadConfig({
    NODE_ENV: 'test',
    STATEHOUSE_DATA_DIR: mkdtempSync(join(tmpdir(), 'statehouse-derived-')),
    STATEHOUSE_STORAGE: 'memory',
    STATEHOUSE_PUBLIC_URL: 'https://statehouse.example.test',
    ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
    ...env,
  });
  const cache = new RbacCache(config);
  const repo = new RevocationRepository(ds);
  const revocations = new CredentialRevocations(config, repo, cache);
  await cache.onModuleInit(); // LISTEN (RBAC and revocations) when DATABASE_URL is set
  const keys = new SigningKeys(config, ds);
  await keys.onModuleInit();
  const audit = new RecordingAudit();
  const identities = new IdentityRepository(ds);
  const tokens = new TokenService(config, keys, identities, audit, revocations);
  const authz = new AuthorizationService(new RbacRepository(ds), cache, audit);
  const apiTokens = new ApiTokenService(identities, authz, audit, revocations);
  const sts = new StsService(config, new SharedSecrets(ds), keys, audit, revocations);
  await sts.onModuleInit();
  return { config, cache, keys, repo, revocations, tokens, apiTokens, sts };
}

async function failure(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (e) {
    if (e instanceof DomainError || e instanceof TokenRejected) return e;
    throw e;
  }
  throw new Error('expected a refusal, got success');
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const claimsOf = (jwt: string): { exp: number; parent?: string } =>
  JSON.parse(Buffer.from(jwt.split('.')[1], 'base64url').toString()) as {
    exp: number;
    parent?: string;
  };

const IDENTITY = { subject: 'user:alice', email: 'alice@example.com', groups: ['platform'] };

/** The principal an API token authenticates as. */
async function viaApiToken(
  w: Wired,
  subject: string,
  expiresAt?: Date,
): Promise<{ id: string; principal: Principal }> {
  const created = await w.apiTokens.create(ADMIN, { name: `t-${subject}`, subject, expiresAt });
  return { id: created.id, principal: (await w.apiTokens.verify(created.token)) as Principal };
}

/** Whether S3 credentials are accepted by the door's check (signature aside). */
async function s3Accepts(w: Wired, creds: { AccessKeyId: string; SessionToken: string }) {
  try {
    await w.sts.principalFor(creds.AccessKeyId, creds.SessionToken);
    return true;
  } catch (e) {
    if (e instanceof TokenRejected && e.reason === 'revoked') return false;
    throw e;
  }
}

describe(`derived credentials (${DATABASE_KIND})`, () => {
  let db: TestDatabase;
  let w: Wired;

  onTestDatabase(
    async (opened) => {
      db = opened;
      w = await wire(db.dataSource);
    },
    async () => {
      await w?.cache.beforeApplicationShutdown();
    },
  );

  it('S3 credentials minted with an API token name it, and stop when it is revoked', async () => {
    const { id, principal } = await viaApiToken(w, 'svc:revoked-parent');
    const creds = await w.sts.issue(principal);
    expect(claimsOf(creds.SessionToken).parent).toBe(`api_token:${id}`);
    expect(await s3Accepts(w, creds)).toBe(true);
    expect(await s3Accepts(w, creds)).toBe(true); // now cached as "not revoked"
    await w.apiTokens.revoke(ADMIN, id);
    const e = await failure(w.sts.principalFor(creds.AccessKeyId, creds.SessionToken));
    expect(e).toMatchObject({ reason: 'revoked' });
    expect(e.message).toMatch(/API token or login session .* revoked/);
  });

  it('logout revokes the session’s access tokens and the S3 credentials minted with them', async () => {
    const s = await w.tokens.startSession(IDENTITY);
    const principal = (await w.tokens.verify(s.access_token)) as Principal;
    expect(principal.credential?.parent.kind).toBe('refresh_family');
    const creds = await w.sts.issue(principal);
    expect(claimsOf(creds.SessionToken).parent).toBe(
      `refresh_family:${principal.credential?.parent.id}`,
    );
    expect(await s3Accepts(w, creds)).toBe(true);
    await w.tokens.logout(s.refresh_token);
    const e = await failure(w.tokens.verify(s.access_token));
    expect(e).toMatchObject({ code: 'unauthenticated' });
    expect(e.message).toMatch(/login session it belongs to has ended .*\(revoked\)$/);
    expect(await s3Accepts(w, creds)).toBe(false);
  });

  it('refresh-token reuse revokes the access tokens of the whole family', async () => {
    const first = await w.tokens.startSession(IDENTITY);
    const second = await w.tokens.refresh(first.refresh_token);
    expect((await w.tokens.verify(second.access_token))?.subject).toBe('user:alice');
    await failure(w.tokens.refresh(first.refresh_token)); // reuse
    for (const t of [first.access_token, second.access_token]) {
      expect((await failure(w.tokens.verify(t))).message).toMatch(/\(revoked\)/);
    }
  });

  it('a derived credential never outlives its parent', async () => {
    // S3 credentials (15 min) from an API token that expires in 2 minutes.
    const soon = new Date(Date.now() + 120_000);
    const { principal } = await viaApiToken(w, 'svc:short-parent', soon);
    const creds = await w.sts.issue(principal);
    expect(Date.parse(creds.Expiration)).toBeLessThanOrEqual(soon.getTime());
    expect(claimsOf(creds.SessionToken).exp).toBeLessThanOrEqual(soon.getTime() / 1000);
    // Without an expiry: the S3 lifetime.
    const { principal: lasting } = await viaApiToken(w, 'svc:lasting-parent');
    const full = await w.sts.issue(lasting);
    expect(claimsOf(full.SessionToken).exp - Date.now() / 1000).toBeGreaterThan(890);

    // An access token (1 h) of a session that ends in 100 s, and S3 credentials minted with it.
    const short = await wire(db.dataSource, { STATEHOUSE_TOKENS_REFRESH_TTL: '100s' });
    const s = await short.tokens.startSession({ subject: 'user:brief' });
    expect(s.expires_in).toBeLessThanOrEqual(100);
    const familyEnd = Date.now() / 1000 + 100;
    const access = claimsOf(s.access_token);
    expect(access.exp).toBeLessThanOrEqual(familyEnd + 1);
    const fromAccess = await short.sts.issue(
      (await short.tokens.verify(s.access_token)) as Principal,
    );
    expect(claimsOf(fromAccess.SessionToken).exp).toBeLessThanOrEqual(access.exp);
    // A rotation keeps the session's end.
    const r = await short.tokens.refresh(s.refresh_token);
    expect(claimsOf(r.access_token).exp).toBeLessThanOrEqual(familyEnd + 1);
  });

  it('bootstrap-admin (and the anonymous admin of STATEHOUSE_AUTH_DISABLE) mints no S3 credentials', async () => {
    const e = await failure(w.sts.issue(ADMIN));
    expect(e).toMatchObject({ code: 'forbidden' });
    expect(e.message).toMatch(/break-glass .* create an API token/);
    const anonymous: Principal = { subject: 'anonymous', kind: 'bootstrap', via: 'auth-disabled' };
    expect(await failure(w.sts.issue(anonymous))).toMatchObject({ code: 'forbidden' });
    expect(
      await failure(
        w.tokens.issueAccessToken(
          { subject: 'bootstrap-admin' },
          {
            familyId: randomUUID(),
            expiresAt: new Date(Date.now() + 60_000),
          },
        ),
      ),
    ).toMatchObject({ code: 'forbidden' });
  });

  it('tokens that name no parent are refused (access and S3 session tokens alike)', async () => {
    const { principal } = await viaApiToken(w, 'svc:no-parent');
    const creds = await w.sts.issue(principal);
    // Signed with the real key, like an old or forged token, but without the parent claim.
    const claims = claimsOf(creds.SessionToken) as Record<string, unknown>;
    delete claims.parent;
    const key = (w.keys as unknown as { signing: { kid: string; key: KeyObject } }).signing;
    const resign = (c: Record<string, unknown>) =>
      new SignJWT(c).setProtectedHeader({ alg: 'EdDSA', kid: key.kid, typ: 'JWT' }).sign(key.key);
    const e = await failure(w.sts.principalFor(creds.AccessKeyId, await resign(claims)));
    expect(e).toMatchObject({ reason: 'missing_claim' });
    const access: Record<string, unknown> = { ...claims, aud: ['api'] };
    delete access.sid;
    expect((await failure(w.tokens.verify(await resign(access)))).message).toMatch(
      /\(missing_claim\)/,
    );
    // …nor does a session token for bootstrap-admin count, whatever it names.
    const admin = { ...claimsOf(creds.SessionToken), sub: 'bootstrap-admin' };
    expect(await failure(w.sts.principalFor(creds.AccessKeyId, await resign(admin)))).toMatchObject(
      { reason: 'missing_claim' },
    );
  });

  it('an entry is kept while something derived could verify, then removed by a later revocation', async () => {
    const entry = async (id: string) =>
      (
        await db.dataSource.query<{ secs: number }[]>(
          `SELECT extract(epoch FROM keep_until - now())::float8 AS secs
             FROM credential_revocations WHERE parent_id = $1`,
          [id],
        )
      )[0];
    // A parent without an expiry: the longest derived lifetime (1 h access tokens) + slack.
    const lasting = await viaApiToken(w, 'svc:entry-lasting');
    await w.apiTokens.revoke(ADMIN, lasting.id);
    const kept = (await entry(lasting.id)).secs;
    expect(kept).toBeGreaterThan(3600);
    expect(kept).toBeLessThanOrEqual(3600 + 30 + 60 + 1);
    // A parent that expires in 2 minutes: until then (+ the verifiers' clock tolerance).
    const brief = await viaApiToken(w, 'svc:entry-brief', new Date(Date.now() + 120_000));
    await w.apiTokens.revoke(ADMIN, brief.id);
    expect((await entry(brief.id)).secs).toBeLessThanOrEqual(120 + 30 + 1);
    // Past its time, the next revocation removes it.
    await db.dataSource.query(
      `UPDATE credential_revocations SET keep_until = now() - interval '1 second' WHERE parent_id = $1`,
      [brief.id],
    );
    const next = await viaApiToken(w, 'svc:entry-next');
    await w.apiTokens.revoke(ADMIN, next.id);
    expect(await entry(brief.id)).toBeUndefined();
    expect(await entry(lasting.id)).toBeDefined();
  });

  it('answers are cached, and a revocation on this replica drops them at once', async () => {
    const { id, principal } = await viaApiToken(w, 'svc:cached');
    const creds = await w.sts.issue(principal);
    expect(await s3Accepts(w, creds)).toBe(true);
    const lookups = jest.spyOn(w.repo, 'isRevoked');
    try {
      expect(await s3Accepts(w, creds)).toBe(true);
      expect(lookups).not.toHaveBeenCalled();
      await w.apiTokens.revoke(ADMIN, id);
      expect(await s3Accepts(w, creds)).toBe(false);
      expect(lookups).toHaveBeenCalledTimes(1);
    } finally {
      lookups.mockRestore();
    }
  });
});

// ------------------------------------------------------------------ two replicas (PostgreSQL)

const describeOnPostgres = ON_POSTGRES ? describe : describe.skip;
const REPLICAS = 'revocation of derived credentials across two replicas (LISTEN/NOTIFY)';
const REPLICAS_NA = `${REPLICAS} — needs PostgreSQL: run via scripts/with-postgres.sh`;
if (!ON_POSTGRES)
  console.warn(`derived-credentials.spec.ts: skipped (not applicable): ${REPLICAS_NA}`);

describeOnPostgres(ON_POSTGRES ? REPLICAS : REPLICAS_NA, () => {
  let db: TestDatabase;
  let url: string;
  let a: Wired;
  let b: Wired;

  async function waitFor(what: string, check: () => boolean, ms = 5000) {
    const deadline = Date.now() + ms;
    while (!check()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await sleep(10);
    }
  }

  /** Polls replica B every 10 ms until it refuses `creds`; the time it took. */
  async function refusedByB(creds: { AccessKeyId: string; SessionToken: string }) {
    const t0 = Date.now();
    while (await s3Accepts(b, creds)) {
      if (Date.now() - t0 > 5000) return Infinity;
      await sleep(10);
    }
    return Date.now() - t0;
  }

  onTestDatabase(
    async (opened) => {
      db = opened;
      url = (db.dataSource.options as { url?: string }).url as string;
      a = await wire(db.dataSource, {}, url);
      b = await wire(await (db.connectAnother as () => Promise<DataSource>)(), {}, url);
      await waitFor('both replicas to LISTEN', () => a.cache.enabled && b.cache.enabled);
    },
    async () => {
      await a?.cache.beforeApplicationShutdown();
      await b?.cache.beforeApplicationShutdown();
    },
  );

  it('an API token revoked through A: its S3 credentials, cached as good on B, are refused by B within a second', async () => {
    const delays: number[] = [];
    for (let i = 0; i < 5; i++) {
      const { id, principal } = await viaApiToken(a, `svc:replicated-${i}`);
      const creds = await a.sts.issue(principal);
      expect(await s3Accepts(b, creds)).toBe(true);
      expect(await s3Accepts(b, creds)).toBe(true); // cached on B
      await a.apiTokens.revoke(ADMIN, id);
      delays.push(await refusedByB(creds));
    }
    for (const d of delays) expect(d).toBeLessThan(1000);
    console.log(
      `derived credentials: revocation through A refused by B after ${delays.join(', ')} ms`,
    );
  });

  it('a logout through A: the session’s access token is refused by B within a second', async () => {
    const s = await a.tokens.startSession(IDENTITY);
    expect((await b.tokens.verify(s.access_token))?.subject).toBe('user:alice');
    await a.tokens.logout(s.refresh_token);
    const t0 = Date.now();
    for (;;) {
      const refused = await b.tokens.verify(s.access_token).then(
        () => false,
        () => true,
      );
      if (refused) break;
      if (Date.now() - t0 > 5000) throw new Error('B still accepts the access token');
      await sleep(10);
    }
    expect(Date.now() - t0).toBeLessThan(1000);
  });

  it('while B listens it answers from its cache (control: a revocation written without NOTIFY is not seen)', async () => {
    const { id, principal } = await viaApiToken(a, 'svc:unnotified');
    const creds = await a.sts.issue(principal);
    expect(await s3Accepts(b, creds)).toBe(true);
    await db.dataSource.query(
      `INSERT INTO credential_revocations (parent_kind, parent_id, keep_until)
       VALUES ('api_token', $1, now() + interval '1 hour')`,
      [id],
    );
    await sleep(300);
    expect(await s3Accepts(b, creds)).toBe(true);
    // any notified revocation drops the cache
    const other = await viaApiToken(a, 'svc:nudge');
    await a.apiTokens.revoke(ADMIN, other.id);
    expect(await refusedByB(creds)).toBeLessThan(1000);
  });

  it('with the LISTEN connection killed, B asks the database: a revocation is seen at once', async () => {
    const { id, principal } = await viaApiToken(a, 'svc:unlistened');
    const creds = await a.sts.issue(principal);
    expect(await s3Accepts(b, creds)).toBe(true); // cached on B

    expect(await terminateListeners(url)).toBe(2);
    await waitFor('B to notice the lost LISTEN connection', () => !b.cache.enabled, 2000);

    // Straight into the database, with no NOTIFY: only a cache-less B can see it.
    await db.dataSource.query(
      `INSERT INTO credential_revocations (parent_kind, parent_id, keep_until)
       VALUES ('api_token', $1, now() + interval '1 hour')`,
      [id],
    );
    expect(b.cache.enabled).toBe(false);
    expect(await s3Accepts(b, creds)).toBe(false);
    await db.dataSource.query('DELETE FROM credential_revocations WHERE parent_id = $1', [id]);
    expect(await s3Accepts(b, creds)).toBe(true);

    // It comes back on its own, listening on both channels again.
    await waitFor('B to LISTEN again', () => a.cache.enabled && b.cache.enabled, 10_000);
    await a.apiTokens.revoke(ADMIN, id);
    expect(await refusedByB(creds)).toBeLessThan(1000);
  });
});
