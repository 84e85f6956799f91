import { createHash, randomBytes } from 'node:crypto';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
// Independent oracles (tests only): the AWS SDK's own checksum implementations.
import { Crc32, Crc32cJs, Crc64NvmeJs } from '@aws-sdk/checksums/crc';
import {
  BodyVerifier,
  BodyVerifierOptions,
  CHECKSUM_ALGORITHMS,
  ChecksumAlgorithm,
  checkDigests,
  BodyDigester,
  checksumAlgorithmOfHeader,
  checksumBase64,
  checksumHeaderName,
  crc32,
  crc32c,
  crc64nvme,
  createChecksum,
  integrityFromHeaders,
  isValidChecksumValue,
  parseChecksumAlgorithm,
} from '../../src/s3compat/checksums';
import { S3Error } from '../../src/s3compat/s3-errors';

async function oracle(algorithm: ChecksumAlgorithm, data: Buffer): Promise<string> {
  switch (algorithm) {
    case 'SHA1':
      return createHash('sha1').update(data).digest('base64');
    case 'SHA256':
      return createHash('sha256').update(data).digest('base64');
    default: {
      const h =
        algorithm === 'CRC32'
          ? new Crc32()
          : algorithm === 'CRC32C'
            ? new Crc32cJs()
            : new Crc64NvmeJs();
      h.update(data);
      return Buffer.from(await h.digest()).toString('base64');
    }
  }
}

async function run(
  body: Buffer[],
  opts: BodyVerifierOptions,
): Promise<{ error?: S3Error; out: Buffer; verifier: BodyVerifier }> {
  const verifier = new BodyVerifier(opts);
  const parts: Buffer[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _e, cb) {
      parts.push(chunk);
      cb();
    },
  });
  try {
    await pipeline(Readable.from(body), verifier, sink);
    return { out: Buffer.concat(parts), verifier };
  } catch (e) {
    expect(e).toBeInstanceOf(S3Error);
    return { error: e as S3Error, out: Buffer.concat(parts), verifier };
  }
}

