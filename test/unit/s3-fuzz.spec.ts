import { createHash, createHmac } from 'node:crypto';
import fc from 'fast-check';
import { SignatureV4 } from '@smithy/signature-v4';
import type { HttpRequest as SmithyRequest, SourceData } from '@smithy/types';
import { AwsChunkedOptions, ChunkSigning } from '../../src/s3compat/aws-chunked';
import { integrityFromHeaders } from '../../src/s3compat/checksums';
import {
  parseCompleteMultipartXml,
  RequestedPart,
} from '../../src/s3compat/complete-multipart-xml';
import { S3Error } from '../../src/s3compat/s3-errors';
import { decodeAwsChunked } from '../support/aws-chunked';
import {
  AwsChunkedEncoding,
  SigV4Request,
  canonicalQuery,
  canonicalUriCandidates,
  decodeQuery,
  deriveSigningKey,
  parseAccessKeyFromRequest,
  parseSigV4,
  verifySigV4,
} from '../../src/s3compat/sigv4';

/**
 * Property-based fuzzing of the S3 wire parsers: thousands of random and mutated inputs.
 * Invariants: nothing throws (every refusal is a typed S3Error with one of the expected codes),
 * valid input always verifies / decodes to the original bytes whatever the chunking, and
 * nothing altered is ever accepted as something it is not.
 */

const RUNS = Number(process.env.FUZZ_RUNS ?? 3000);
const AKID = 'SHK1ABCDEFGHIJKLMNOPQRSTUVWXYZ';
const SECRET = 'fuzz-secret';
/**
 * The access key id is not itself signed in SigV4 (only the scope is): it selects the secret.
 * The harness models that, as the door does, with one secret per key id.
 */
const secretFor = (accessKeyId: string) => `${SECRET}:${accessKeyId}`;
const NOW = Date.UTC(2026, 10, 30, 12, 0, 0);
const AMZ_DATE = '20261130T120000Z';
const SCOPE = '20261130/us-east-1/s3/aws4_request';
const KEY = deriveSigningKey(SECRET, '20261130', 'us-east-1', 's3');
const EMPTY = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';

const AUTH_CODES = new Set([
  'AccessDenied',
  'AuthorizationHeaderMalformed',
  'InvalidArgument',
  'InvalidRequest',
  'RequestTimeTooSkewed',
  'SignatureDoesNotMatch',
]);
const CHUNK_CODES = new Set([
  'IncompleteBody',
  'InvalidArgument',
  'InvalidRequest',
  'SignatureDoesNotMatch',
]);

function expectTypedRefusal(r: { ok: boolean; error?: unknown }, codes: Set<string>): void {
  if (r.ok) return;
  expect(r.error).toBeInstanceOf(S3Error);
  expect(codes.has((r.error as S3Error).code)).toBe(true);
}

// --- SigV4 ----------------------------------------------------------------------------------

/** Strings built from the pieces SigV4 parsing cares about, plus arbitrary noise. */
const fragment = fc.oneof(
  fc.constantFrom(
    'AWS4-HMAC-SHA256',
    'Credential=',
    'SignedHeaders=',
    'Signature=',
    `${AKID}/20261130/us-east-1/s3/aws4_request`,
    'host;x-amz-date;x-amz-content-sha256',
    'a'.repeat(64),
    ',',
    ', ',
    ';',
    '/',
    '=',
    '&',
    '%',
    '%2F',
    '%zz',
    '+',
    ' ',
    '\t',
    AMZ_DATE,
    'X-Amz-Algorithm',
    'X-Amz-Credential',
    'X-Amz-Date',
    'X-Amz-Expires',
    'X-Amz-SignedHeaders',
    'X-Amz-Signature',
    'X-Amz-Security-Token',
    'UNSIGNED-PAYLOAD',
    'STREAMING-AWS4-HMAC-SHA256-PAYLOAD',
    '604800',
    '0',
    'ü',
    '\u0000',
    '\uffff',
    '\ud800',
  ),
  fc.string({ maxLength: 12 }),
  fc.string({ maxLength: 6, unit: 'binary' }),
);
const noisy = fc.array(fragment, { maxLength: 14 }).map((parts) => parts.join(''));

