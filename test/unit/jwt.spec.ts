/**
 * The pure verifier of Statehouse JWTs (access tokens and S3 session tokens), with keys made
 * here (node:crypto Ed25519) and tokens built here with `jose`: each refusal names its check
 * (`reason`) and never repeats the token.
 */
import { generateKeyPairSync, KeyObject } from 'node:crypto';
import { SignJWT } from 'jose';
import {
  CLOCK_TOLERANCE_SECONDS,
  TokenFailure,
  TokenRejected,
  verifiedTokenReuse,
  verifySessionToken,
  verifyStatehouseJwt,
} from '../../src/auth/tokens/jwt';
import { tokenVerifications } from '../../src/auth/tokens/verification-counts';
import {
  derivedExpiry,
  formatParent,
  parseParent,
} from '../../src/auth/revocation/credential-parent';

const ISSUER = 'https://statehouse.example.test';
const KID = 'key-2026-a';
const SID = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ';

const { privateKey, publicKey } = generateKeyPairSync('ed25519');
const other = generateKeyPairSync('ed25519');
const KEYS: ReadonlyMap<string, KeyObject> = new Map([[KID, publicKey]]);

const now = (): number => Math.floor(Date.now() / 1000);
const b64 = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url');

interface Spec {
  claims?: Record<string, unknown>;
  header?: Record<string, unknown>;
  key?: KeyObject;
  sub?: string | null;
  jti?: string | null;
  aud?: string | string[];
  iss?: string;
  iat?: number;
  exp?: number;
}

/** A token like the server issues, with any part overridden (null: leave the claim out). */
async function token(spec: Spec = {}): Promise<string> {
  const t = now();
  const payload: Record<string, unknown> = {
    iss: spec.iss ?? ISSUER,
    aud: spec.aud ?? ['api'],
    iat: spec.iat ?? t,
    exp: spec.exp ?? t + 3600,
    ...spec.claims,
  };
  if (spec.sub !== null) payload.sub = spec.sub ?? 'user:alice';
  if (spec.jti !== null) payload.jti = spec.jti ?? 'jti-1';
  return new SignJWT(payload)
    .setProtectedHeader({ alg: 'EdDSA', kid: KID, typ: 'JWT', ...spec.header })
    .sign(spec.key ?? privateKey);
}

const PARENT = 'api_token:00000000-0000-4000-8000-000000000001';
const sessionToken = (spec: Spec = {}): Promise<string> =>
  token({ aud: ['s3'], ...spec, claims: { sid: SID, parent: PARENT, ...spec.claims } });

/** The refusal of a verification that must fail. */
async function refusal(p: Promise<unknown>): Promise<TokenRejected> {
  try {
    await p;
  } catch (e) {
    if (e instanceof TokenRejected) return e;
    throw e;
  }
  throw new Error('expected the token to be refused, but it was accepted');
}

/** Asserts the reason, and that the message holds neither the token nor any part of it. */
async function expectRefused(
  p: Promise<unknown>,
  presented: string,
  reason: TokenFailure,
): Promise<TokenRejected> {
  const e = await refusal(p);
  expect(e.reason).toBe(reason);
  if (presented !== '') expect(e.message).not.toContain(presented);
  for (const part of presented.split('.')) {
    if (part.length >= 8) expect(e.message).not.toContain(part);
  }
  return e;
}

const verifyApi = (t: string, keys = KEYS) =>
  verifyStatehouseJwt(t, keys, { issuer: ISSUER, audience: 'api' });
const verifySession = (t: string, sid = SID) =>
  verifySessionToken(t, KEYS, { issuer: ISSUER }, sid);

describe('verifyStatehouseJwt accepts', () => {
  it('a valid access token, returning its claims', async () => {
    const t = now();
    const claims = await verifyApi(
      await token({
        iat: t,
        exp: t + 600,
        jti: 'j-42',
        claims: { email: 'alice@example.com', groups: ['platform', 7, 'ops'] },
      }),
    );
    expect(claims).toEqual({
      sub: 'user:alice',
      aud: ['api'],
      iat: t,
      exp: t + 600,
      jti: 'j-42',
      email: 'alice@example.com',
      groups: ['platform', 'ops'],
    });
  });

  it('a token whose audience is the plain string "api", as an array', async () => {
    expect((await verifyApi(await token({ aud: 'api' }))).aud).toEqual(['api']);
  });

  it('a token signed by any of several verification keys (rotation by kid)', async () => {
    const keys = new Map([
      [KID, publicKey],
      ['key-2026-b', other.publicKey],
    ]);
    const signedByNew = await token({ key: other.privateKey, header: { kid: 'key-2026-b' } });
    expect((await verifyApi(signedByNew, keys)).sub).toBe('user:alice');
    expect((await verifyApi(await token(), keys)).sub).toBe('user:alice');
  });

  it('a token that expired less than the clock tolerance ago', async () => {
    expect(CLOCK_TOLERANCE_SECONDS).toBe(30);
    const t = now();
    await expect(verifyApi(await token({ iat: t - 600, exp: t - 10 }))).resolves.toMatchObject({
      sub: 'user:alice',
    });
  });

  it('a token whose nbf is in the future by less than the clock tolerance', async () => {
    await expect(verifyApi(await token({ claims: { nbf: now() + 15 } }))).resolves.toMatchObject({
      sub: 'user:alice',
    });
  });
});

