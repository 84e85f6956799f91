/**
 * Access tokens, refresh-token families, API tokens and the signing keys, on a real database
 * (embedded PGlite, or PostgreSQL under scripts/with-postgres.sh), wired by hand.
 */
import { createHash, generateKeyPairSync, randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeProtectedHeader } from 'jose';
import { DataSource } from 'typeorm';
import { IdentityRepository } from '../../src/auth/identity.repository';
import { Principal } from '../../src/common/principal';
import { CredentialRevocations } from '../../src/auth/revocation/credential-revocations.service';
import { RevocationRepository } from '../../src/auth/revocation/revocation.repository';
import { API_TOKEN_PREFIX, ApiTokenService } from '../../src/auth/tokens/api-token.service';
import { SigningKeys } from '../../src/auth/tokens/signing-keys.service';
import { REFRESH_TOKEN_PREFIX, TokenService } from '../../src/auth/tokens/token.service';
import { DomainError } from '../../src/common/errors';
import { AppConfig, loadConfig } from '../../src/config/config';
import { AuthorizationService } from '../../src/rbac/authorization.service';
import { RbacCache } from '../../src/rbac/rbac-cache';
import { RbacRepository } from '../../src/rbac/rbac.repository';
import { DATABASE_KIND, onTestDatabase, TestDatabase } from '../support/database';
import { ADMIN, ALICE, BOB, failure, RecordingAudit } from '../support/services';

const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex');

function configFor(env: Record<string, string> = {}): AppConfig {
  return loadConfig({
    NODE_ENV: 'test',
    STATEHOUSE_DATA_DIR: mkdtempSync(join(tmpdir(), 'statehouse-tokens-')),
    STATEHOUSE_STORAGE: 'memory',
    STATEHOUSE_PUBLIC_URL: 'https://statehouse.example.test',
    ...env,
  });
}

interface Wired {
  config: AppConfig;
  keys: SigningKeys;
  tokens: TokenService;
  apiTokens: ApiTokenService;
  audit: RecordingAudit;
  revocations: CredentialRevocations;
}

/** What the AuthModule wires, by hand: one "replica" on `ds`. */
async function wire(ds: DataSource, env: Record<string, string> = {}): Promise<Wired> {
  const config = configFor(env);
  const keys = new SigningKeys(config, ds);
  await keys.onModuleInit();
  const repo = new IdentityRepository(ds);
  const audit = new RecordingAudit();
  const cache = new RbacCache(config);
  const revocations = new CredentialRevocations(config, new RevocationRepository(ds), cache);
  const tokens = new TokenService(config, keys, repo, audit, revocations);
  const authz = new AuthorizationService(new RbacRepository(ds), cache, audit);
  const apiTokens = new ApiTokenService(repo, authz, audit, revocations);
  return { config, keys, tokens, apiTokens, audit, revocations };
}

/** A login session for tests that only need an access token of some session. */
const SESSION = { familyId: randomUUID(), expiresAt: new Date(Date.now() + 86400_000) };

const IDENTITY = { subject: 'user:alice', email: 'alice@example.com', groups: ['platform'] };

