import { createHash, createHmac, randomBytes } from 'node:crypto';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import type { HttpRequest as SmithyRequest } from '@smithy/types';
import {
  AwsChunkedDecoder,
  AwsChunkedOptions,
  AwsChunkedParser,
  ChunkSigning,
  awsChunkedOptionsFromRequest,
  parseTrailerHeader,
} from '../../src/s3compat/aws-chunked';
import { checksumBase64 } from '../../src/s3compat/checksums';
import { bodyTransforms, planRequestBody } from '../../src/s3compat/request-body';
import { S3Error } from '../../src/s3compat/s3-errors';
import {
  AwsChunkedEncoding,
  SigV4Request,
  SigningContext,
  deriveSigningKey,
  parseSigV4,
  verifySigV4,
} from '../../src/s3compat/sigv4';
import { Result } from '../../src/s3compat/wire';
import { decodeAwsChunked } from '../support/aws-chunked';

const AKID = 'AKIAIOSFODNN7EXAMPLE';
const SECRET = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY';
const EMPTY = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';
const DOC_TIME = Date.UTC(2013, 4, 24);
const SCOPE = '20130524/us-east-1/s3/aws4_request';
const AMZ_DATE = '20130524T000000Z';
const KEY = deriveSigningKey(SECRET, '20130524', 'us-east-1', 's3');
const UNSIGNED: AwsChunkedEncoding = 'STREAMING-UNSIGNED-PAYLOAD-TRAILER';
const SIGNED: AwsChunkedEncoding = 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD';
const SIGNED_TRAILER: AwsChunkedEncoding = 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER';

// --- helpers ----------------------------------------------------------------------------------

const sha = (d: string | Buffer) => createHash('sha256').update(d).digest('hex');
const hmac = (k: Buffer, s: string) => createHmac('sha256', k).update(s).digest('hex');

/** An aws-chunked encoder written from the spec, for building test bodies. */
function build(
  data: Buffer,
  sizes: number[],
  opts: { seed?: string; trailers?: Array<[string, string]>; signTrailer?: boolean } = {},
): { body: Buffer; signatures: string[] } {
  const parts: Buffer[] = [];
  const signatures: string[] = [];
  let previous = opts.seed;
  const header = (bytes: Buffer): string => {
    let line = bytes.length.toString(16);
    if (previous !== undefined) {
      previous = hmac(
        KEY,
        `AWS4-HMAC-SHA256-PAYLOAD\n${AMZ_DATE}\n${SCOPE}\n${previous}\n${EMPTY}\n${sha(bytes)}`,
      );
      signatures.push(previous);
      line += `;chunk-signature=${previous}`;
    }
    return line + '\r\n';
  };
  let at = 0;
  for (const n of sizes) {
    const bytes = data.subarray(at, at + n);
    parts.push(Buffer.from(header(bytes)), bytes, Buffer.from('\r\n'));
    at += n;
  }
  if (at !== data.length) throw new Error('sizes do not cover the data');
  parts.push(Buffer.from(header(Buffer.alloc(0))));
  let canonical = '';
  for (const [n, v] of opts.trailers ?? []) {
    parts.push(Buffer.from(`${n}:${v}\r\n`));
    canonical += `${n}:${v}\n`;
  }
  if (opts.signTrailer && previous !== undefined) {
    const sig = hmac(
      KEY,
      `AWS4-HMAC-SHA256-TRAILER\n${AMZ_DATE}\n${SCOPE}\n${previous}\n${sha(canonical)}`,
    );
    signatures.push(sig);
    parts.push(Buffer.from(`x-amz-trailer-signature:${sig}\r\n`));
  }
  parts.push(Buffer.from('\r\n'));
  return { body: Buffer.concat(parts), signatures };
}

function signing(seed: string): ChunkSigning {
  return { signingKey: KEY, amzDate: AMZ_DATE, scope: SCOPE, seedSignature: seed };
}

function options(
  encoding: AwsChunkedEncoding,
  length: number,
  extra: Partial<AwsChunkedOptions> = {},
): AwsChunkedOptions {
  return {
    encoding,
    decodedContentLength: length,
    declaredTrailers: [],
    signing: encoding === UNSIGNED ? undefined : signing('0'.repeat(64)),
    ...extra,
  };
}

function splitAt(body: Buffer, ...at: number[]): Buffer[] {
  const pieces: Buffer[] = [];
  let from = 0;
  for (const i of at) {
    pieces.push(body.subarray(from, i));
    from = i;
  }
  pieces.push(body.subarray(from));
  return pieces;
}

