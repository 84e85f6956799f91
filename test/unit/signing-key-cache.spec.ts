import { deriveSigningKey, SigningKeyCache } from '../../src/s3compat/sigv4';

describe('SigningKeyCache: a SigV4 signing key is derived once per secret, date, region, service', () => {
  it('answers the derived key, and the same one again without deriving it anew', () => {
    const cache = new SigningKeyCache(8);
    const a = cache.get('secret-1', '20261204', 'us-east-1', 's3');
    expect(a).toEqual(deriveSigningKey('secret-1', '20261204', 'us-east-1', 's3'));
    expect(cache.get('secret-1', '20261204', 'us-east-1', 's3')).toBe(a);
    expect(cache.size).toBe(1);
  });

  it('keeps keys apart by every part of their scope and by secret', () => {
    const cache = new SigningKeyCache(8);
    const base = cache.get('s', '20261204', 'us-east-1', 's3');
    for (const other of [
      cache.get('t', '20261204', 'us-east-1', 's3'),
      cache.get('s', '20261205', 'us-east-1', 's3'),
      cache.get('s', '20261204', 'eu-west-1', 's3'),
      cache.get('s', '20261204', 'us-east-1', 'sts'),
    ])
      expect(other.equals(base)).toBe(false);
    // A scope part cannot run into the next one (the parts are separated).
    expect(cache.get('s', '2026120', '4us-east-1', 's3').equals(base)).toBe(false);
  });

  it('is bounded: the oldest key goes first', () => {
    const cache = new SigningKeyCache(3);
    const first = cache.get('k0', '20261204', 'us-east-1', 's3');
    for (let i = 1; i < 10; i++) cache.get(`k${i}`, '20261204', 'us-east-1', 's3');
    expect(cache.size).toBe(3);
    const again = cache.get('k0', '20261204', 'us-east-1', 's3');
    expect(again).not.toBe(first);
    expect(again).toEqual(first);
  });
});