describe(`refresh tokens (${DATABASE_KIND})`, () => {
  let db: TestDatabase;
  let w: Wired;

  onTestDatabase(async (opened) => {
    db = opened;
    w = await wire(db.dataSource);
  });

  const familyOf = async (refresh: string): Promise<string> =>
    (
      await db.dataSource.query<{ family_id: string }[]>(
        'SELECT family_id FROM refresh_tokens WHERE token_hash = $1',
        [sha256(refresh)],
      )
    )[0].family_id;

  it('a new session gives an access token for the identity and a shr_ refresh token', async () => {
    const s = await w.tokens.startSession(IDENTITY);
    expect(s.token_type).toBe('Bearer');
    expect(s.expires_in).toBe(3600);
    expect(s.refresh_token.startsWith(REFRESH_TOKEN_PREFIX)).toBe(true);
    expect(await w.tokens.verify(s.access_token)).toEqual({
      subject: 'user:alice',
      kind: 'user',
      via: 'access-token',
      email: 'alice@example.com',
      groups: ['platform'],
      credential: {
        parent: { kind: 'refresh_family', id: await familyOf(s.refresh_token) },
        notAfter: expect.any(Number) as number,
      },
    });
  });

  it('refresh tokens are stored only as their sha256', async () => {
    const s = await w.tokens.startSession(IDENTITY);
    const rows = await db.dataSource.query<{ j: string; token_hash: string }[]>(
      'SELECT row_to_json(r)::text AS j, token_hash FROM refresh_tokens r',
    );
    const secretPart = s.refresh_token.slice(REFRESH_TOKEN_PREFIX.length);
    for (const r of rows) expect(r.j).not.toContain(secretPart);
    expect(rows.map((r) => r.token_hash)).toContain(sha256(s.refresh_token));
  });

  it('rotation issues a new refresh token; reusing the old one revokes the family, the new one too', async () => {
    const first = await w.tokens.startSession(IDENTITY);
    const second = await w.tokens.refresh(first.refresh_token);
    expect(second.refresh_token).not.toBe(first.refresh_token);
    expect(second.refresh_token.startsWith(REFRESH_TOKEN_PREFIX)).toBe(true);
    expect((await w.tokens.verify(second.access_token))?.email).toBe('alice@example.com');
    expect(await familyOf(second.refresh_token)).toBe(await familyOf(first.refresh_token));

    const reuse = await failure(w.tokens.refresh(first.refresh_token));
    expect(reuse.code).toBe('unauthenticated');
    expect(reuse.message).toMatch(/already used/);
    expect(reuse.message).not.toContain(first.refresh_token);
    expect(w.audit.events.map((e) => e.type)).toContain('auth.refresh_reuse');

    const after = await failure(w.tokens.refresh(second.refresh_token));
    expect(after.code).toBe('unauthenticated');
    expect(after.message).toMatch(/revoked/);
    const live = await db.dataSource.query<{ n: number }[]>(
      'SELECT count(*)::int AS n FROM refresh_tokens WHERE family_id = $1 AND revoked_at IS NULL',
      [await familyOf(first.refresh_token)],
    );
    expect(live[0].n).toBe(0);
  });

  it('a chain of rotations keeps working while each token is used once', async () => {
    let s = await w.tokens.startSession(IDENTITY);
    for (let i = 0; i < 5; i++) s = await w.tokens.refresh(s.refresh_token);
    expect((await w.tokens.verify(s.access_token))?.subject).toBe('user:alice');
  });

  it('logout revokes the session: its refresh token stops working', async () => {
    const s = await w.tokens.startSession(IDENTITY);
    const rotated = await w.tokens.refresh(s.refresh_token);
    await w.tokens.logout(rotated.refresh_token);
    const e = await failure(w.tokens.refresh(rotated.refresh_token));
    expect(e.code).toBe('unauthenticated');
    expect(e.message).toMatch(/revoked/);
  });

  it('logout with an unknown token is a no-op (no oracle)', async () => {
    await expect(w.tokens.logout(`${REFRESH_TOKEN_PREFIX}unknown`)).resolves.toBeUndefined();
  });

  it('a family past its absolute lifetime is refused', async () => {
    const s = await w.tokens.startSession(IDENTITY);
    await db.dataSource.query(
      `UPDATE refresh_tokens SET family_expires_at = now() - interval '1 second' WHERE token_hash = $1`,
      [sha256(s.refresh_token)],
    );
    const e = await failure(w.tokens.refresh(s.refresh_token));
    expect(e.code).toBe('unauthenticated');
    expect(e.message).toMatch(/expired/);
  });

  it('the family lifetime is not extended by rotation', async () => {
    const s = await w.tokens.startSession(IDENTITY);
    const [{ family_expires_at: before }] = await db.dataSource.query<
      { family_expires_at: Date }[]
    >('SELECT family_expires_at FROM refresh_tokens WHERE token_hash = $1', [
      sha256(s.refresh_token),
    ]);
    const r = await w.tokens.refresh(s.refresh_token);
    const [{ family_expires_at: after }] = await db.dataSource.query<{ family_expires_at: Date }[]>(
      'SELECT family_expires_at FROM refresh_tokens WHERE token_hash = $1',
      [sha256(r.refresh_token)],
    );
    expect(new Date(after).getTime()).toBe(new Date(before).getTime());
    expect(new Date(before).getTime() - Date.now()).toBeGreaterThan(29 * 86400 * 1000);
  });

  it('unknown and foreign refresh tokens are refused', async () => {
    expect((await failure(w.tokens.refresh(`${REFRESH_TOKEN_PREFIX}nope`))).message).toMatch(
      /unknown/,
    );
    expect((await failure(w.tokens.refresh('sht_not-a-refresh-token'))).message).toMatch(
      /not a Statehouse refresh token/,
    );
  });

  it('concurrent use of one refresh token: exactly one rotation wins', async () => {
    const s = await w.tokens.startSession(IDENTITY);
    const ds2 = db.connectAnother ? await db.connectAnother() : db.dataSource;
    const other = new TokenService(
      w.config,
      w.keys,
      new IdentityRepository(ds2),
      new RecordingAudit(),
      w.revocations,
    );
    const attempts = Array.from({ length: 8 }, (_, i) =>
      (i % 2 === 0 ? w.tokens : other).refresh(s.refresh_token),
    );
    const results = await Promise.allSettled(attempts);
    const won = results.filter((r) => r.status === 'fulfilled');
    const lost = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    expect(won).toHaveLength(1);
    expect(lost).toHaveLength(7);
    for (const l of lost) {
      expect(l.reason).toBeInstanceOf(DomainError);
      expect((l.reason as DomainError).code).toBe('unauthenticated');
    }
    // Only one successor token was ever written for the presented one.
    const rows = await db.dataSource.query<{ n: number }[]>(
      'SELECT count(*)::int AS n FROM refresh_tokens WHERE family_id = $1',
      [await familyOf(s.refresh_token)],
    );
    expect(rows[0].n).toBe(2);
  });
});