function expectError(r: { error?: S3Error }, code: string, message?: RegExp): void {
  expect(r.error).toBeInstanceOf(S3Error);
  expect(r.error?.code).toBe(code);
  if (message) expect(r.error?.message).toMatch(message);
}

function expectOk<T>(r: Result<T>): T {
  if (!r.ok) throw new Error(`expected success, got ${r.error.code}: ${r.error.message}`);
  return r.value;
}

async function runPipeline(
  source: Buffer[],
  transforms: NodeJS.ReadWriteStream[],
): Promise<{ out: Buffer; error?: S3Error }> {
  const parts: Buffer[] = [];
  const sink = new Writable({
    write(c: Buffer, _e, cb) {
      parts.push(c);
      cb();
    },
  });
  try {
    await pipeline([Readable.from(source), ...transforms, sink]);
    return { out: Buffer.concat(parts) };
  } catch (e) {
    expect(e).toBeInstanceOf(S3Error);
    return { out: Buffer.concat(parts), error: e as S3Error };
  }
}

// --- AWS published examples ------------------------------------------------------------------

describe('the AWS published signed chunked upload (66560 × "a", chunks of 65536 and 1024)', () => {
  const data = Buffer.alloc(66560, 'a');
  const seed = '4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9';
  const chunkSigs = [
    'ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648',
    '0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497',
    'b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9',
  ];
  const body = Buffer.concat([
    Buffer.from(`10000;chunk-signature=${chunkSigs[0]}\r\n`),
    data.subarray(0, 65536),
    Buffer.from(`\r\n400;chunk-signature=${chunkSigs[1]}\r\n`),
    data.subarray(65536),
    Buffer.from(`\r\n0;chunk-signature=${chunkSigs[2]}\r\n\r\n`),
  ]);
  const request: SigV4Request = {
    method: 'PUT',
    rawPath: '/examplebucket/chunkObject.txt',
    rawQuery: '',
    headers: {
      host: 's3.amazonaws.com',
      'x-amz-date': AMZ_DATE,
      'x-amz-storage-class': 'REDUCED_REDUNDANCY',
      authorization: `AWS4-HMAC-SHA256 Credential=${AKID}/${SCOPE},SignedHeaders=content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-storage-class,Signature=${seed}`,
      'x-amz-content-sha256': SIGNED,
      'content-encoding': 'aws-chunked',
      'x-amz-decoded-content-length': '66560',
      'content-length': '66824',
    },
  };

  it('the body is the documented 66824 bytes', () => {
    expect(body.length).toBe(66824);
    // Our spec encoder produces the same bytes and signatures.
    expect(build(data, [65536, 1024], { seed }).body.equals(body)).toBe(true);
  });

  it('the seed signature verifies (string to sign hash cee3fed0…)', () => {
    const parsed = expectOk(parseSigV4(request));
    expect(sha(Buffer.from(parsed.canonicalRequest, 'latin1'))).toBe(
      'cee3fed04b70f867d036f722359b0b1f2f0e5dc0efadbc082b76c4c60e316455',
    );
    const ctx = expectOk(verifySigV4(parsed, SECRET, DOC_TIME));
    expect(ctx.seedSignature).toBe(seed);
    expect(ctx.signingKey.equals(KEY)).toBe(true);
  });

  it('decodes through the whole door path: verify → plan → transforms', async () => {
    const ctx = expectOk(verifySigV4(expectOk(parseSigV4(request)), SECRET, DOC_TIME));
    const plan = expectOk(planRequestBody(request.headers, ctx));
    expect(plan.chunked).toMatchObject({ encoding: SIGNED, decodedContentLength: 66560 });
    const { transforms, verifier } = bodyTransforms(plan);
    const r = await runPipeline(splitAt(body, 1000, 30000, 65600, 66700), transforms);
    expect(r.error).toBeUndefined();
    expect(r.out.equals(data)).toBe(true);
    expect(verifier.digests?.length).toBe(66560);
    expect(verifier.digests?.md5?.toString('hex')).toBe(
      createHash('md5').update(data).digest('hex'),
    );
  });

  it('every chunk signature is checked, in sequence', () => {
    const opts = options(SIGNED, 66560, { signing: signing(seed) });
    expect(decodeAwsChunked(opts, [body]).data?.equals(data)).toBe(true);
    for (const bad of chunkSigs) {
      const tampered = Buffer.from(
        body.toString('latin1').replace(
          bad,
          bad.replace(/^./, (c) => (c === '0' ? '1' : '0')),
        ),
        'latin1',
      );
      expectError(decodeAwsChunked(opts, [tampered]), 'SignatureDoesNotMatch');
    }
    // Another seed (another request) breaks the chain at the first chunk.
    expectError(
      decodeAwsChunked(options(SIGNED, 66560, { signing: signing('1'.repeat(64)) }), [body]),
      'SignatureDoesNotMatch',
    );
    // A changed data byte breaks its chunk's signature.
    const flipped = Buffer.from(body);
    flipped[40000] = 0x62;
    expectError(decodeAwsChunked(opts, [flipped]), 'SignatureDoesNotMatch');
    // Upper-case hex in the signature is the same signature.
    const upper = Buffer.from(
      body.toString('latin1').replace(chunkSigs[0], chunkSigs[0].toUpperCase()),
      'latin1',
    );
    expect(decodeAwsChunked(opts, [upper]).data?.equals(data)).toBe(true);
  });

  it('chunks swapped or dropped fail', () => {
    const opts = options(SIGNED, 66560, { signing: signing(seed) });
    // Same bytes as one 66560-byte chunk signed with the second signature: wrong chain.
    const merged = Buffer.concat([
      Buffer.from(`10400;chunk-signature=${chunkSigs[0]}\r\n`),
      data,
      Buffer.from(`\r\n0;chunk-signature=${chunkSigs[2]}\r\n\r\n`),
    ]);
    expectError(decodeAwsChunked(opts, [merged]), 'SignatureDoesNotMatch');
    // Final chunk signed as if it followed the first chunk directly.
    const truncated = Buffer.concat([
      Buffer.from(`10000;chunk-signature=${chunkSigs[0]}\r\n`),
      data.subarray(0, 65536),
      Buffer.from(`\r\n0;chunk-signature=${chunkSigs[2]}\r\n\r\n`),
    ]);
    expectError(
      decodeAwsChunked(options(SIGNED, 65536, { signing: signing(seed) }), [truncated]),
      'SignatureDoesNotMatch',
    );
  });
});