describe('verifyStatehouseJwt refuses', () => {
  it('an expired token (expired)', async () => {
    const t = now();
    const presented = await token({ iat: t - 7200, exp: t - 120 });
    await expectRefused(verifyApi(presented), presented, 'expired');
  });

  it('a token not valid yet: nbf beyond the clock tolerance (not_yet_valid)', async () => {
    const presented = await token({ claims: { nbf: now() + 120 } });
    await expectRefused(verifyApi(presented), presented, 'not_yet_valid');
  });

  it('a token from another issuer (wrong_issuer)', async () => {
    const presented = await token({ iss: 'https://evil.example.test' });
    await expectRefused(verifyApi(presented), presented, 'wrong_issuer');
  });

  it('an s3 session token used as an access token (wrong_audience)', async () => {
    const presented = await sessionToken();
    await expectRefused(verifyApi(presented), presented, 'wrong_audience');
  });

  it('a token for an audience that is neither api nor s3 (wrong_audience)', async () => {
    const presented = await token({ aud: ['statehouse-cli'] });
    await expectRefused(verifyApi(presented), presented, 'wrong_audience');
  });

  it('an unsigned token, alg "none" (bad_algorithm)', async () => {
    const t = now();
    const presented = `${b64({ alg: 'none', kid: KID, typ: 'JWT' })}.${b64({
      iss: ISSUER,
      sub: 'bootstrap-admin',
      aud: ['api'],
      iat: t,
      exp: t + 600,
      jti: 'forged',
    })}.`;
    await expectRefused(verifyApi(presented), presented, 'bad_algorithm');
  });

  it.each([
    ['the raw 32-byte public key', () => publicKey.export({ format: 'jwk' }).x as string],
    ['the SPKI PEM of the public key', () => publicKey.export({ type: 'spki', format: 'pem' })],
  ])('an HS256 token with %s as the HMAC secret (bad_algorithm)', async (_what, secretOf) => {
    const raw = secretOf();
    const secret =
      typeof raw === 'string' && !raw.startsWith('-----')
        ? Buffer.from(raw, 'base64url')
        : Buffer.from(raw);
    const t = now();
    const presented = await new SignJWT({ aud: ['api'], jti: 'forged' })
      .setProtectedHeader({ alg: 'HS256', kid: KID, typ: 'JWT' })
      .setIssuer(ISSUER)
      .setSubject('bootstrap-admin')
      .setIssuedAt(t)
      .setExpirationTime(t + 600)
      .sign(secret);
    await expectRefused(verifyApi(presented), presented, 'bad_algorithm');
  });

  it('a token signed with a key of an unknown kid (unknown_key)', async () => {
    const presented = await token({ key: other.privateKey, header: { kid: 'not-ours' } });
    await expectRefused(verifyApi(presented), presented, 'unknown_key');
  });

  it('a token without a kid (unknown_key)', async () => {
    const presented = await new SignJWT({ aud: ['api'], jti: 'j', sub: 'user:a', iss: ISSUER })
      .setProtectedHeader({ alg: 'EdDSA', typ: 'JWT' })
      .setIssuedAt()
      .setExpirationTime('1h')
      .sign(privateKey);
    await expectRefused(verifyApi(presented), presented, 'unknown_key');
  });

  it('a token signed by another key that claims our kid (bad_signature)', async () => {
    const presented = await token({ key: other.privateKey });
    await expectRefused(verifyApi(presented), presented, 'bad_signature');
  });

  it('a token whose payload was altered after signing (bad_signature)', async () => {
    const [h, p, s] = (await token()).split('.');
    const payload = JSON.parse(Buffer.from(p, 'base64url').toString()) as Record<string, unknown>;
    const presented = `${h}.${b64({ ...payload, sub: 'bootstrap-admin' })}.${s}`;
    await expectRefused(verifyApi(presented), presented, 'bad_signature');
  });

  it('a token whose signature was altered (bad_signature)', async () => {
    const [h, p, s] = (await token()).split('.');
    const sig = Buffer.from(s, 'base64url');
    sig[0] ^= 0x01;
    const presented = `${h}.${p}.${sig.toString('base64url')}`;
    await expectRefused(verifyApi(presented), presented, 'bad_signature');
  });

  it('a token whose header was altered (typ changed) (bad_signature)', async () => {
    const [, p, s] = (await token()).split('.');
    const presented = `${b64({ alg: 'EdDSA', kid: KID, typ: 'at+jwt' })}.${p}.${s}`;
    await expectRefused(verifyApi(presented), presented, 'bad_signature');
  });

  it.each([
    ['a word', 'garbage-not-a-token-at-all'],
    ['three dotted words', 'aaaaaaaaaa.bbbbbbbbbb.cccccccccc'],
    ['an empty string', ''],
    ['a header that is not JSON', `${Buffer.from('{not json').toString('base64url')}.e30.sig`],
  ])('garbage: %s (malformed)', async (_what, presented) => {
    await expectRefused(verifyApi(presented), presented, 'malformed');
  });

  it('a token whose payload is not JSON (malformed)', async () => {
    const [h, , s] = (await token()).split('.');
    const presented = `${h}.${Buffer.from('not json at all').toString('base64url')}.${s}`;
    const e = await refusal(verifyApi(presented));
    // Either check is right for such a token, as long as it is refused and named.
    expect(['malformed', 'bad_signature']).toContain(e.reason);
    expect(e.message).not.toContain(presented);
  });

  it('a token without a subject (missing_claim)', async () => {
    const presented = await token({ sub: null });
    await expectRefused(verifyApi(presented), presented, 'missing_claim');
  });

  it('a token with an empty subject (missing_claim)', async () => {
    const presented = await token({ sub: '' });
    await expectRefused(verifyApi(presented), presented, 'missing_claim');
  });

  it('a token without a jti (missing_claim)', async () => {
    const presented = await token({ jti: null });
    await expectRefused(verifyApi(presented), presented, 'missing_claim');
  });

  it('a token without an expiry (missing_claim)', async () => {
    const presented = await new SignJWT({ aud: ['api'], jti: 'j', sub: 'user:a', iss: ISSUER })
      .setProtectedHeader({ alg: 'EdDSA', kid: KID })
      .setIssuedAt()
      .sign(privateKey);
    await expectRefused(verifyApi(presented), presented, 'missing_claim');
  });
});