describe('checksum algorithms', () => {
  const check = Buffer.from('123456789');

  it('match the published check values for "123456789"', () => {
    expect(crc32(check)).toBe(0xcbf43926);
    expect(crc32c(check)).toBe(0xe3069283);
    expect(crc64nvme(check)).toBe(0xae8b14860a799888n);
    expect(checksumBase64('SHA1', check)).toBe(createHash('sha1').update(check).digest('base64'));
    expect(checksumBase64('SHA256', check)).toBe(
      createHash('sha256').update(check).digest('base64'),
    );
  });

  it('encode the big-endian digest in base64, as S3 does', () => {
    expect(checksumBase64('CRC32', check)).toBe(Buffer.from('cbf43926', 'hex').toString('base64'));
    expect(checksumBase64('CRC32C', check)).toBe(Buffer.from('e3069283', 'hex').toString('base64'));
    expect(checksumBase64('CRC64NVME', check)).toBe(
      Buffer.from('ae8b14860a799888', 'hex').toString('base64'),
    );
    // The AWS SigV4 trailer example: 66560 × 'a' has CRC32C sOO8/Q==.
    expect(checksumBase64('CRC32C', Buffer.alloc(66560, 'a'))).toBe('sOO8/Q==');
  });

  it('give the empty-body values', () => {
    expect(checksumBase64('CRC32', Buffer.alloc(0))).toBe('AAAAAA==');
    expect(checksumBase64('CRC32C', Buffer.alloc(0))).toBe('AAAAAA==');
    expect(checksumBase64('CRC64NVME', Buffer.alloc(0))).toBe('AAAAAAAAAAA=');
  });

  it.each(CHECKSUM_ALGORITHMS)(
    '%s agrees with the AWS SDK on every length 0..300 and on 1 MiB',
    async (algorithm) => {
      const data = randomBytes(300);
      for (let n = 0; n <= 300; n++) {
        const slice = data.subarray(0, n);
        expect(checksumBase64(algorithm, slice)).toBe(await oracle(algorithm, slice));
      }
      const big = randomBytes(1 << 20);
      expect(checksumBase64(algorithm, big)).toBe(await oracle(algorithm, big));
    },
  );

  it.each(CHECKSUM_ALGORITHMS)(
    '%s gives the same digest however the input is split',
    async (algorithm) => {
      const data = randomBytes(5000);
      const expected = await oracle(algorithm, data);
      for (const step of [1, 3, 7, 8, 9, 64, 1000, 4999]) {
        const h = createChecksum(algorithm);
        for (let i = 0; i < data.length; i += step) h.update(data.subarray(i, i + step));
        expect(h.digest().toString('base64')).toBe(expected);
      }
      // Unaligned views of a larger buffer.
      const h = createChecksum(algorithm);
      const padded = Buffer.concat([Buffer.from([1, 2, 3]), data]);
      h.update(new Uint8Array(padded.buffer, padded.byteOffset + 3, data.length));
      expect(h.digest().toString('base64')).toBe(expected);
    },
  );

  it('maps algorithm names to headers and back', () => {
    expect(checksumHeaderName('CRC64NVME')).toBe('x-amz-checksum-crc64nvme');
    expect(checksumAlgorithmOfHeader('X-Amz-Checksum-CRC32C')).toBe('CRC32C');
    expect(checksumAlgorithmOfHeader('x-amz-checksum-mode')).toBeUndefined();
    expect(parseChecksumAlgorithm('sha256')).toBe('SHA256');
    expect(parseChecksumAlgorithm('md5')).toBeUndefined();
  });

  it('accepts only canonical base64 of the right length as a checksum value', () => {
    expect(isValidChecksumValue('CRC32', 'y/Q5Jg==')).toBe(true);
    expect(isValidChecksumValue('CRC32', 'y/Q5Jg')).toBe(false);
    expect(isValidChecksumValue('CRC32', 'y/Q5Jh==')).toBe(false); // non-zero padding bits
    expect(isValidChecksumValue('CRC32', 'AAAAAAAAAAA=')).toBe(false); // 8 bytes
    expect(isValidChecksumValue('CRC64NVME', 'AAAAAAAAAAA=')).toBe(true);
    expect(isValidChecksumValue('SHA256', checksumBase64('SHA256', 'x'))).toBe(true);
    expect(isValidChecksumValue('SHA1', checksumBase64('SHA256', 'x'))).toBe(false);
    expect(isValidChecksumValue('SHA1', '')).toBe(false);
    expect(isValidChecksumValue('CRC32', 'y/Q5Jg==\n')).toBe(false);
  });
});