describe('the AWS published signed chunked upload with a trailer (x-amz-checksum-crc32c)', () => {
  const data = Buffer.alloc(66560, 'a');
  const seed = '106e2a8a18243abcf37539882f36619c00e2dfc72633413f02d3b74544bfeb8e';
  const sigs = [
    'b474d8862b1487a5145d686f57f013e54db672cee1c953b3010fb58501ef5aa2',
    '1c1344b170168f8e65b41376b44b20fe354e373826ccbbe2c1d40a8cae51e5c7',
    '2ca2aba2005185cf7159c6277faf83795951dd77a3a99e6e65d5c9f85863f992',
  ];
  const trailerSig = 'd81f82fc3505edab99d459891051a732e8730629a2e4a59689829ca17fe2e435';
  const body = Buffer.concat([
    Buffer.from(`10000;chunk-signature=${sigs[0]}\r\n`),
    data.subarray(0, 65536),
    Buffer.from(`\r\n400;chunk-signature=${sigs[1]}\r\n`),
    data.subarray(65536),
    Buffer.from(`\r\n0;chunk-signature=${sigs[2]}\r\n`),
    Buffer.from('x-amz-checksum-crc32c:sOO8/Q==\r\n'),
    Buffer.from(`x-amz-trailer-signature:${trailerSig}\r\n\r\n`),
  ]);
  const request: SigV4Request = {
    method: 'PUT',
    rawPath: '/examplebucket/chunkObject.txt',
    rawQuery: '',
    headers: {
      host: 's3.amazonaws.com',
      'x-amz-date': AMZ_DATE,
      'x-amz-storage-class': 'REDUCED_REDUNDANCY',
      authorization: `AWS4-HMAC-SHA256 Credential=${AKID}/${SCOPE},SignedHeaders=content-encoding;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-storage-class;x-amz-trailer,Signature=${seed}`,
      'x-amz-content-sha256': SIGNED_TRAILER,
      'content-encoding': 'aws-chunked',
      'x-amz-decoded-content-length': '66560',
      'x-amz-trailer': 'x-amz-checksum-crc32c',
    },
  };

  it('our spec encoder reproduces the documented signatures (66946 bytes)', () => {
    const built = build(data, [65536, 1024], {
      seed,
      trailers: [['x-amz-checksum-crc32c', 'sOO8/Q==']],
      signTrailer: true,
    });
    expect(built.signatures).toEqual([...sigs, trailerSig]);
    expect(built.body.equals(body)).toBe(true);
    expect(body.length).toBe(66946);
  });

  it('verifies seed, chunks, trailer signature and the CRC32C trailer end to end', async () => {
    const ctx = expectOk(verifySigV4(expectOk(parseSigV4(request)), SECRET, DOC_TIME));
    const plan = expectOk(planRequestBody(request.headers, ctx));
    expect(plan.integrity.checksum).toEqual({ algorithm: 'CRC32C', source: 'trailer' });
    const { transforms, decoder, verifier } = bodyTransforms(plan);
    const r = await runPipeline(splitAt(body, 66900, 66930), transforms);
    expect(r.error).toBeUndefined();
    expect(r.out.equals(data)).toBe(true);
    expect(decoder?.trailers).toEqual({ 'x-amz-checksum-crc32c': 'sOO8/Q==' });
    expect(verifier.digests?.checksums.CRC32C).toBe('sOO8/Q==');
  });

  it('a changed trailer value fails the trailer signature; a missing one is refused', () => {
    const opts = options(SIGNED_TRAILER, 66560, {
      signing: signing(seed),
      declaredTrailers: ['x-amz-checksum-crc32c'],
    });
    expect(decodeAwsChunked(opts, [body]).trailers).toEqual({
      'x-amz-checksum-crc32c': 'sOO8/Q==',
    });
    const changed = Buffer.from(body.toString('latin1').replace('sOO8/Q==', 'AAAAAA=='), 'latin1');
    expectError(decodeAwsChunked(opts, [changed]), 'SignatureDoesNotMatch', /trailer signature/);
    const noSig = Buffer.from(
      body.toString('latin1').replace(/x-amz-trailer-signature:\w+\r\n/, ''),
      'latin1',
    );
    expectError(decodeAwsChunked(opts, [noSig]), 'SignatureDoesNotMatch', /missing/);
    const badSig = Buffer.from(
      body.toString('latin1').replace(trailerSig, '0'.repeat(64)),
      'latin1',
    );
    expectError(decodeAwsChunked(opts, [badSig]), 'SignatureDoesNotMatch');
  });
});