describe('verifySessionToken', () => {
  it('accepts an s3-only token whose sid is the access key’s session id', async () => {
    const claims = await verifySession(await sessionToken({ claims: { email: 'a@x.test' } }));
    expect(claims).toMatchObject({
      sub: 'user:alice',
      aud: ['s3'],
      sid: SID,
      email: 'a@x.test',
      parent: { kind: 'api_token', id: '00000000-0000-4000-8000-000000000001' },
    });
  });

  it.each([
    ['absent', undefined],
    ['of an unknown kind', 'bootstrap:00000000-0000-4000-8000-000000000001'],
    ['not naming a uuid', "api_token:1' OR '1'='1"],
    ['not a string', { kind: 'api_token' }],
  ])('refuses a session token whose parent credential is %s (missing_claim)', async (_, parent) => {
    const presented = await sessionToken({ claims: { parent } });
    const e = await expectRefused(verifySession(presented), presented, 'missing_claim');
    expect(e.message).toMatch(/\(parent\)/);
  });

  it('refuses a session token issued with other credentials (session_mismatch)', async () => {
    const presented = await sessionToken();
    const e = await expectRefused(
      verifySession(presented, 'ZYXWVUTSRQPONMLKJIHGFEDCBA'),
      presented,
      'session_mismatch',
    );
    expect(e.message).not.toContain(SID);
  });

  it('refuses a session token when the access key has no session id (session_mismatch)', async () => {
    const presented = await sessionToken();
    await expectRefused(verifySession(presented, ''), presented, 'session_mismatch');
  });

  it('refuses a session token without a sid (missing_claim)', async () => {
    const presented = await token({ aud: ['s3'] });
    await expectRefused(verifySession(presented), presented, 'missing_claim');
  });

  it('refuses an api access token as a session token, even with a matching sid (wrong_audience)', async () => {
    const presented = await token({ aud: ['api'], claims: { sid: SID } });
    await expectRefused(verifySession(presented), presented, 'wrong_audience');
  });

  it('refuses a token for both audiences ["s3","api"] (wrong_audience)', async () => {
    const presented = await token({ aud: ['s3', 'api'], claims: { sid: SID } });
    await expectRefused(verifySession(presented), presented, 'wrong_audience');
  });

  it('refuses an API token (sht_…) as a session token (malformed)', async () => {
    const presented = 'sht_' + 'A'.repeat(43);
    await expectRefused(verifySession(presented), presented, 'malformed');
  });

  it('applies every access-token check too: expired, wrong issuer, alg none', async () => {
    const t = now();
    const expired = await sessionToken({ iat: t - 3600, exp: t - 120 });
    await expectRefused(verifySession(expired), expired, 'expired');
    const foreign = await sessionToken({ iss: 'https://evil.example.test' });
    await expectRefused(verifySession(foreign), foreign, 'wrong_issuer');
    const none = `${b64({ alg: 'none', kid: KID })}.${b64({
      iss: ISSUER,
      sub: 'user:alice',
      aud: ['s3'],
      sid: SID,
      iat: t,
      exp: t + 600,
      jti: 'x',
    })}.`;
    await expectRefused(verifySession(none), none, 'bad_algorithm');
  });
});