const headerName = fc.oneof(
  fc.constantFrom(
    'authorization',
    'host',
    'x-amz-date',
    'date',
    'x-amz-content-sha256',
    'x-amz-security-token',
    'x-amz-meta-a',
    'content-length',
    'range',
  ),
  fc.stringMatching(/^[a-z][a-z0-9-]{0,15}$/),
);
const headerValue = fc.oneof(noisy, fc.array(noisy, { maxLength: 3 }));

const randomRequest: fc.Arbitrary<SigV4Request> = fc.record({
  method: fc.oneof(
    fc.constantFrom('GET', 'PUT', 'HEAD', 'DELETE', 'POST'),
    fc.string({ maxLength: 6 }),
  ),
  rawPath: fc.oneof(noisy, fc.webPath()),
  rawQuery: fc.oneof(
    noisy,
    fc
      .array(
        fc.tuple(
          fc.oneof(fragment, fc.constantFrom('X-Amz-Algorithm', 'X-Amz-Credential', 'x-id')),
          noisy,
        ),
        {
          maxLength: 8,
        },
      )
      .map((pairs) => pairs.map(([k, v]) => `${k}=${v}`).join('&')),
  ),
  headers: fc.dictionary(headerName, headerValue, { maxKeys: 8 }),
});

/** SHA-256 / HMAC-SHA256 for the SDK signer (tests only). */
class Sha256 {
  private readonly h;
  constructor(secret?: SourceData) {
    this.h = secret === undefined ? createHash('sha256') : createHmac('sha256', toBuffer(secret));
  }
  update(d: SourceData): void {
    this.h.update(toBuffer(d));
  }
  digest(): Promise<Uint8Array> {
    return Promise.resolve(new Uint8Array(this.h.digest()));
  }
  reset(): void {}
}
function toBuffer(d: SourceData): Buffer {
  if (typeof d === 'string') return Buffer.from(d, 'utf8');
  if (ArrayBuffer.isView(d)) return Buffer.from(d.buffer, d.byteOffset, d.byteLength);
  return Buffer.from(d);
}