// --- trailers we construct ----------------------------------------------------------------------

describe('STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER bodies we construct', () => {
  const data = randomBytes(200_000);
  const seed = sha('some request');
  const crc = checksumBase64('CRC32', data);
  const built = build(data, [65536, 65536, 65536, 3392], {
    seed,
    trailers: [['x-amz-checksum-crc32', crc]],
    signTrailer: true,
  });
  const opts = options(SIGNED_TRAILER, data.length, {
    signing: signing(seed),
    declaredTrailers: ['x-amz-checksum-crc32'],
  });

  it('decode, however the input is cut', () => {
    for (const cut of [1, 7, 64, 1000, 65536, 70000]) {
      const pieces: Buffer[] = [];
      for (let i = 0; i < built.body.length; i += cut) pieces.push(built.body.subarray(i, i + cut));
      const r = decodeAwsChunked(opts, pieces);
      expect(r.error).toBeUndefined();
      expect(r.data?.equals(data)).toBe(true);
      expect(r.trailers).toEqual({ 'x-amz-checksum-crc32': crc });
    }
  });

  it('trailer names are case-insensitive and values trimmed', () => {
    // A signer that sends "X-Amz-Checksum-Crc32: <v>" canonicalises it to lower case, trimmed.
    const text = built.body
      .toString('latin1')
      .replace(`x-amz-checksum-crc32:${crc}`, `X-Amz-Checksum-CRC32:  ${crc} `);
    expect(decodeAwsChunked(opts, [Buffer.from(text, 'latin1')]).trailers).toEqual({
      'x-amz-checksum-crc32': crc,
    });
  });

  it('refuses trailers that are undeclared, repeated, missing, misplaced or malformed', () => {
    const t = (body: string) => decodeAwsChunked(opts, [Buffer.from(body, 'latin1')]);
    const text = built.body.toString('latin1');
    const line = `x-amz-checksum-crc32:${crc}\r\n`;
    expectError(
      t(text.replace(line, line + 'x-amz-meta-x:1\r\n')),
      'InvalidRequest',
      /not declared/,
    );
    expectError(t(text.replace(line, line + line)), 'InvalidRequest', /more than once/);
    expectError(t(text.replace(line, 'x-amz-checksum-crc32 ' + crc + '\r\n')), 'InvalidRequest');
    const sigLine = /x-amz-trailer-signature:\w+\r\n/.exec(text)?.[0] ?? '';
    expectError(t(text.replace(line + sigLine, sigLine + line)), 'SignatureDoesNotMatch');
    expectError(t(text.replace(sigLine, sigLine + line)), 'InvalidRequest', /last/);
    // Declared but absent: signed over no trailers, so the signature check passes first.
    const none = build(data, [200_000], { seed, signTrailer: true }).body;
    expectError(decodeAwsChunked(opts, [none]), 'InvalidRequest', /missing/);
  });
});