describe('credential parents and derived expiry', () => {
  it('a parent claim round-trips; anything else is no parent', () => {
    const id = '0f8fad5b-d9cb-469f-a165-70867728950e';
    for (const kind of ['api_token', 'refresh_family'] as const) {
      expect(parseParent(formatParent({ kind, id }))).toEqual({ kind, id });
    }
    for (const bad of [
      undefined,
      42,
      '',
      `svc:${id}`,
      `api_token:${id.toUpperCase()}`,
      'api_token:',
    ]) {
      expect(parseParent(bad)).toBeUndefined();
    }
  });

  it('a derived credential expires after its own lifetime or with its parent, whichever is first', () => {
    expect(derivedExpiry(1000, 900)).toBe(1900);
    expect(derivedExpiry(1000, 900, 5000)).toBe(1900);
    expect(derivedExpiry(1000, 900, 1120)).toBe(1120);
  });
});

describe('the verification counts (statehouse_token_verifications_total)', () => {
  const counts = () => structuredClone(tokenVerifications);

  it('count each verification once: in full, then a kept verdict, or refused; by credential', async () => {
    const access = await token({ jti: 'counted-1' });
    const session = await sessionToken({ jti: 'counted-2' });
    const before = counts();
    await verifyApi(access);
    await verifyApi(access);
    await verifySession(session);
    await refusal(verifyApi(access, new Map([[KID, other.publicKey]])));
    const after = counts();
    expect(after.access_token).toEqual({
      verified: before.access_token.verified + 1,
      reused: before.access_token.reused + 1,
      refused: before.access_token.refused + 1,
    });
    expect(after.session_token).toEqual({
      ...before.session_token,
      verified: before.session_token.verified + 1,
    });
    expect(after.api_token).toEqual(before.api_token);
  });
});

describe('a token verified before (its verdict is kept)', () => {
  const reuses = () => verifiedTokenReuse.count;

  it('is not verified again: the same claims, each caller its own copy', async () => {
    const t = await token({ jti: 'kept-1', claims: { groups: ['ops'] } });
    const first = await verifyApi(t);
    const before = reuses();
    const second = await verifyApi(t);
    expect(reuses()).toBe(before + 1);
    expect(second).toEqual(first);
    second.groups?.push('admins');
    second.aud.push('s3');
    expect(await verifyApi(t)).toEqual(first);
  });

  it('is refused once its key is no longer the key of its kid (retired, or replaced)', async () => {
    const t = await token({ jti: 'kept-2' });
    await verifyApi(t);
    await expectRefused(verifyApi(t, new Map()), t, 'unknown_key');
    await expectRefused(verifyApi(t, new Map([[KID, other.publicKey]])), t, 'bad_signature');
    await expect(verifyApi(t)).resolves.toMatchObject({ jti: 'kept-2' });
  });

  it('is refused once it expired, and before it is valid, as on its first use', async () => {
    const t = await token({ jti: 'kept-3', exp: now() + 60, claims: { nbf: now() - 10 } });
    await verifyApi(t);
    const later = new Date((now() + 60 + CLOCK_TOLERANCE_SECONDS + 5) * 1000);
    await expectRefused(
      verifyStatehouseJwt(t, KEYS, { issuer: ISSUER, audience: 'api', currentDate: later }),
      t,
      'expired',
    );
    const earlier = new Date((now() - 10 - CLOCK_TOLERANCE_SECONDS - 5) * 1000);
    await expectRefused(
      verifyStatehouseJwt(t, KEYS, { issuer: ISSUER, audience: 'api', currentDate: earlier }),
      t,
      'not_yet_valid',
    );
  });

  it('is refused for another audience or issuer than it was verified for', async () => {
    const t = await token({ jti: 'kept-4' });
    await verifyApi(t);
    await expectRefused(
      verifyStatehouseJwt(t, KEYS, { issuer: ISSUER, audience: 's3' }),
      t,
      'wrong_audience',
    );
    await expectRefused(
      verifyStatehouseJwt(t, KEYS, { issuer: 'https://elsewhere.test', audience: 'api' }),
      t,
      'wrong_issuer',
    );
  });
});