describe(`API tokens (${DATABASE_KIND})`, () => {
  let db: TestDatabase;
  let w: Wired;

  onTestDatabase(async (opened) => {
    db = opened;
    w = await wire(db.dataSource);
  });

  const rowOf = async (id: string) =>
    (
      await db.dataSource.query<{ last_used_at: Date | null; token_hash: string }[]>(
        'SELECT * FROM api_tokens WHERE id = $1',
        [id],
      )
    )[0];

  it('a token acting as its creator: sht_ prefix, usable, stored only as sha256, carrying the latest login', async () => {
    await w.tokens.startSession(IDENTITY); // alice's latest login
    const alice: Principal = { ...ALICE, email: 'alice@example.com', groups: ['platform'] };
    const created = await w.apiTokens.create(alice, { name: 'ci-network' });
    expect(created.token).toMatch(/^sht_[A-Za-z0-9_-]{43}$/);
    expect(created).toMatchObject({ name: 'ci-network', subject: 'user:alice' });
    expect(await w.apiTokens.verify(created.token)).toEqual({
      subject: 'user:alice',
      kind: 'user',
      via: 'api-token',
      email: 'alice@example.com',
      groups: ['platform'],
      // what it mints ends with the login whose groups it carries (30 days)
      credential: {
        parent: { kind: 'api_token', id: created.id },
        notAfter: expect.any(Number) as number,
      },
    });
    expect((await rowOf(created.id)).token_hash).toBe(sha256(created.token));
    const dump = await db.dataSource.query<{ j: string }[]>(
      'SELECT row_to_json(t)::text AS j FROM api_tokens t',
    );
    const secretPart = created.token.slice(API_TOKEN_PREFIX.length);
    for (const r of dump) expect(r.j).not.toContain(secretPart);
    expect(JSON.stringify(w.audit.events)).not.toContain(secretPart);
  });

  it('the secret is never listed again', async () => {
    const created = await w.apiTokens.create(BOB, { name: 'bob-listing' });
    const listed = await w.apiTokens.list(BOB);
    expect(listed.map((t) => t.id)).toContain(created.id);
    expect(JSON.stringify(listed)).not.toContain(created.token.slice(4));
    for (const t of listed) expect(t).not.toHaveProperty('token');
  });

  it('last use is recorded', async () => {
    const created = await w.apiTokens.create(ALICE, { name: 'last-used' });
    expect((await rowOf(created.id)).last_used_at).toBeNull();
    const before = Date.now();
    await w.apiTokens.verify(created.token);
    const used = (await rowOf(created.id)).last_used_at;
    expect(used).not.toBeNull();
    expect(Math.abs(new Date(used as Date).getTime() - before)).toBeLessThan(60_000);
    // An older mark is moved forward on the next use.
    await db.dataSource.query(
      `UPDATE api_tokens SET last_used_at = now() - interval '2 hours' WHERE id = $1`,
      [created.id],
    );
    await w.apiTokens.verify(created.token);
    const again = new Date((await rowOf(created.id)).last_used_at as Date).getTime();
    expect(Date.now() - again).toBeLessThan(60_000);
  });

  it('a revoked token is refused', async () => {
    const created = await w.apiTokens.create(ALICE, { name: 'to-revoke' });
    await w.apiTokens.revoke(ALICE, created.id);
    const e = await failure(w.apiTokens.verify(created.token));
    expect(e.code).toBe('unauthenticated');
    expect(e.message).toMatch(/revoked/);
    expect(e.message).not.toContain(created.token);
  });

  it('another user cannot revoke someone else’s token (it does not exist for them)', async () => {
    const created = await w.apiTokens.create(ALICE, { name: 'alice-only' });
    expect((await failure(w.apiTokens.revoke(BOB, created.id))).code).toBe('not_found');
    expect((await w.apiTokens.verify(created.token))?.subject).toBe('user:alice');
  });

  it('an expired token is refused', async () => {
    const created = await w.apiTokens.create(ALICE, {
      name: 'short-lived',
      expiresAt: new Date(Date.now() + 3600_000),
    });
    expect((await w.apiTokens.verify(created.token))?.subject).toBe('user:alice');
    await db.dataSource.query(
      `UPDATE api_tokens SET expires_at = now() - interval '1 second' WHERE id = $1`,
      [created.id],
    );
    const e = await failure(w.apiTokens.verify(created.token));
    expect(e.code).toBe('unauthenticated');
    expect(e.message).toMatch(/expired/);
  });

  it('an expiry in the past is refused at creation', async () => {
    const e = await failure(
      w.apiTokens.create(ALICE, { name: 'past', expiresAt: new Date(Date.now() - 1000) }),
    );
    expect(e.code).toBe('invalid_request');
  });

  it('an unknown sht_ token is refused; other secrets are not its kind', async () => {
    const e = await failure(w.apiTokens.verify(`${API_TOKEN_PREFIX}${'x'.repeat(43)}`));
    expect(e.code).toBe('unauthenticated');
    expect(e.message).toMatch(/unknown/);
    expect(await w.apiTokens.verify('eyJ.eyJ.sig')).toBeNull();
  });

  it('svc: tokens need token.manage: a user is refused', async () => {
    const e = await failure(w.apiTokens.create(ALICE, { name: 'ci', subject: 'svc:ci' }));
    expect(e.code).toBe('forbidden');
    expect(e.message).toMatch(/token\.manage/);
  });

  it('svc: tokens may be created by bootstrap-admin, and act as the service principal', async () => {
    const created = await w.apiTokens.create(ADMIN, { name: 'ci', subject: 'svc:ci-network' });
    expect(created).toMatchObject({ subject: 'svc:ci-network', createdBy: 'bootstrap-admin' });
    expect(await w.apiTokens.verify(created.token)).toEqual({
      subject: 'svc:ci-network',
      kind: 'service',
      via: 'api-token',
      credential: { parent: { kind: 'api_token', id: created.id } },
    });
  });

  it.each([['user:bob'], ['svc:'], ['svc:UPPER'], ['bootstrap-admin-2'], ['svc:a b']])(
    'a subject that is neither yourself nor svc:<name> is refused: %s',
    async (subject) => {
      const e = await failure(w.apiTokens.create(ADMIN, { name: 'x', subject }));
      expect(e.code).toBe('invalid_request');
    },
  );

  it('bootstrap-admin cannot mint a token acting as itself', async () => {
    expect((await failure(w.apiTokens.create(ADMIN, { name: 'me' }))).code).toBe('invalid_request');
    expect(
      (await failure(w.apiTokens.create(ADMIN, { name: 'me', subject: 'bootstrap-admin' }))).code,
    ).toBe('invalid_request');
    const rows = await db.dataSource.query<{ n: number }[]>(
      `SELECT count(*)::int AS n FROM api_tokens WHERE subject = 'bootstrap-admin'`,
    );
    expect(rows[0].n).toBe(0);
  });
});

