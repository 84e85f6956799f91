/**
 * STS-style S3 credentials without a session table: the access key id carries the HMAC key id
 * and a random session id, and the secret is re-derived from them on any replica.
 */
import { createHmac, randomBytes } from 'node:crypto';
import fc from 'fast-check';
import {
  ACCESS_KEY_PREFIX,
  accessKeyId,
  deriveSecretAccessKey,
  newSessionId,
  parseAccessKeyId,
  secretsEqual,
} from '../../src/auth/sts/sts-credentials';

const SESSION_ID = /^[A-Z2-7]{26}$/;
const kidArb = fc.string({
  unit: fc.constantFrom(...'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'.split('')),
  minLength: 1,
  maxLength: 8,
});
const sessionArb = fc.string({
  unit: fc.constantFrom(...'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567'.split('')),
  minLength: 26,
  maxLength: 26,
});

describe('access key ids', () => {
  it('start with the SH prefix and have the documented shape', () => {
    const id = accessKeyId('K1', newSessionId());
    expect(ACCESS_KEY_PREFIX).toBe('SH');
    expect(id).toMatch(/^SHK1[A-Z2-7]{26}$/);
  });

  it('parse back into their key id and session id, for every valid key id (round trip)', () => {
    fc.assert(
      fc.property(kidArb, sessionArb, (kid, sid) => {
        expect(parseAccessKeyId(accessKeyId(kid, sid))).toEqual({ kid, sessionId: sid });
      }),
      { numRuns: 2000 },
    );
  });

  it('round trip with real session ids and key ids of 1 to 8 characters', () => {
    for (const kid of ['K', 'K1', 'ROT2026', 'ABCDEFGH', '12345678']) {
      const sid = newSessionId();
      expect(parseAccessKeyId(accessKeyId(kid, sid))).toEqual({ kid, sessionId: sid });
    }
  });

  it.each([
    ['an AWS access key id', 'AKIAIOSFODNN7EXAMPLE'],
    ['an AWS temporary access key id', 'ASIAIOSFODNN7EXAMPLEABCDEFGHIJ'],
    ['an empty string', ''],
    ['the prefix alone', 'SH'],
    ['no key id (prefix + session id only)', `SH${'A'.repeat(26)}`],
    ['a key id of 9 characters', `SHABCDEFGHI${'A'.repeat(26)}`],
    ['a session id one character short', `SHK1${'A'.repeat(24)}`],
    ['lower case', `shk1${'a'.repeat(26)}`],
    ['a lower-case session id', `SHK1${'a'.repeat(26)}`],
    ['digits outside base32 in the session id', `SHK1${'A'.repeat(25)}1`],
    ['an 8 in the session id', `SHK1${'A'.repeat(25)}8`],
    ['a trailing newline', `SHK1${'A'.repeat(26)}\n`],
    ['a leading space', ` SHK1${'A'.repeat(26)}`],
    ['a dash in the key id', `SHK-1${'A'.repeat(26)}`],
    ['another prefix', `XHK1${'A'.repeat(26)}`],
  ])('parse refuses %s', (_what, id) => {
    expect(parseAccessKeyId(id)).toBeUndefined();
  });
});

describe('session ids', () => {
  it('are 26 base32 characters, with no collision in 10 000', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 10_000; i++) {
      const sid = newSessionId();
      expect(sid).toMatch(SESSION_ID);
      seen.add(sid);
    }
    expect(seen.size).toBe(10_000);
  });

  it('use every base32 character in every position (they are random, not a counter)', () => {
    const byPosition: Set<string>[] = Array.from({ length: 26 }, () => new Set<string>());
    for (let i = 0; i < 4000; i++) {
      const sid = newSessionId();
      for (let p = 0; p < 26; p++) byPosition[p].add(sid[p]);
    }
    for (const chars of byPosition) expect(chars.size).toBe(32);
  });
});

describe('secret access keys', () => {
  const key = randomBytes(32);
  const sid = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ';

  it('are base64url HMAC-SHA256 of "statehouse-sts-v1:<session id>" (replicas and versions agree)', () => {
    const expected = createHmac('sha256', key)
      .update(`statehouse-sts-v1:${sid}`)
      .digest('base64url');
    expect(deriveSecretAccessKey(key, sid)).toBe(expected);
    expect(deriveSecretAccessKey(key, sid)).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  it('are deterministic: the same key and session id give the same secret', () => {
    expect(deriveSecretAccessKey(Buffer.from(key), sid)).toBe(deriveSecretAccessKey(key, sid));
  });

  it('depend on the HMAC key', () => {
    const other = Buffer.from(key);
    other[0] ^= 1;
    expect(deriveSecretAccessKey(other, sid)).not.toBe(deriveSecretAccessKey(key, sid));
  });

  it('depend on the session id', () => {
    expect(deriveSecretAccessKey(key, 'ABCDEFGHIJKLMNOPQRSTUVWXY2')).not.toBe(
      deriveSecretAccessKey(key, sid),
    );
  });

  it('never contain the session id or the key', () => {
    const secret = deriveSecretAccessKey(key, sid);
    expect(secret).not.toContain(sid);
    expect(secret).not.toContain(key.toString('base64url'));
  });
});

describe('secretsEqual', () => {
  it('is true for equal secrets', () => {
    expect(secretsEqual('abc123', 'abc123')).toBe(true);
    expect(secretsEqual('', '')).toBe(true);
    expect(secretsEqual('ünïcödé', 'ünïcödé')).toBe(true);
  });

  it('is false for secrets that differ in one character', () => {
    expect(secretsEqual('abc123', 'abc124')).toBe(false);
    expect(secretsEqual('Abc123', 'abc123')).toBe(false);
  });

  it('is false (and does not throw) for secrets of different lengths', () => {
    expect(secretsEqual('abc', 'abcd')).toBe(false);
    expect(secretsEqual('abcd', 'abc')).toBe(false);
    expect(secretsEqual('', 'a')).toBe(false);
  });

  it('compares bytes, not characters: same length in characters, different in bytes', () => {
    expect(secretsEqual('é', 'e')).toBe(false);
  });

  it('agrees with === on arbitrary strings', () => {
    fc.assert(
      fc.property(fc.string(), fc.string(), (a, b) => {
        expect(secretsEqual(a, b)).toBe(a === b);
        expect(secretsEqual(a, a)).toBe(true);
      }),
    );
  });
});