describe('integrityFromHeaders', () => {
  const crc = checksumBase64('CRC32', 'hello');

  it('reads Content-MD5, one x-amz-checksum header and the declared payload hash', () => {
    const md5 = createHash('md5').update('hello').digest('base64');
    const r = integrityFromHeaders(
      { 'content-md5': md5, 'x-amz-checksum-crc32': crc, 'x-amz-sdk-checksum-algorithm': 'CRC32' },
      { contentSha256Hex: 'ab'.repeat(32) },
    );
    expect(r).toEqual({
      ok: true,
      value: {
        contentMd5: md5,
        contentSha256Hex: 'ab'.repeat(32),
        checksum: { algorithm: 'CRC32', value: crc, source: 'header' },
      },
    });
  });

  it('reads a checksum declared as a trailer', () => {
    const r = integrityFromHeaders({}, { trailerNames: ['x-amz-checksum-sha256'] });
    expect(r).toEqual({
      ok: true,
      value: { checksum: { algorithm: 'SHA256', source: 'trailer' } },
    });
  });

  it('ignores the x-amz-checksum-* headers that carry no value (mode, type, algorithm)', () => {
    const r = integrityFromHeaders({
      'x-amz-checksum-mode': 'ENABLED',
      'x-amz-checksum-type': 'FULL_OBJECT',
      'x-amz-checksum-algorithm': 'CRC32',
    });
    expect(r).toEqual({ ok: true, value: {} });
  });

  const refusals: Array<[string, Record<string, string>, string[] | undefined, string, RegExp]> = [
    [
      'a malformed Content-MD5',
      { 'content-md5': 'abc' },
      undefined,
      'InvalidArgument',
      /Content-MD5/,
    ],
    [
      'a Content-MD5 of the wrong length',
      { 'content-md5': Buffer.alloc(15).toString('base64') },
      undefined,
      'InvalidArgument',
      /Content-MD5/,
    ],
    [
      'two checksum headers',
      { 'x-amz-checksum-crc32': crc, 'x-amz-checksum-sha1': checksumBase64('SHA1', 'x') },
      undefined,
      'InvalidRequest',
      /Multiple checksum/,
    ],
    [
      'a header and a trailer checksum',
      { 'x-amz-checksum-crc32': crc },
      ['x-amz-checksum-crc32c'],
      'InvalidRequest',
      /Multiple checksum/,
    ],
    [
      'a malformed checksum value',
      { 'x-amz-checksum-crc32': 'nope' },
      undefined,
      'InvalidRequest',
      /invalid/,
    ],
    [
      'an unsupported checksum header',
      { 'x-amz-checksum-xxhash64': 'AAAAAAAAAAA=' },
      undefined,
      'InvalidRequest',
      /not supported/,
    ],
    ['an unsupported trailer', {}, ['x-amz-meta-foo'], 'InvalidRequest', /x-amz-trailer/],
    [
      'x-amz-sdk-checksum-algorithm without a checksum',
      { 'x-amz-sdk-checksum-algorithm': 'CRC32' },
      undefined,
      'InvalidRequest',
      /no corresponding/,
    ],
    [
      'x-amz-sdk-checksum-algorithm naming another algorithm',
      { 'x-amz-sdk-checksum-algorithm': 'SHA256', 'x-amz-checksum-crc32': crc },
      undefined,
      'InvalidRequest',
      /does not match/,
    ],
    [
      'an unknown x-amz-sdk-checksum-algorithm',
      { 'x-amz-sdk-checksum-algorithm': 'MD4', 'x-amz-checksum-crc32': crc },
      undefined,
      'InvalidRequest',
      /invalid/,
    ],
  ];
  it.each(refusals)('refuses %s', (_name, headers, trailerNames, code, message) => {
    const r = integrityFromHeaders(headers, { trailerNames });
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.error.code).toBe(code);
      expect(r.error.message).toMatch(message);
    }
  });

  it('refuses a checksum header given twice with different values', () => {
    const r = integrityFromHeaders({ 'x-amz-checksum-crc32': [crc, 'AAAAAA=='] });
    expect(!r.ok && r.error.code).toBe('InvalidArgument');
  });
});