describe(`signing keys (${DATABASE_KIND})`, () => {
  let db: TestDatabase;

  onTestDatabase((opened) => {
    db = opened;
  });

  it('restarts do not invalidate tokens, and two replicas agree: the generated key is kept in the database', async () => {
    const first = await wire(db.dataSource);
    const token = (await first.tokens.issueAccessToken({ subject: 'user:alice' }, SESSION)).token;
    const ds2 = db.connectAnother ? await db.connectAnother() : db.dataSource;
    const second = await wire(ds2);
    expect(second.keys.kid).toBe(first.keys.kid);
    expect(decodeProtectedHeader(token).kid).toBe(first.keys.kid);
    expect((await second.tokens.verify(token))?.subject).toBe('user:alice');
    const back = (await second.tokens.issueAccessToken({ subject: 'user:bob' }, SESSION)).token;
    expect((await first.tokens.verify(back))?.subject).toBe('user:bob');
    const rows = await db.dataSource.query<{ n: number }[]>(
      'SELECT count(*)::int AS n FROM signing_keys',
    );
    expect(rows[0].n).toBe(1);
    expect(first.keys.jwks().keys).toEqual([
      expect.objectContaining({ kty: 'OKP', crv: 'Ed25519', kid: first.keys.kid, alg: 'EdDSA' }),
    ]);
    for (const k of first.keys.jwks().keys) expect(k).not.toHaveProperty('d');
  });

  it('rotation: with a configured key file a new kid signs, and tokens of the generated key still verify', async () => {
    const generated = await wire(db.dataSource);
    const old = (await generated.tokens.issueAccessToken({ subject: 'user:alice' }, SESSION)).token;

    const dir = mkdtempSync(join(tmpdir(), 'statehouse-key-'));
    const file = join(dir, 'signing.pem');
    const { privateKey } = generateKeyPairSync('ed25519');
    writeFileSync(file, privateKey.export({ type: 'pkcs8', format: 'pem' }));
    const ds2 = db.connectAnother ? await db.connectAnother() : db.dataSource;
    const rotated = await wire(ds2, { STATEHOUSE_TOKENS_PRIVATE_KEY_FILE: file });

    expect(rotated.keys.kid).not.toBe(generated.keys.kid);
    const fresh = (await rotated.tokens.issueAccessToken({ subject: 'user:bob' }, SESSION)).token;
    expect(decodeProtectedHeader(fresh).kid).toBe(rotated.keys.kid);
    expect((await rotated.tokens.verify(fresh))?.subject).toBe('user:bob');
    expect((await rotated.tokens.verify(old))?.subject).toBe('user:alice');
    expect(
      rotated.keys
        .jwks()
        .keys.map((k) => k.kid)
        .sort(),
    ).toEqual([generated.keys.kid, rotated.keys.kid].sort());
    // The configured private key never goes to the database.
    const stored = await db.dataSource.query<{ private_pem: string | null }[]>(
      'SELECT private_pem FROM signing_keys WHERE kid = $1',
      [rotated.keys.kid],
    );
    expect(stored[0].private_pem).toBeNull();

    // A replica started before the rotation learns the new kid (after its reload cooldown).
    const realNow = Date.now.bind(Date);
    const spy = jest.spyOn(Date, 'now').mockImplementation(() => realNow() + 11_000);
    try {
      expect((await generated.tokens.verify(fresh))?.subject).toBe('user:bob');
    } finally {
      spy.mockRestore();
    }

    // A restart with the same file keeps the same kid.
    const again = await wire(ds2, { STATEHOUSE_TOKENS_PRIVATE_KEY_FILE: file });
    expect(again.keys.kid).toBe(rotated.keys.kid);
    expect((await again.tokens.verify(fresh))?.subject).toBe('user:bob');
  });
});