function escapeUri(s: string): string {
  return encodeURIComponent(s).replace(
    /[!'()*]/g,
    (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase(),
  );
}

async function signed(
  key: string,
  query: Record<string, string>,
  headers: Record<string, string>,
  presign: boolean,
): Promise<SigV4Request> {
  const signer = new SignatureV4({
    service: 's3',
    region: 'us-east-1',
    sha256: Sha256,
    uriEscapePath: false,
    credentials: { accessKeyId: AKID, secretAccessKey: secretFor(AKID), sessionToken: 'tok' },
  });
  const path = '/s3/tfstate/' + key.split('/').map(escapeUri).join('/');
  const req: SmithyRequest = {
    method: 'PUT',
    protocol: 'http:',
    hostname: '127.0.0.1',
    port: 8080,
    path,
    query,
    headers: { host: '127.0.0.1:8080', 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD', ...headers },
  };
  const out = presign
    ? await signer.presign(req, { signingDate: new Date(NOW), expiresIn: 3600 })
    : await signer.sign(req, { signingDate: new Date(NOW) });
  const h: Record<string, string> = {};
  for (const [k, v] of Object.entries(out.headers))
    h[k.toLowerCase()] = Buffer.from(v, 'utf8').toString('latin1');
  const rawQuery = Object.entries(out.query ?? {})
    .map(([k, v]) => `${escapeUri(k)}=${escapeUri(String(v))}`)
    .join('&');
  return { method: out.method, rawPath: out.path, rawQuery, headers: h };
}

describe('SigV4 parser and verifier under fuzzing', () => {
  it('random requests: never throw, refuse with typed S3 errors', () => {
    fc.assert(
      fc.property(
        randomRequest,
        fc.string(),
        fc.integer({ min: 0, max: 4e12 }),
        (req, secret, now) => {
          const key = parseAccessKeyFromRequest(req);
          expectTypedRefusal(key, AUTH_CODES);
          const parsed = parseSigV4(req);
          expectTypedRefusal(parsed, AUTH_CODES);
          if (parsed.ok) {
            const v = verifySigV4(parsed.value, secret, now);
            expectTypedRefusal(v, AUTH_CODES);
            // Random input never carries a valid signature.
            expect(v.ok).toBe(false);
          }
          decodeQuery(req.rawQuery);
          canonicalQuery(req.rawQuery);
          canonicalUriCandidates(req.rawPath);
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('random Authorization headers around a plausible request: never throw', () => {
    const authHeader = fc
      .tuple(
        fc.constantFrom('AWS4-HMAC-SHA256 ', 'AWS4-HMAC-SHA256', 'AWS ', ''),
        fc.array(
          fc.tuple(fc.constantFrom('Credential', 'SignedHeaders', 'Signature', 'Other', ''), noisy),
          { maxLength: 5 },
        ),
        fc.constantFrom(',', ', ', ' ,', ';'),
      )
      .map(([alg, parts, sep]) => alg + parts.map(([k, v]) => `${k}=${v}`).join(sep));
    fc.assert(
      fc.property(authHeader, noisy, (authorization, date) => {
        const req: SigV4Request = {
          method: 'GET',
          rawPath: '/s3/tfstate/k',
          rawQuery: 'x-id=GetObject',
          headers: {
            host: '127.0.0.1:8080',
            'x-amz-date': date.length % 2 ? AMZ_DATE : date,
            'x-amz-content-sha256': EMPTY,
            authorization,
          },
        };
        const parsed = parseSigV4(req);
        expectTypedRefusal(parsed, AUTH_CODES);
        if (parsed.ok) expect(verifySigV4(parsed.value, SECRET, NOW).ok).toBe(false);
      }),
      { numRuns: RUNS },
    );
  });

  describe('mutations of validly signed requests', () => {
    const bases: SigV4Request[] = [];
    beforeAll(async () => {
      bases.push(
        await signed(
          'env:/dev/a b/ü~x(1).tfstate',
          { 'x-id': 'PutObject' },
          { 'x-amz-meta-x': 'v  w' },
          false,
        ),
        await signed(
          'team/app/terraform.tfstate',
          { 'x-id': 'GetObject', prefix: 'a+b/c' },
          {},
          false,
        ),
        await signed('team/app/terraform.tfstate', { 'x-id': 'PutObject' }, {}, true),
      );
      for (const b of bases)
        expect(verifySigV4(expectParsed(b), secretFor(AKID), NOW).ok).toBe(true);
    });

    function expectParsed(req: SigV4Request) {
      const p = parseSigV4(req);
      if (!p.ok) throw p.error;
      return p.value;
    }

    type Mutation = [string, number, string, number, string, string | string[]];
    const mutateString = (s: string, at: number, ch: string, mode: number): string => {
      const i = s.length === 0 ? 0 : at % s.length;
      if (mode === 0) return s.slice(0, i) + ch + s.slice(i + 1); // replace
      if (mode === 1) return s.slice(0, i) + ch + s.slice(i); // insert
      return s.slice(0, i) + s.slice(i + 1); // delete
    };
    const mutation: fc.Arbitrary<Mutation> = fc.tuple(
      fc.constantFrom('method', 'rawPath', 'rawQuery', 'header', 'addHeader', 'dropHeader'),
      fc.nat(),
      fc.string({ minLength: 1, maxLength: 1, unit: 'binary' }),
      fc.integer({ min: 0, max: 2 }),
      headerName,
      headerValue,
    );
    const apply = (
      req: SigV4Request,
      [where, at, ch, mode, name, value]: Mutation,
    ): SigV4Request => {
      switch (where) {
        case 'method':
          return { ...req, method: mutateString(req.method, at, ch, mode) };
        case 'rawPath':
          return { ...req, rawPath: mutateString(req.rawPath, at, ch, mode) };
        case 'rawQuery':
          return { ...req, rawQuery: mutateString(req.rawQuery, at, ch, mode) };
        case 'header': {
          const names = Object.keys(req.headers);
          const n = names[at % names.length];
          return {
            ...req,
            headers: {
              ...req.headers,
              [n]: mutateString(String(req.headers[n]), at >> 3, ch, mode),
            },
          };
        }
        case 'addHeader':
          return { ...req, headers: { ...req.headers, [name]: value } };
        case 'dropHeader': {
          const names = Object.keys(req.headers);
          const headers = { ...req.headers };
          delete headers[names[at % names.length]];
          return { ...req, headers };
        }
        default:
          return req;
      }
    };

    it('a mutated request either verifies with the very same canonical request, or is refused', () => {
      let accepted = 0;
      let refused = 0;
      fc.assert(
        fc.property(
          fc.nat(),
          fc.array(mutation, { minLength: 1, maxLength: 3 }),
          (which, mutations) => {
            const base = bases[which % bases.length];
            const original = expectParsed(base);
            const mutated = mutations.reduce(apply, base);
            const parsed = parseSigV4(mutated);
            expectTypedRefusal(parsed, AUTH_CODES);
            if (!parsed.ok) {
              refused++;
              return;
            }
            const v = verifySigV4(parsed.value, secretFor(parsed.value.accessKeyId), NOW);
            expectTypedRefusal(v, AUTH_CODES);
            if (!v.ok) refused++;
            if (v.ok) {
              accepted++;
              // Only changes that leave the signed content identical can pass (an unsigned header,
              // a reordered query, another spelling of the same path or query bytes).
              const acceptedForms = [
                parsed.value.canonicalRequest,
                ...parsed.value.alternateCanonicalRequests,
              ];
              const signedForms = [
                original.canonicalRequest,
                ...original.alternateCanonicalRequests,
              ];
              expect(acceptedForms.some((c) => signedForms.includes(c))).toBe(true);
              expect(parsed.value.accessKeyId).toBe(original.accessKeyId);
              expect(parsed.value.sessionToken).toBe(original.sessionToken);
            }
          },
        ),
        { numRuns: RUNS },
      );
      // Both outcomes occur: the property is not vacuous.
      expect(accepted).toBeGreaterThan(0);
      expect(refused).toBeGreaterThan(RUNS / 2);
    });
  });

  it('integrityFromHeaders: random headers never throw', () => {
    const names = fc.oneof(
      fc.constantFrom(
        'content-md5',
        'x-amz-checksum-crc32',
        'x-amz-checksum-crc32c',
        'x-amz-checksum-crc64nvme',
        'x-amz-checksum-sha1',
        'x-amz-checksum-sha256',
        'x-amz-checksum-mode',
        'x-amz-checksum-foo',
        'x-amz-sdk-checksum-algorithm',
      ),
      headerName,
    );
    fc.assert(
      fc.property(
        fc.dictionary(names, fc.oneof(headerValue, fc.base64String({ maxLength: 48 })), {
          maxKeys: 4,
        }),
        fc.array(noisy, { maxLength: 2 }),
        (headers, trailerNames) => {
          const r = integrityFromHeaders(headers, { trailerNames });
          expectTypedRefusal(r, new Set(['InvalidArgument', 'InvalidRequest']));
        },
      ),
      { numRuns: RUNS },
    );
  });
});

// --- aws-chunked --------------------------------------------------------------------------------

const UNSIGNED: AwsChunkedEncoding = 'STREAMING-UNSIGNED-PAYLOAD-TRAILER';
const SIGNED: AwsChunkedEncoding = 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD';
const SIGNED_TRAILER: AwsChunkedEncoding = 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER';
const TRAILER = 'x-amz-checksum-crc32';

function signingFor(seed: string): ChunkSigning {
  return { signingKey: KEY, amzDate: AMZ_DATE, scope: SCOPE, seedSignature: seed };
}

const sha = (d: Uint8Array | string) => createHash('sha256').update(d).digest('hex');
const hmac = (s: string) => createHmac('sha256', KEY).update(s).digest('hex');

/** A valid body in `encoding` for `data` cut into `sizes`, as a client would send it. */
function encode(
  encoding: AwsChunkedEncoding,
  data: Buffer,
  sizes: number[],
  seed: string,
  trailerValue: string,
): Buffer {
  const signedMode = encoding !== UNSIGNED;
  let previous = seed;
  const parts: Buffer[] = [];
  const head = (bytes: Buffer) => {
    if (!signedMode) return `${bytes.length.toString(16)}\r\n`;
    previous = hmac(
      `AWS4-HMAC-SHA256-PAYLOAD\n${AMZ_DATE}\n${SCOPE}\n${previous}\n${EMPTY}\n${sha(bytes)}`,
    );
    return `${bytes.length.toString(16)};chunk-signature=${previous}\r\n`;
  };
  let at = 0;
  for (const n of sizes) {
    const bytes = data.subarray(at, at + n);
    parts.push(Buffer.from(head(bytes)), bytes, Buffer.from('\r\n'));
    at += n;
  }
  parts.push(Buffer.from(head(Buffer.alloc(0))));
  if (encoding !== SIGNED) {
    parts.push(Buffer.from(`${TRAILER}:${trailerValue}\r\n`));
    if (encoding === SIGNED_TRAILER) {
      const sig = hmac(
        `AWS4-HMAC-SHA256-TRAILER\n${AMZ_DATE}\n${SCOPE}\n${previous}\n${sha(`${TRAILER}:${trailerValue}\n`)}`,
      );
      parts.push(Buffer.from(`x-amz-trailer-signature:${sig}\r\n`));
    }
  }
  parts.push(Buffer.from('\r\n'));
  return Buffer.concat(parts);
}

function optionsFor(encoding: AwsChunkedEncoding, length: number, seed: string): AwsChunkedOptions {
  return {
    encoding,
    decodedContentLength: length,
    declaredTrailers: encoding === SIGNED ? [] : [TRAILER],
    signing: encoding === UNSIGNED ? undefined : signingFor(seed),
  };
}

/** Splits `body` at the given (sorted, deduplicated) cut points. */
function cut(body: Buffer, points: number[]): Buffer[] {
  const sorted = [...new Set(points.map((p) => p % (body.length + 1)))].sort((a, b) => a - b);
  const out: Buffer[] = [];
  let from = 0;
  for (const p of sorted) {
    out.push(body.subarray(from, p));
    from = p;
  }
  out.push(body.subarray(from));
  return out;
}

function run(
  opts: AwsChunkedOptions,
  pieces: Buffer[],
): { data?: Buffer; trailers?: Record<string, string>; error?: S3Error } {
  const r = decodeAwsChunked(opts, pieces);
  if (r.error) expect(CHUNK_CODES.has(r.error.code)).toBe(true);
  return r;
}

/** Data plus a partition of it into chunk sizes (each ≥ 1). */
const dataAndSizes = fc.uint8Array({ maxLength: 3000 }).chain((bytes) => {
  const data = Buffer.from(bytes);
  return fc
    .array(fc.integer({ min: 1, max: Math.max(1, data.length) }), { maxLength: 12 })
    .map((cuts) => {
      const sizes: number[] = [];
      let left = data.length;
      for (const c of cuts) {
        if (left === 0) break;
        const n = Math.min(c, left);
        sizes.push(n);
        left -= n;
      }
      if (left > 0) sizes.push(left);
      return { data, sizes };
    });
});
const encodingArb = fc.constantFrom(UNSIGNED, SIGNED, SIGNED_TRAILER);
const seedArb = fc
  .uint8Array({ minLength: 32, maxLength: 32 })
  .map((b) => Buffer.from(b).toString('hex'));

describe('aws-chunked decoder under fuzzing', () => {
  it('random bytes, random options, random chunking: never throw anything but S3 errors', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.uint8Array({ maxLength: 400 }),
          noisy.map((s) => Buffer.from(s, 'latin1')),
          fc
            .array(
              fc.constantFrom(
                '0',
                '5',
                'a',
                'F',
                ';',
                'chunk-signature=',
                '\r',
                '\n',
                '\r\n',
                'x-amz-checksum-crc32:',
                'AAAAAA==',
                'hello',
                ':',
              ),
              {
                maxLength: 40,
              },
            )
            .map((p) => Buffer.from(p.join(''), 'latin1')),
        ),
        encodingArb,
        fc.nat({ max: 64 }),
        fc.array(fc.nat(), { maxLength: 6 }),
        seedArb,
        (bytes, encoding, length, points, seed) => {
          const body = Buffer.from(bytes);
          const r = run(optionsFor(encoding, length, seed), cut(body, points));
          if (!r.error) expect(r.data?.length).toBe(length);
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('valid streams decode to the original bytes and trailers, whatever the chunking', () => {
    fc.assert(
      fc.property(
        dataAndSizes,
        encodingArb,
        fc.array(fc.nat(), { maxLength: 20 }),
        seedArb,
        ({ data, sizes }, encoding, points, seed) => {
          const trailer = Buffer.from(sha(data), 'hex').subarray(0, 4).toString('base64');
          const body = encode(encoding, data, sizes, seed, trailer);
          const r = run(optionsFor(encoding, data.length, seed), cut(body, points));
          expect(r.error).toBeUndefined();
          expect(r.data?.equals(data)).toBe(true);
          expect(r.trailers).toEqual(encoding === SIGNED ? {} : { [TRAILER]: trailer });
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('mutated valid streams are refused with S3 errors, or (signed) decode to exactly the original', () => {
    const mutationArb = fc.tuple(
      fc.constantFrom('flip', 'insert', 'delete', 'truncate', 'duplicate'),
      fc.nat(),
      fc.integer({ min: 0, max: 255 }),
      fc.nat({ max: 40 }),
    );
    let decoded = 0;
    let refused = 0;
    fc.assert(
      fc.property(
        dataAndSizes,
        encodingArb,
        fc.array(mutationArb, { minLength: 1, maxLength: 3 }),
        fc.array(fc.nat(), { maxLength: 8 }),
        seedArb,
        ({ data, sizes }, encoding, mutations, points, seed) => {
          const trailer = Buffer.from(sha(data), 'hex').subarray(0, 4).toString('base64');
          let body = encode(encoding, data, sizes, seed, trailer);
          for (const [kind, at, byte, span] of mutations) {
            const i = at % (body.length + 1);
            if (kind === 'flip' && i < body.length) {
              body = Buffer.from(body);
              body[i] = body[i] === byte ? byte ^ 1 : byte;
            } else if (kind === 'insert') {
              body = Buffer.concat([body.subarray(0, i), Buffer.from([byte]), body.subarray(i)]);
            } else if (kind === 'delete') {
              body = Buffer.concat([body.subarray(0, i), body.subarray(i + 1 + span)]);
            } else if (kind === 'truncate') {
              body = body.subarray(0, i);
            } else {
              body = Buffer.concat([body.subarray(0, i + span), body.subarray(i)]);
            }
          }
          const r = run(optionsFor(encoding, data.length, seed), cut(body, points));
          if (r.error) {
            refused++;
            return;
          }
          decoded++;
          expect(r.data?.length).toBe(data.length);
          if (encoding !== UNSIGNED) {
            // Every data byte is covered by a chunk signature: a mutation that decodes changed
            // only framing spelling (hex case, leading zeros, the signature's hex case).
            expect(r.data?.equals(data)).toBe(true);
          }
          if (encoding === SIGNED_TRAILER) expect(r.trailers).toEqual({ [TRAILER]: trailer });
        },
      ),
      { numRuns: RUNS },
    );
    expect(decoded).toBeGreaterThan(0);
    expect(refused).toBeGreaterThan(RUNS / 2);
  });
});

// --- CompleteMultipartUpload XML ------------------------------------------------------------

const XML_CODES = new Set(['MalformedXML', 'InvalidPartOrder', 'EntityTooLarge']);

function parseXml(doc: string): { parts?: RequestedPart[]; error?: S3Error } {
  try {
    return { parts: parseCompleteMultipartXml(Buffer.from(doc, 'utf8')) };
  } catch (e) {
    if (!(e instanceof S3Error)) throw e;
    expect(XML_CODES.has(e.code)).toBe(true);
    return { error: e };
  }
}

/** Pieces of part lists and of the attacks on them (issue 9): unclosed tags, references, NUL. */
const xmlFragment = fc.oneof(
  fc.constantFrom(
    '<CompleteMultipartUpload>',
    '</CompleteMultipartUpload>',
    '<Part>',
    '</Part>',
    '<PartNumber>',
    '</PartNumber>',
    '<ETag>',
    '</ETag>',
    '<Part/>',
    '<!--',
    '-->',
    '<![CDATA[',
    ']]>',
    '<?xml version="1.0"?>',
    '<!DOCTYPE a [<!ENTITY x "y">]>',
    '&#34;',
    '&quot;',
    '&amp;',
    '&#0;',
    '&#xD800;',
    '&bogus;',
    '&',
    '"',
    '1',
    '10000',
    '10001',
    ' ',
    '\n',
    '\u0000',
    '\ud800',
    '\udfff',
    'ü',
    '<',
    '>',
    '/',
    ' xmlns="x"',
    " a='<'",
  ),
  fc.string({ maxLength: 8 }),
);

/** A valid part list with random spelling: order of fields, quoting, white space, comments. */
const validPartList = fc
  .uniqueArray(fc.integer({ min: 1, max: 10_000 }), { minLength: 1, maxLength: 30 })
  .chain((numbers) => {
    const sorted = [...numbers].sort((a, b) => a - b);
    return fc
      .array(
        fc.record({
          md5: fc.uint8Array({ minLength: 16, maxLength: 16 }),
          quote: fc.constantFrom('"', '&#34;', '&quot;', '&#x22;', ''),
          upper: fc.boolean(),
          etagFirst: fc.boolean(),
          pad: fc.constantFrom('', ' ', '\n  ', '<!-- c -->'),
          checksum: fc.boolean(),
        }),
        { minLength: sorted.length, maxLength: sorted.length },
      )
      .map((spellings) => {
        const parts = sorted.map((n, i) => {
          const s = spellings[i];
          const hex = Buffer.from(s.md5).toString('hex');
          const etag = `<ETag>${s.quote}${s.upper ? hex.toUpperCase() : hex}${s.quote}</ETag>`;
          const number = `<PartNumber>${n}</PartNumber>`;
          const sum = s.checksum ? '<ChecksumCRC32>AAAAAA==</ChecksumCRC32>' : '';
          const fields = s.etagFirst ? [etag, sum, number] : [number, sum, etag];
          return {
            xml: `${s.pad}<Part>${s.pad}${fields.join(s.pad)}${s.pad}</Part>`,
            expected: { partNumber: n, etag: hex },
          };
        });
        return {
          doc: `<?xml version="1.0" encoding="UTF-8"?><CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/">${parts.map((p) => p.xml).join('')}</CompleteMultipartUpload>`,
          expected: parts.map((p) => p.expected),
        };
      });
  });

describe('CompleteMultipartUpload XML under fuzzing', () => {
  it('random documents from part-list pieces: never throw anything but S3 errors', () => {
    fc.assert(
      fc.property(fc.array(xmlFragment, { maxLength: 40 }), (pieces) => {
        const r = parseXml(pieces.join(''));
        if (r.parts) {
          expect(r.parts.length).toBeGreaterThan(0);
          for (let i = 1; i < r.parts.length; i++)
            expect(r.parts[i].partNumber).toBeGreaterThan(r.parts[i - 1].partNumber);
        }
      }),
      { numRuns: RUNS },
    );
  });

  it('valid part lists, whatever their spelling, read back exactly', () => {
    fc.assert(
      fc.property(validPartList, ({ doc, expected }) => {
        expect(parseXml(doc)).toEqual({ parts: expected });
      }),
      { numRuns: Math.ceil(RUNS / 3) },
    );
  });

  it('mutated valid lists are refused with S3 errors or read as some ascending part list', () => {
    fc.assert(
      fc.property(
        validPartList,
        fc.array(fc.tuple(fc.nat(), xmlFragment, fc.constantFrom('insert', 'replace', 'cut')), {
          minLength: 1,
          maxLength: 4,
        }),
        ({ doc }, mutations) => {
          let s = doc;
          for (const [at, piece, kind] of mutations) {
            const i = at % (s.length + 1);
            if (kind === 'insert') s = s.slice(0, i) + piece + s.slice(i);
            else if (kind === 'replace') s = s.slice(0, i) + piece + s.slice(i + piece.length);
            else s = s.slice(0, i);
          }
          const r = parseXml(s);
          for (let i = 1; i < (r.parts?.length ?? 0); i++) {
            const parts = r.parts as RequestedPart[];
            expect(parts[i].partNumber).toBeGreaterThan(parts[i - 1].partNumber);
          }
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('huge counts and deep nesting are refused by the limits', () => {
    fc.assert(
      fc.property(
        fc.constantFrom('<Part>', '<a>', '<Part><ETag>', '&', '<!--', '</'),
        fc.integer({ min: 1_000, max: 60_000 }),
        (unit, count) => {
          const r = parseXml(`<CompleteMultipartUpload>${unit.repeat(count)}`);
          expect(r.error?.code).toBe('MalformedXML');
        },
      ),
      { numRuns: 50 },
    );
    const many = '<Part><PartNumber>1</PartNumber><ETag>"a"</ETag></Part>'.repeat(10_001);
    expect(
      parseXml(`<CompleteMultipartUpload>${many}</CompleteMultipartUpload>`).error?.message,
    ).toMatch(/more than 10000 parts/);
  });
});