// --- Terraform's body ------------------------------------------------------------------------

// What Terraform 1.11's `backend "s3"` sends over https with its default checksum settings (seen
// on the wire by test/terraform/s3-backend.spec.ts): one aws-chunked chunk, no chunk signatures,
// and the SHA-256 checksum as a trailer.
describe("Terraform's STREAMING-UNSIGNED-PAYLOAD-TRAILER body", () => {
  const state = Buffer.from(
    JSON.stringify(
      {
        version: 4,
        terraform_version: '1.11.4',
        serial: 1,
        lineage: 'x',
        outputs: {},
        resources: [],
        check_results: null,
      },
      null,
      2,
    ) + '\n',
  );
  const b64 = checksumBase64('SHA256', state);
  const body = Buffer.from(
    `${state.length.toString(16)}\r\n${state.toString('latin1')}\r\n0\r\nx-amz-checksum-sha256:${b64}\r\n\r\n`,
    'latin1',
  );
  const headers = {
    host: '127.0.0.1:8443',
    'content-encoding': 'aws-chunked',
    'x-amz-content-sha256': UNSIGNED,
    'x-amz-decoded-content-length': String(state.length),
    'x-amz-trailer': 'x-amz-checksum-sha256',
    'x-amz-sdk-checksum-algorithm': 'SHA256',
  };
  const ctx = (): SigningContext => ({
    via: 'header',
    accessKeyId: AKID,
    sessionToken: undefined,
    region: 'us-east-1',
    scope: SCOPE,
    amzDate: AMZ_DATE,
    signingKey: KEY,
    seedSignature: '0'.repeat(64),
    validUntil: 0,
    payload: { kind: 'aws-chunked', encoding: UNSIGNED },
  });

  it('decodes to the exact state bytes and verifies the trailing SHA-256', async () => {
    const plan = expectOk(planRequestBody(headers, ctx()));
    expect(plan.chunked?.signing).toBeUndefined();
    const { transforms, verifier } = bodyTransforms(plan);
    const r = await runPipeline([body], transforms);
    expect(r.error).toBeUndefined();
    expect(r.out.equals(state)).toBe(true);
    expect(verifier.digests?.checksums.SHA256).toBe(b64);
  });

  it('decodes identically at every split position (2 and 3 pieces) and byte by byte', () => {
    const opts = options(UNSIGNED, state.length, { declaredTrailers: ['x-amz-checksum-sha256'] });
    for (let i = 0; i <= body.length; i++) {
      const r = decodeAwsChunked(opts, splitAt(body, i));
      expect(r.error).toBeUndefined();
      expect(r.data?.equals(state)).toBe(true);
    }
    for (let i = 0; i <= body.length; i += 3) {
      for (let j = i; j <= body.length; j += 5) {
        const r = decodeAwsChunked(opts, splitAt(body, i, j));
        expect(r.data?.equals(state)).toBe(true);
      }
    }
    const bytes = [...body].map((b) => Buffer.from([b]));
    const r = decodeAwsChunked(opts, bytes);
    expect(r.data?.equals(state)).toBe(true);
    expect(r.trailers).toEqual({ 'x-amz-checksum-sha256': b64 });
  });

  it('a wrong trailing checksum → BadDigest (nothing may be stored)', async () => {
    const wrong = Buffer.from(
      body.toString('latin1').replace(b64, checksumBase64('SHA256', 'other')),
      'latin1',
    );
    const { transforms } = bodyTransforms(expectOk(planRequestBody(headers, ctx())));
    const r = await runPipeline([wrong], transforms);
    expect(r.error?.code).toBe('BadDigest');
  });

  it('the same body with `skip_s3_checksum`: a CRC32 trailer', async () => {
    const crc = checksumBase64('CRC32', state);
    const crcBody = Buffer.from(
      body
        .toString('latin1')
        .replace(`x-amz-checksum-sha256:${b64}`, `x-amz-checksum-crc32:${crc}`),
      'latin1',
    );
    const plan = expectOk(
      planRequestBody(
        {
          ...headers,
          'x-amz-trailer': 'x-amz-checksum-crc32',
          'x-amz-sdk-checksum-algorithm': 'CRC32',
        },
        ctx(),
      ),
    );
    const r = await runPipeline([crcBody], bodyTransforms(plan).transforms);
    expect(r.error).toBeUndefined();
    expect(r.out.equals(state)).toBe(true);
  });

  it('a body sent by @aws-sdk/client-s3 (stream body) decodes and verifies', async () => {
    const payload = randomBytes(100_000);
    let captured: { req: SmithyRequest; body: Buffer } | undefined;
    const client = new S3Client({
      region: 'us-east-1',
      endpoint: 'http://127.0.0.1:8080/s3',
      forcePathStyle: true,
      credentials: { accessKeyId: AKID, secretAccessKey: SECRET },
      requestHandler: {
        handle: async (req: SmithyRequest) => {
          const parts: Buffer[] = [];
          for await (const c of req.body as Readable) parts.push(Buffer.from(c as Buffer));
          captured = { req, body: Buffer.concat(parts) };
          return { response: { statusCode: 200, headers: {}, body: Readable.from([]) } };
        },
      },
    });
    await client
      .send(
        new PutObjectCommand({
          Bucket: 'tfstate',
          Key: 'k',
          Body: Readable.from([payload.subarray(0, 60_000), payload.subarray(60_000)]),
          ContentLength: payload.length,
        }),
      )
      .catch(() => undefined);
    client.destroy();
    if (!captured) throw new Error('nothing captured');
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(captured.req.headers)) headers[k.toLowerCase()] = v;
    const rawQuery = Object.entries(captured.req.query ?? {})
      .map(([k, v]) => `${k}=${String(v)}`)
      .join('&');
    const verified = expectOk(
      verifySigV4(
        expectOk(parseSigV4({ method: 'PUT', rawPath: captured.req.path, rawQuery, headers })),
        SECRET,
        Date.now(),
      ),
    );
    const { transforms, verifier } = bodyTransforms(expectOk(planRequestBody(headers, verified)));
    const r = await runPipeline([captured.body], transforms);
    expect(r.error).toBeUndefined();
    expect(r.out.equals(payload)).toBe(true);
    expect(verifier.digests?.checksums.CRC32).toBe(checksumBase64('CRC32', payload));
  });
});