describe('BodyVerifier', () => {
  const body = [Buffer.from('{"version":4,'), Buffer.from('"serial":1}\n')];
  const whole = Buffer.concat(body);

  it('passes the bytes through unchanged and reports length, MD5 and checksums', async () => {
    const { error, out, verifier } = await run(body, {
      checksum: {
        algorithm: 'CRC64NVME',
        value: checksumBase64('CRC64NVME', whole),
        source: 'header',
      },
      computeChecksums: ['SHA256', 'CRC64NVME'],
    });
    expect(error).toBeUndefined();
    expect(out.equals(whole)).toBe(true);
    expect(verifier.digests?.length).toBe(whole.length);
    expect(verifier.digests?.md5?.toString('hex')).toBe(
      createHash('md5').update(whole).digest('hex'),
    );
    expect(verifier.digests?.checksums).toEqual({
      CRC64NVME: checksumBase64('CRC64NVME', whole),
      SHA256: checksumBase64('SHA256', whole),
    });
  });

  it.each(CHECKSUM_ALGORITHMS)('answers BadDigest when the %s checksum differs', async (a) => {
    const good = await run(body, {
      checksum: { algorithm: a, value: checksumBase64(a, whole), source: 'header' },
    });
    expect(good.error).toBeUndefined();
    const bad = await run(body, {
      checksum: { algorithm: a, value: checksumBase64(a, 'something else'), source: 'header' },
    });
    expect(bad.error?.code).toBe('BadDigest');
    expect(bad.error?.message).toContain(a);
    expect(bad.verifier.digests).toBeUndefined();
  });

  it('answers BadDigest for a wrong Content-MD5', async () => {
    const ok = await run(body, { contentMd5: createHash('md5').update(whole).digest('base64') });
    expect(ok.error).toBeUndefined();
    const bad = await run(body, { contentMd5: createHash('md5').update('x').digest('base64') });
    expect(bad.error?.code).toBe('BadDigest');
    expect(bad.error?.message).toMatch(/Content-MD5/);
  });

  it('answers XAmzContentSHA256Mismatch when the declared x-amz-content-sha256 differs', async () => {
    const hex = createHash('sha256').update(whole).digest('hex');
    expect((await run(body, { contentSha256Hex: hex })).error).toBeUndefined();
    expect((await run(body, { contentSha256Hex: hex.toUpperCase() })).error).toBeUndefined();
    const bad = await run(body, {
      contentSha256Hex: createHash('sha256').update('x').digest('hex'),
    });
    expect(bad.error?.code).toBe('XAmzContentSHA256Mismatch');
    const truncated = await run(body.slice(0, 1), { contentSha256Hex: hex });
    expect(truncated.error?.code).toBe('XAmzContentSHA256Mismatch');
  });

  it('checks the payload hash before the checksums (S3 reports the signature-level error)', () => {
    const d = new BodyDigester({
      contentSha256Hex: '00'.repeat(32),
      contentMd5: 'AAAAAAAAAAAAAAAAAAAAAA==',
    });
    d.update(whole);
    expect(
      checkDigests(d.finish(), {
        contentSha256Hex: '00'.repeat(32),
        contentMd5: 'AAAAAAAAAAAAAAAAAAAAAA==',
      })?.code,
    ).toBe('XAmzContentSHA256Mismatch');
  });

  it('reads a trailer checksum at the end of the body', async () => {
    const value = checksumBase64('SHA256', whole);
    let resolved = false;
    const good = await run(body, {
      checksum: { algorithm: 'SHA256', source: 'trailer' },
      resolveChecksumValue: () => {
        resolved = true;
        return value;
      },
    });
    expect(good.error).toBeUndefined();
    expect(resolved).toBe(true);
    const wrong = await run(body, {
      checksum: { algorithm: 'SHA256', source: 'trailer' },
      resolveChecksumValue: () => checksumBase64('SHA256', 'x'),
    });
    expect(wrong.error?.code).toBe('BadDigest');
    const missing = await run(body, {
      checksum: { algorithm: 'SHA256', source: 'trailer' },
      resolveChecksumValue: () => undefined,
    });
    expect(missing.error?.code).toBe('InvalidRequest');
    const malformed = await run(body, {
      checksum: { algorithm: 'SHA256', source: 'trailer' },
      resolveChecksumValue: () => 'not base64!',
    });
    expect(malformed.error?.code).toBe('InvalidRequest');
  });

  it('verifies an empty body', async () => {
    const r = await run([], {
      checksum: { algorithm: 'CRC32', value: 'AAAAAA==', source: 'header' },
      contentSha256Hex: 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
    });
    expect(r.error).toBeUndefined();
    expect(r.verifier.digests?.length).toBe(0);
  });
});