// --- framing errors ------------------------------------------------------------------------------

describe('malformed aws-chunked framing', () => {
  const data = Buffer.from('hello world');
  const opts = options(UNSIGNED, data.length);
  const good = '5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n';
  const d = (s: string, o = opts) => decodeAwsChunked(o, [Buffer.from(s, 'latin1')]);

  it('the good body decodes, upper-case and zero-padded hex too', () => {
    expect(d(good).data?.toString()).toBe('hello world');
    expect(d('0005\r\nhello\r\n6\r\n world\r\n0000\r\n\r\n').data?.toString()).toBe('hello world');
    expect(d('B\r\nhello world\r\n0\r\n\r\n').data?.toString()).toBe('hello world');
  });

  it('decoded length shorter than x-amz-decoded-content-length → IncompleteBody', () => {
    expectError(d(good, options(UNSIGNED, 12)), 'IncompleteBody', /short/);
  });

  it('decoded length longer than x-amz-decoded-content-length → InvalidArgument', () => {
    expectError(d(good, options(UNSIGNED, 10)), 'InvalidArgument', /decoded-content-length/);
    expectError(d('fffffffffffffff\r\n', options(UNSIGNED, 10)), 'InvalidArgument');
  });

  it('truncated bodies → IncompleteBody (including a missing final CRLF)', () => {
    for (let cut = 0; cut < good.length; cut++) {
      const r = d(good.slice(0, cut));
      expectError(r, 'IncompleteBody');
    }
  });

  it('bad hex sizes → InvalidArgument', () => {
    for (const size of ['g', '', ' 5', '5 ', '-5', '0x5', '5;', '5;foo=bar', '1'.repeat(17)]) {
      expectError(d(`${size}\r\nhello\r\n6\r\n world\r\n0\r\n\r\n`), 'InvalidArgument');
    }
  });

  it('a chunk signature on an unsigned body, or none on a signed body → InvalidArgument', () => {
    expectError(d(`5;chunk-signature=${'0'.repeat(64)}\r\nhello\r\n`), 'InvalidArgument');
    expectError(d('5\r\nhello\r\n', options(SIGNED, 5)), 'InvalidArgument');
    expectError(
      d(`5;chunk-signature=${'0'.repeat(63)}\r\nhello\r\n`, options(SIGNED, 5)),
      'InvalidArgument',
    );
  });

  it('line endings must be CRLF', () => {
    expectError(d('5\nhello\r\n6\r\n world\r\n0\r\n\r\n'), 'InvalidArgument', /CRLF/);
    expectError(d('5\r\nhello\n6\r\n world\r\n0\r\n\r\n'), 'InvalidArgument', /CRLF/);
    expectError(d('5\r\nhelloXX6\r\n world\r\n0\r\n\r\n'), 'InvalidArgument', /CRLF/);
    expectError(d('5\r\nhello\r\n6\r\n world\r\n0\r\n\n'), 'InvalidArgument', /CRLF/);
    expectError(d('5\r\r\nhello\r\n'), 'InvalidArgument');
  });

  it('an oversized chunk header line → InvalidArgument, without buffering it all', () => {
    const p = new AwsChunkedParser(opts);
    expect(() => p.push(Buffer.alloc(1024, '0'))).not.toThrow(); // 1024 zeros: still a size
    expect(() => p.push(Buffer.from('00'))).toThrow(/longer than 1024/);
    expect(() => p.push(Buffer.from('\r\n'))).toThrow(/longer than 1024/); // sticky
    expectError(d('5;' + 'x'.repeat(5000) + '\r\n'), 'InvalidArgument', /longer/);
    expectError(
      d(
        '0\r\n' + 'x-amz-checksum-crc32:' + 'A'.repeat(5000) + '\r\n\r\n',
        options(UNSIGNED, 0, { declaredTrailers: ['x-amz-checksum-crc32'] }),
      ),
      'InvalidArgument',
      /trailer line/,
    );
  });

  it('bytes after the end → InvalidArgument', () => {
    expectError(d(good + 'x'), 'InvalidArgument', /after the end/);
    expectError(d(good + '0\r\n\r\n'), 'InvalidArgument');
  });

  it('trailers where the encoding allows none', () => {
    const signedBody = build(data, [11], { seed: '0'.repeat(64) }).body.toString('latin1');
    expect(d(signedBody, options(SIGNED, 11)).data?.equals(data)).toBe(true);
    const withTrailer = signedBody.replace(
      /\r\n\r\n$/,
      '\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n',
    );
    expectError(d(withTrailer, options(SIGNED, 11)), 'InvalidArgument', /no trailers/);
    expectError(
      d('0\r\nx-amz-trailer-signature:' + '0'.repeat(64) + '\r\n\r\n', options(UNSIGNED, 0)),
      'InvalidRequest',
    );
  });

  it('an empty body is just the final chunk', () => {
    expect(d('0\r\n\r\n', options(UNSIGNED, 0)).data?.length).toBe(0);
    const e = build(Buffer.alloc(0), [], { seed: '0'.repeat(64) }).body.toString('latin1');
    expect(d(e, options(SIGNED, 0)).data?.length).toBe(0);
  });

  it('errors are sticky and end() without a complete body fails', () => {
    const p = new AwsChunkedParser(opts);
    expect(() => p.push(Buffer.from('zz\r\n'))).toThrow(S3Error);
    expect(() => p.push(Buffer.from('5\r\n'))).toThrow(/hexadecimal/);
    expect(() => p.end()).toThrow(/hexadecimal/);
    const q = new AwsChunkedParser(opts);
    q.push(Buffer.from('5\r\nhel'));
    expect(q.finished).toBe(false);
    expect(() => q.end()).toThrow(expect.objectContaining({ code: 'IncompleteBody' }));
  });

  it('the Transform reports the error and emits trailers when done', async () => {
    const bad = await runPipeline([Buffer.from('5\r\nhelloX')], [new AwsChunkedDecoder(opts)]);
    expect(bad.error?.code).toBe('InvalidArgument');
    const dec = new AwsChunkedDecoder(
      options(UNSIGNED, 2, { declaredTrailers: ['x-amz-checksum-crc32'] }),
    );
    const seen: unknown[] = [];
    dec.on('trailers', (t) => seen.push(t));
    const ok = await runPipeline(
      [Buffer.from('2\r\nhi\r\n0\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n')],
      [dec],
    );
    expect(ok.out.toString()).toBe('hi');
    expect(seen).toEqual([{ 'x-amz-checksum-crc32': 'AAAAAA==' }]);
    expect(dec.trailers).toEqual({ 'x-amz-checksum-crc32': 'AAAAAA==' });
  });

  it('the constructor refuses a signed encoding without signing context', () => {
    expect(
      () =>
        new AwsChunkedParser({ encoding: SIGNED, decodedContentLength: 1, declaredTrailers: [] }),
    ).toThrow(TypeError);
    expect(() => new AwsChunkedParser(options(UNSIGNED, -1))).toThrow(TypeError);
  });
});

// --- request headers --------------------------------------------------------------------------

describe('awsChunkedOptionsFromRequest and parseTrailerHeader', () => {
  const ctx = (encoding?: AwsChunkedEncoding) => ({
    payload: encoding
      ? ({ kind: 'aws-chunked', encoding } as const)
      : ({ kind: 'unsigned' } as const),
    signingKey: KEY,
    amzDate: AMZ_DATE,
    scope: SCOPE,
    seedSignature: 'ab'.repeat(32),
  });

  it('reads length, trailers and the signing chain', () => {
    expect(
      expectOk(
        awsChunkedOptionsFromRequest(
          { 'x-amz-decoded-content-length': '10', 'x-amz-trailer': 'X-Amz-Checksum-CRC32 ' },
          ctx(SIGNED_TRAILER),
        ),
      ),
    ).toEqual({
      encoding: SIGNED_TRAILER,
      decodedContentLength: 10,
      declaredTrailers: ['x-amz-checksum-crc32'],
      signing: { signingKey: KEY, amzDate: AMZ_DATE, scope: SCOPE, seedSignature: 'ab'.repeat(32) },
    });
    expect(expectOk(awsChunkedOptionsFromRequest({}, ctx()))).toBeUndefined();
  });

  const refusals: Array<[string, Record<string, string>, AwsChunkedEncoding | undefined, string]> =
    [
      ['no decoded length', {}, UNSIGNED, 'MissingContentLength'],
      [
        'a non-numeric decoded length',
        { 'x-amz-decoded-content-length': '1e3' },
        UNSIGNED,
        'InvalidArgument',
      ],
      [
        'a negative decoded length',
        { 'x-amz-decoded-content-length': '-1' },
        UNSIGNED,
        'InvalidArgument',
      ],
      [
        'a trailer on STREAMING-AWS4-HMAC-SHA256-PAYLOAD',
        { 'x-amz-decoded-content-length': '1', 'x-amz-trailer': 'x-amz-checksum-crc32' },
        SIGNED,
        'InvalidRequest',
      ],
      [
        '-TRAILER without x-amz-trailer',
        { 'x-amz-decoded-content-length': '1' },
        SIGNED_TRAILER,
        'InvalidRequest',
      ],
      [
        'aws-chunked with a plain payload hash',
        { 'content-encoding': 'aws-chunked' },
        undefined,
        'InvalidRequest',
      ],
      [
        'x-amz-trailer on a plain body',
        { 'x-amz-trailer': 'x-amz-checksum-crc32' },
        undefined,
        'InvalidRequest',
      ],
      [
        'an unsupported trailer',
        { 'x-amz-decoded-content-length': '1', 'x-amz-trailer': 'x-amz-meta-a' },
        UNSIGNED,
        'InvalidRequest',
      ],
    ];
  it.each(refusals)('refuses %s', (_n, headers, encoding, code) => {
    const r = awsChunkedOptionsFromRequest(headers, ctx(encoding));
    expect(!r.ok && r.error.code).toBe(code);
  });

  it('parseTrailerHeader', () => {
    expect(parseTrailerHeader(undefined)).toEqual({ ok: true, value: [] });
    expect(parseTrailerHeader(' ')).toEqual({ ok: true, value: [] });
    expect(parseTrailerHeader('x-amz-checksum-crc64nvme')).toEqual({
      ok: true,
      value: ['x-amz-checksum-crc64nvme'],
    });
    expect(parseTrailerHeader('x-amz-checksum-crc32,x-amz-checksum-sha1')).toMatchObject({
      ok: false,
    });
    expect(parseTrailerHeader('x-amz-checksum-crc32,')).toMatchObject({ ok: false });
  });
});
