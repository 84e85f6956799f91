import { createHash, createHmac } from 'node:crypto';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
// Independent oracles, used in tests only: the AWS SDK for JavaScript v3 (S3Client with a
// capturing request handler: the exact requests a real client sends) and its SigV4 signer.
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { SignatureV4 } from '@smithy/signature-v4';
import type { HttpRequest as SmithyRequest, SourceData } from '@smithy/types';
import { S3Error } from '../../src/s3compat/s3-errors';
import {
  MAX_CLOCK_SKEW_MS,
  ParsedSigV4,
  SigV4Request,
  SigningContext,
  canonicalHeaderValue,
  canonicalQuery,
  canonicalUriCandidates,
  decodeQuery,
  deriveSigningKey,
  parseAccessKeyFromRequest,
  parseSigV4,
  payloadHashCheck,
  verifySigV4,
} from '../../src/s3compat/sigv4';
import { Result } from '../../src/s3compat/wire';

const AKID = 'AKIAIOSFODNN7EXAMPLE';
const SECRET = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY';
const EMPTY = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';
const DOC_TIME = Date.UTC(2013, 4, 24); // 20130524T000000Z, the AWS examples' clock

// --- helpers ----------------------------------------------------------------------------------

/** SHA-256 / HMAC-SHA256 for the SDK signer, from node:crypto. */
class Sha256 {
  private readonly h;
  constructor(secret?: SourceData) {
    this.h = secret === undefined ? createHash('sha256') : createHmac('sha256', bytes(secret));
  }
  update(data: SourceData): void {
    this.h.update(bytes(data));
  }
  digest(): Promise<Uint8Array> {
    return Promise.resolve(new Uint8Array(this.h.digest()));
  }
  reset(): void {}
}
function bytes(d: SourceData): Buffer {
  if (typeof d === 'string') return Buffer.from(d, 'utf8');
  if (ArrayBuffer.isView(d)) return Buffer.from(d.buffer, d.byteOffset, d.byteLength);
  return Buffer.from(d);
}

function signer(sessionToken?: string, secret = SECRET): SignatureV4 {
  return new SignatureV4({
    service: 's3',
    region: 'us-east-1',
    sha256: Sha256,
    uriEscapePath: false, // S3: the canonical URI is the (already encoded) path as sent
    applyChecksum: true,
    credentials: { accessKeyId: AKID, secretAccessKey: secret, sessionToken },
  });
}

/** How the SDK puts query values on the wire (RFC 3986, `!'()*` encoded too). */
function escapeUri(s: string): string {
  return encodeURIComponent(s).replace(
    /[!'()*]/g,
    (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase(),
  );
}

function wireQuery(query: SmithyRequest['query'] | undefined): string {
  const parts: string[] = [];
  for (const [k, v] of Object.entries(query ?? {})) {
    if (v === null || v === undefined) parts.push(escapeUri(k));
    else
      for (const one of Array.isArray(v) ? v : [v]) parts.push(`${escapeUri(k)}=${escapeUri(one)}`);
  }
  return parts.join('&');
}

/** A request as Node would hand it to the door: lower-case names, latin1 "byte strings". */
function asReceived(req: SmithyRequest, override: Partial<SigV4Request> = {}): SigV4Request {
  const headers: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(req.headers)) {
    headers[k.toLowerCase()] = Buffer.from(v, 'utf8').toString('latin1');
  }
  return {
    method: req.method,
    rawPath: req.path,
    rawQuery: wireQuery(req.query),
    headers,
    ...override,
  };
}

function request(
  method: string,
  path: string,
  opts: {
    query?: Record<string, string | string[]>;
    headers?: Record<string, string>;
    body?: string;
  } = {},
): SmithyRequest {
  return {
    method,
    protocol: 'http:',
    hostname: '127.0.0.1',
    port: 8080,
    path,
    query: opts.query ?? {},
    headers: { host: '127.0.0.1:8080', ...(opts.headers ?? {}) },
    body: opts.body,
  };
}

function check(req: SigV4Request, now: number, secret = SECRET): Result<SigningContext> {
  const parsed = parseSigV4(req);
  if (!parsed.ok) return parsed;
  return verifySigV4(parsed.value, secret, now);
}

function expectOk<T>(r: Result<T>): T {
  if (!r.ok) throw new Error(`expected success, got ${r.error.code}: ${r.error.message}`);
  return r.value;
}

function expectCode<T>(r: Result<T>, code: string, message?: RegExp): void {
  if (r.ok) throw new Error(`expected ${code}, got success`);
  expect(r.error).toBeInstanceOf(S3Error);
  expect(r.error.code).toBe(code);
  if (message) expect(r.error.message).toMatch(message);
}

function withHeaders(
  req: SigV4Request,
  changes: Record<string, string | string[] | undefined>,
): SigV4Request {
  const headers = { ...req.headers };
  for (const [k, v] of Object.entries(changes)) {
    if (v === undefined) delete headers[k];
    else headers[k] = v;
  }
  return { ...req, headers };
}

function setAuth(req: SigV4Request, edit: (auth: string) => string): SigV4Request {
  return withHeaders(req, { authorization: edit(req.headers.authorization as string) });
}

async function bodyCheck(parsed: ParsedSigV4, body: string): Promise<S3Error | undefined> {
  const t = payloadHashCheck(parsed.payload);
  if (!t) return undefined;
  try {
    await pipeline(
      Readable.from([Buffer.from(body)]),
      t,
      new Writable({ write: (_c, _e, cb) => cb() }),
    );
    return undefined;
  } catch (e) {
    return e as S3Error;
  }
}

/** Requests exactly as @aws-sdk/client-s3 sends them (captured before the network). */
async function sdkRequests(
  send: (client: S3Client) => Promise<unknown>,
  sessionToken?: string,
): Promise<Array<{ req: SmithyRequest; body: Buffer }>> {
  const captured: Array<{ req: SmithyRequest; body: Buffer }> = [];
  const client = new S3Client({
    region: 'us-east-1',
    endpoint: 'http://127.0.0.1:8080/s3',
    forcePathStyle: true,
    maxAttempts: 1,
    credentials: { accessKeyId: AKID, secretAccessKey: SECRET, sessionToken },
    requestHandler: {
      handle: async (req: SmithyRequest) => {
        const parts: Buffer[] = [];
        const body: unknown = req.body;
        if (body instanceof Readable)
          for await (const c of body) parts.push(Buffer.from(c as Buffer));
        else if (typeof body === 'string' || body instanceof Uint8Array)
          parts.push(Buffer.from(body));
        captured.push({ req, body: Buffer.concat(parts) });
        return {
          response: {
            statusCode: 200,
            headers: { etag: '"0"', 'content-length': '0' },
            body: Readable.from([]),
          },
        };
      },
    },
  });
  try {
    await send(client);
  } catch {
    // The canned empty answer does not satisfy every command's parser; the request is captured.
  }
  client.destroy();
  return captured;
}

// --- the AWS published examples ----------------------------------------------------------------

describe('AWS published SigV4 examples (secret wJalrXUtnFEMI/…, 20130524T000000Z, us-east-1)', () => {
  const host = 'examplebucket.s3.amazonaws.com';
  const auth = (signed: string, sig: string) =>
    `AWS4-HMAC-SHA256 Credential=${AKID}/20130524/us-east-1/s3/aws4_request,SignedHeaders=${signed},Signature=${sig}`;

  it('derives the documented signing key', () => {
    expect(deriveSigningKey(SECRET, '20130524', 'us-east-1', 's3').toString('hex')).toBe(
      'dbb893acc010964918f1fd433add87c70e8b0db6be30c1fbeafefa5ec6ba8378',
    );
  });

  it('GET Object with Range', () => {
    const req: SigV4Request = {
      method: 'GET',
      rawPath: '/test.txt',
      rawQuery: '',
      headers: {
        host,
        range: 'bytes=0-9',
        'x-amz-content-sha256': EMPTY,
        'x-amz-date': '20130524T000000Z',
        authorization: auth(
          'host;range;x-amz-content-sha256;x-amz-date',
          'f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41',
        ),
      },
    };
    const parsed = expectOk(parseSigV4(req));
    expect(createHash('sha256').update(parsed.canonicalRequest, 'latin1').digest('hex')).toBe(
      '7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972',
    );
    const ctx = expectOk(verifySigV4(parsed, SECRET, DOC_TIME));
    expect(ctx).toMatchObject({
      accessKeyId: AKID,
      region: 'us-east-1',
      payload: { kind: 'sha256', hex: EMPTY },
    });
    expectCode(check(withHeaders(req, { range: 'bytes=0-10' }), DOC_TIME), 'SignatureDoesNotMatch');
  });

  it('PUT Object (Date and x-amz-date headers, `$` in the key, body hash checked)', async () => {
    const body = 'Welcome to Amazon S3.';
    const hash = createHash('sha256').update(body).digest('hex');
    expect(hash).toBe('44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072');
    const req: SigV4Request = {
      method: 'PUT',
      rawPath: '/test%24file.text',
      rawQuery: '',
      headers: {
        host,
        date: 'Fri, 24 May 2013 00:00:00 GMT',
        'x-amz-content-sha256': hash,
        'x-amz-date': '20130524T000000Z',
        'x-amz-storage-class': 'REDUCED_REDUNDANCY',
        authorization: auth(
          'date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class',
          '98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd',
        ),
      },
    };
    const parsed = expectOk(parseSigV4(req));
    expectOk(verifySigV4(parsed, SECRET, DOC_TIME));
    expect(await bodyCheck(parsed, body)).toBeUndefined();
    expect((await bodyCheck(parsed, body + '!'))?.code).toBe('XAmzContentSHA256Mismatch');
    expectCode(check({ ...req, rawPath: '/test%25file.text' }, DOC_TIME), 'SignatureDoesNotMatch');
  });

  it('PUT Object signed with the raw `$` accepts the request whose path is re-encoded', () => {
    // The key `test$file.text` sent raw and signed raw would be wrong by the spec; a request
    // that spells it `%24` on the wire and signed `%24` is the one above. The reverse (raw on
    // the wire, `%24` signed) verifies through the re-encoded candidate.
    const req: SigV4Request = {
      method: 'PUT',
      rawPath: '/test$file.text',
      rawQuery: '',
      headers: {
        host,
        date: 'Fri, 24 May 2013 00:00:00 GMT',
        'x-amz-content-sha256': '44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072',
        'x-amz-date': '20130524T000000Z',
        'x-amz-storage-class': 'REDUCED_REDUNDANCY',
        authorization: auth(
          'date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class',
          '98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd',
        ),
      },
    };
    expectOk(check(req, DOC_TIME));
  });

  it('GET Bucket lifecycle (a query parameter without value)', () => {
    const req: SigV4Request = {
      method: 'GET',
      rawPath: '/',
      rawQuery: 'lifecycle',
      headers: {
        host,
        'x-amz-content-sha256': EMPTY,
        'x-amz-date': '20130524T000000Z',
        authorization: auth(
          'host;x-amz-content-sha256;x-amz-date',
          'fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543',
        ),
      },
    };
    expectOk(check(req, DOC_TIME));
    expectOk(check({ ...req, rawQuery: 'lifecycle=' }, DOC_TIME));
    expectCode(check({ ...req, rawQuery: 'policy' }, DOC_TIME), 'SignatureDoesNotMatch');
  });

  it('GET Bucket (List Objects) with two query parameters in any order', () => {
    const req: SigV4Request = {
      method: 'GET',
      rawPath: '/',
      rawQuery: 'max-keys=2&prefix=J',
      headers: {
        host,
        'x-amz-content-sha256': EMPTY,
        'x-amz-date': '20130524T000000Z',
        authorization: auth(
          'host;x-amz-content-sha256;x-amz-date',
          '34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7',
        ),
      },
    };
    expectOk(check(req, DOC_TIME));
    expectOk(check({ ...req, rawQuery: 'prefix=J&max-keys=2' }, DOC_TIME));
    expectCode(
      check({ ...req, rawQuery: 'prefix=K&max-keys=2' }, DOC_TIME),
      'SignatureDoesNotMatch',
    );
  });

  it('presigned GET (query parameters, UNSIGNED-PAYLOAD)', () => {
    const rawQuery =
      'X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404';
    const req: SigV4Request = { method: 'GET', rawPath: '/test.txt', rawQuery, headers: { host } };
    const parsed = expectOk(parseSigV4(req));
    expect(parsed).toMatchObject({
      via: 'query',
      expiresSeconds: 86400,
      payload: { kind: 'unsigned' },
    });
    expect(parsed.canonicalRequest).toBe(
      'GET\n/test.txt\nX-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host\nhost:examplebucket.s3.amazonaws.com\n\nhost\nUNSIGNED-PAYLOAD',
    );
    expectOk(verifySigV4(parsed, SECRET, DOC_TIME + 86400 * 1000)); // the last valid second
    expectCode(verifySigV4(parsed, SECRET, DOC_TIME + 86400 * 1000 + 1), 'AccessDenied', /expired/);
    expectCode(check({ ...req, rawPath: '/test.txt2' }, DOC_TIME), 'SignatureDoesNotMatch');
    expectCode(check({ ...req, method: 'PUT' }, DOC_TIME), 'SignatureDoesNotMatch');
    expectCode(check(req, DOC_TIME, SECRET + 'x'), 'SignatureDoesNotMatch');
  });
});

// --- requests from the real SDK --------------------------------------------------------------

describe('requests sent by @aws-sdk/client-s3 verify, and every tampering fails', () => {
  const keys = [
    'team/app/terraform.tfstate',
    'env:/dev/team/app/terraform.tfstate',
    'with space/and+plus/terraform.tfstate',
    'ünïcødé/日本/terraform.tfstate',
    "tilde~/x(1)!*'/a=b&c;d@e$f,g/terraform.tfstate",
    'a/./b/../c//d.tfstate',
  ];

  it.each(keys)('GetObject of %s (x-id in the query, Range, session token)', async (key) => {
    const [{ req }] = await sdkRequests(
      (c) =>
        c.send(new GetObjectCommand({ Bucket: 'tfstate', Key: key, Range: 'bytes=0-5242879' })),
      'session-token.jwt',
    );
    const received = asReceived(req);
    expect(received.rawQuery).toBe('x-id=GetObject');
    const ctx = expectOk(check(received, Date.now()));
    expect(ctx.sessionToken).toBe('session-token.jwt');
    expect(ctx.payload).toEqual({ kind: 'sha256', hex: EMPTY });
    // The raw path is the canonical URI: the SDK's encoding is kept, not normalised.
    const parsed = expectOk(parseSigV4(received));
    expect(parsed.canonicalRequest.split('\n')[1]).toBe(req.path);
    // Tampering with any signed part fails.
    expectCode(check({ ...received, method: 'HEAD' }, Date.now()), 'SignatureDoesNotMatch');
    expectCode(
      check({ ...received, rawPath: received.rawPath + 'x' }, Date.now()),
      'SignatureDoesNotMatch',
    );
    expectCode(
      check(
        { ...received, rawPath: received.rawPath.replace('/tfstate/', '/tfstate2/') },
        Date.now(),
      ),
      'SignatureDoesNotMatch',
    );
    expectCode(
      check({ ...received, rawQuery: 'x-id=PutObject' }, Date.now()),
      'SignatureDoesNotMatch',
    );
    expectCode(check({ ...received, rawQuery: '' }, Date.now()), 'SignatureDoesNotMatch');
    expectCode(
      check({ ...received, rawQuery: 'x-id=GetObject&versionId=1' }, Date.now()),
      'SignatureDoesNotMatch',
    );
    expectCode(
      check(withHeaders(received, { range: 'bytes=0-1' }), Date.now()),
      'SignatureDoesNotMatch',
    );
    expectCode(
      check(withHeaders(received, { 'x-amz-security-token': 'other.jwt' }), Date.now()),
      'SignatureDoesNotMatch',
    );
    expectCode(
      check(withHeaders(received, { 'x-amz-security-token': undefined }), Date.now()),
      'SignatureDoesNotMatch',
    );
  });

  it('the raw path decides: the same key spelt differently on the wire is another request', async () => {
    const [{ req }] = await sdkRequests((c) =>
      c.send(new GetObjectCommand({ Bucket: 'tfstate', Key: 'env:/dev/x.tfstate' })),
    );
    expect(req.path).toBe('/s3/tfstate/env%3A/dev/x.tfstate');
    const received = asReceived(req);
    // `%2F` in place of `/` is never the same path.
    expectCode(
      check({ ...received, rawPath: '/s3/tfstate/env%3A%2Fdev/x.tfstate' }, Date.now()),
      'SignatureDoesNotMatch',
    );
    // No dot-segment or double-slash normalisation.
    expectCode(
      check({ ...received, rawPath: '/s3/tfstate/./env%3A/dev/x.tfstate' }, Date.now()),
      'SignatureDoesNotMatch',
    );
    expectCode(
      check({ ...received, rawPath: '/s3//tfstate/env%3A/dev/x.tfstate' }, Date.now()),
      'SignatureDoesNotMatch',
    );
    // A path whose encoding differs only in spelling (lower-case hex, raw `:`) names the same
    // key and verifies through the spec re-encoding.
    expectOk(check({ ...received, rawPath: '/s3/tfstate/env%3a/dev/x.tfstate' }, Date.now()));
    expectOk(check({ ...received, rawPath: '/s3/tfstate/env:/dev/x.tfstate' }, Date.now()));
  });

  it('PutObject with a string body: hex x-amz-content-sha256, checksum header, body checked', async () => {
    const body = '{"version":4,"serial":1}\n';
    const [{ req, body: sent }] = await sdkRequests(
      (c) =>
        c.send(
          new PutObjectCommand({ Bucket: 'tfstate', Key: 'env:/dev/a b.tfstate', Body: body }),
        ),
      'tok',
    );
    expect(sent.toString()).toBe(body);
    const received = asReceived(req);
    const parsed = expectOk(parseSigV4(received));
    expect(parsed.payload).toEqual({
      kind: 'sha256',
      hex: createHash('sha256').update(body).digest('hex'),
    });
    expectOk(verifySigV4(parsed, SECRET, Date.now()));
    expect(await bodyCheck(parsed, body)).toBeUndefined();
    expect((await bodyCheck(parsed, body.replace('1', '2')))?.code).toBe(
      'XAmzContentSHA256Mismatch',
    );
    // The declared hash is part of the signature.
    const other = createHash('sha256').update('other').digest('hex');
    expectCode(
      check(withHeaders(received, { 'x-amz-content-sha256': other }), Date.now()),
      'SignatureDoesNotMatch',
    );
    expectCode(
      check(withHeaders(received, { 'x-amz-checksum-crc32': 'AAAAAA==' }), Date.now()),
      'SignatureDoesNotMatch',
    );
    expectCode(
      check(withHeaders(received, { 'content-length': '1' }), Date.now()),
      'SignatureDoesNotMatch',
    );
  });

  it('PutObject with a stream body: STREAMING-UNSIGNED-PAYLOAD-TRAILER', async () => {
    const [{ req, body }] = await sdkRequests((c) =>
      c.send(
        new PutObjectCommand({
          Bucket: 'tfstate',
          Key: 'k.tfstate',
          Body: Readable.from([Buffer.from('abc')]),
          ContentLength: 3,
        }),
      ),
    );
    expect(body.toString()).toMatch(/^3\r\nabc\r\n0\r\nx-amz-checksum-crc32:[^\r]+\r\n\r\n$/);
    const ctx = expectOk(check(asReceived(req), Date.now()));
    expect(ctx.payload).toEqual({
      kind: 'aws-chunked',
      encoding: 'STREAMING-UNSIGNED-PAYLOAD-TRAILER',
    });
    expectCode(
      check(withHeaders(asReceived(req), { 'x-amz-decoded-content-length': '4' }), Date.now()),
      'SignatureDoesNotMatch',
    );
  });

  it('ListObjectsV2 with prefix, delimiter, continuation token, start-after, encoding-type', async () => {
    const [{ req }] = await sdkRequests((c) =>
      c.send(
        new ListObjectsV2Command({
          Bucket: 'tfstate',
          Prefix: 'env:/',
          Delimiter: '/',
          MaxKeys: 1000,
          ContinuationToken: 'tok+en/==',
          StartAfter: 'a b',
          EncodingType: 'url',
        }),
      ),
    );
    const received = asReceived(req);
    expect(decodeQuery(received.rawQuery)).toEqual(
      expect.arrayContaining([
        ['list-type', '2'],
        ['prefix', 'env:/'],
        ['continuation-token', 'tok+en/=='],
        ['start-after', 'a b'],
      ]),
    );
    expectOk(check(received, Date.now()));
    // Reordering the parameters on the wire changes nothing; changing one does.
    const reordered = received.rawQuery.split('&').reverse().join('&');
    expectOk(check({ ...received, rawQuery: reordered }, Date.now()));
    expectCode(
      check(
        { ...received, rawQuery: received.rawQuery.replace('max-keys=1000', 'max-keys=1') },
        Date.now(),
      ),
      'SignatureDoesNotMatch',
    );
  });

  it('HeadObject and DeleteObject verify; a replay as the other fails', async () => {
    const [{ req: head }] = await sdkRequests((c) =>
      c.send(new HeadObjectCommand({ Bucket: 'tfstate', Key: 'k.tfstate.tflock' })),
    );
    const [{ req: del }] = await sdkRequests((c) =>
      c.send(new DeleteObjectCommand({ Bucket: 'tfstate', Key: 'k.tfstate.tflock' })),
    );
    expectOk(check(asReceived(head), Date.now()));
    expectOk(check(asReceived(del), Date.now()));
    expectCode(
      check({ ...asReceived(head), method: 'DELETE' }, Date.now()),
      'SignatureDoesNotMatch',
    );
  });

  it('an x-amz-* header added after signing is refused as unsigned', async () => {
    const [{ req }] = await sdkRequests((c) =>
      c.send(new GetObjectCommand({ Bucket: 'tfstate', Key: 'k' })),
    );
    expectCode(
      check(withHeaders(asReceived(req), { 'x-amz-server-side-encryption': 'AES256' }), Date.now()),
      'AccessDenied',
      /not signed: x-amz-server-side-encryption/,
    );
    // Headers outside x-amz-* may be added freely (proxies add some); they are not signed.
    expectOk(
      check(
        withHeaders(asReceived(req), { 'x-forwarded-for': '10.0.0.1', 'user-agent': 'other' }),
        Date.now(),
      ),
    );
    // x-amz-content-sha256 may be unsigned (S3 tolerates it): it is bound through the payload line.
    expect(asReceived(req).headers.authorization).toContain('x-amz-content-sha256');
  });
});

// --- requests signed with the SDK's signer directly ----------------------------------------

describe('requests signed by @smithy/signature-v4', () => {
  it('UNSIGNED-PAYLOAD on a PUT', async () => {
    const signed = await signer().sign(
      request('PUT', '/s3/tfstate/x.tfstate', {
        query: { 'x-id': 'PutObject' },
        headers: { 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD', 'content-length': '5' },
      }),
    );
    const received = asReceived(signed);
    const ctx = expectOk(check(received, Date.now()));
    expect(ctx.payload).toEqual({ kind: 'unsigned' });
    expect(payloadHashCheck(ctx.payload)).toBeUndefined();
    const hex = createHash('sha256').update('hello').digest('hex');
    expectCode(
      check(withHeaders(received, { 'x-amz-content-sha256': hex }), Date.now()),
      'SignatureDoesNotMatch',
    );
  });

  it('multiple values of one query parameter, sorted by value', async () => {
    const signed = await signer().sign(
      request('GET', '/s3/tfstate', { query: { b: 'x', a: ['2', '1', '10', ''] } }),
    );
    const received = asReceived(signed);
    expect(expectOk(parseSigV4(received)).canonicalRequest.split('\n')[2]).toBe(
      'a=&a=1&a=10&a=2&b=x',
    );
    expectOk(check(received, Date.now()));
    expectOk(check({ ...received, rawQuery: 'a=10&b=x&a=&a=2&a=1' }, Date.now()));
    expectCode(
      check({ ...received, rawQuery: 'a=10&b=x&a=2&a=1' }, Date.now()),
      'SignatureDoesNotMatch',
    );
    expectCode(
      check({ ...received, rawQuery: received.rawQuery + '&a=3' }, Date.now()),
      'SignatureDoesNotMatch',
    );
  });

  it('query values with reserved and unicode characters; `+` on the wire reads as a space', async () => {
    const value = 'a b+c/d~e=f&g:h%i ü';
    const signed = await signer().sign(request('GET', '/s3/tfstate', { query: { prefix: value } }));
    const received = asReceived(signed);
    expectOk(check(received, Date.now()));
    expect(decodeQuery(received.rawQuery)).toEqual([['prefix', value]]);
    // The same value sent with `+` for the spaces (form encoding) is the same request.
    const formEncoded = received.rawQuery.replace(/%20/g, '+');
    expect(formEncoded).not.toBe(received.rawQuery);
    expectOk(check({ ...received, rawQuery: formEncoded }, Date.now()));
  });

  it('repeated header lines are joined with "," (pass req.headersDistinct)', async () => {
    const signed = await signer().sign(
      request('GET', '/s3/tfstate/k', { headers: { 'x-amz-meta-tags': 'one,two   three,four' } }),
    );
    const received = asReceived(signed);
    expectOk(check(received, Date.now()));
    // On the wire as three lines, each with its own blanks.
    expectOk(
      check(
        withHeaders(received, { 'x-amz-meta-tags': ['one', ' two \t three ', 'four'] }),
        Date.now(),
      ),
    );
    // Node's req.headers would join them with ", ": that is not the same canonical value.
    expectCode(
      check(withHeaders(received, { 'x-amz-meta-tags': 'one, two three, four' }), Date.now()),
      'SignatureDoesNotMatch',
    );
    expectCode(
      check(withHeaders(received, { 'x-amz-meta-tags': ['one', 'four', 'two three'] }), Date.now()),
      'SignatureDoesNotMatch',
    );
  });

  it('header values with UTF-8 arrive as latin1 byte strings and verify', async () => {
    const signed = await signer().sign(
      request('PUT', '/s3/tfstate/k', {
        headers: { 'x-amz-meta-owner': 'Zoë 日本', 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' },
      }),
    );
    const received = asReceived(signed);
    expect(received.headers['x-amz-meta-owner']).not.toBe('Zoë 日本');
    expectOk(check(received, Date.now()));
  });

  it('keys with `:` `~` spaces and unicode: the raw path as the SDK encodes it', async () => {
    for (const key of ['env%3A/dev/team/x.tfstate', 'a~b/c%20d/%C3%BC/%E6%97%A5.tfstate']) {
      const signed = await signer().sign(
        request('GET', `/s3/tfstate/${key}`, { query: { 'x-id': 'GetObject' } }),
      );
      expectOk(check(asReceived(signed), Date.now()));
      expectCode(
        check({ ...asReceived(signed), rawPath: `/s3/tfstate/${key}x` }, Date.now()),
        'SignatureDoesNotMatch',
      );
    }
  });

  it('tampering with the date or the scope', async () => {
    const signed = await signer().sign(request('GET', '/s3/tfstate/k'), {
      signingDate: new Date(DOC_TIME),
    });
    const received = asReceived(signed);
    expectOk(check(received, DOC_TIME));
    // x-amz-date one second later: still the same day, the signature no longer matches.
    expectCode(
      check(withHeaders(received, { 'x-amz-date': '20130524T000001Z' }), DOC_TIME),
      'SignatureDoesNotMatch',
    );
    // Another day than the credential's: malformed.
    expectCode(
      check(withHeaders(received, { 'x-amz-date': '20130525T000000Z' }), DOC_TIME),
      'AuthorizationHeaderMalformed',
      /credential date/,
    );
    // Region changed in the scope: the signing key changes.
    expectCode(
      check(
        setAuth(received, (a) => a.replace('/us-east-1/', '/eu-west-1/')),
        DOC_TIME,
      ),
      'SignatureDoesNotMatch',
    );
    // Service other than s3.
    expectCode(
      check(
        setAuth(received, (a) => a.replace('/s3/', '/sts/')),
        DOC_TIME,
      ),
      'AuthorizationHeaderMalformed',
      /service/,
    );
    expectCode(
      check(
        setAuth(received, (a) => a.replace('aws4_request', 'aws5_request')),
        DOC_TIME,
      ),
      'AuthorizationHeaderMalformed',
    );
    // Signed headers list changed.
    expectCode(
      check(
        setAuth(received, (a) => a.replace('host;', 'host;range;')),
        DOC_TIME,
      ),
      'SignatureDoesNotMatch',
    );
    // Signature changed in one digit.
    expectCode(
      check(
        setAuth(received, (a) =>
          a.replace(/Signature=(.)/, (_m, c: string) => `Signature=${c === '0' ? '1' : '0'}`),
        ),
        DOC_TIME,
      ),
      'SignatureDoesNotMatch',
    );
    // Another access key id: another secret.
    expectCode(check(received, DOC_TIME, 'another-secret'), 'SignatureDoesNotMatch');
  });

  it('the clock: 15 minutes of skew either way, then RequestTimeTooSkewed', async () => {
    const signed = await signer().sign(request('GET', '/s3/tfstate/k'), {
      signingDate: new Date(DOC_TIME),
    });
    const received = asReceived(signed);
    expectOk(check(received, DOC_TIME + MAX_CLOCK_SKEW_MS));
    expectOk(check(received, DOC_TIME - MAX_CLOCK_SKEW_MS));
    expectCode(check(received, DOC_TIME + MAX_CLOCK_SKEW_MS + 1000), 'RequestTimeTooSkewed');
    expectCode(check(received, DOC_TIME - MAX_CLOCK_SKEW_MS - 1000), 'RequestTimeTooSkewed');
    expectCode(check(received, new Date(DOC_TIME + 3600e3).getTime()), 'RequestTimeTooSkewed');
  });

  it('the verified context does not carry the signing key into logs', async () => {
    const signed = await signer('tok').sign(request('GET', '/s3/tfstate/k'), {
      signingDate: new Date(DOC_TIME),
    });
    const ctx = expectOk(check(asReceived(signed), DOC_TIME));
    expect(ctx.signingKey.equals(deriveSigningKey(SECRET, '20130524', 'us-east-1', 's3'))).toBe(
      true,
    );
    const dumped = JSON.stringify(ctx);
    expect(dumped).not.toContain('signingKey');
    expect(Object.keys(ctx)).not.toContain('signingKey');
  });

  it('region pinning', async () => {
    const signed = await signer().sign(request('GET', '/s3/tfstate/k'), {
      signingDate: new Date(DOC_TIME),
    });
    const parsed = expectOk(parseSigV4(asReceived(signed)));
    expectOk(verifySigV4(parsed, SECRET, DOC_TIME, { region: 'us-east-1' }));
    expectCode(
      verifySigV4(parsed, SECRET, DOC_TIME, { region: 'eu-west-1' }),
      'AuthorizationHeaderMalformed',
      /region/,
    );
  });
});

// --- presigned URLs ------------------------------------------------------------------------

describe('presigned URLs (signed as @aws-sdk/s3-request-presigner does)', () => {
  async function presign(
    method: string,
    path: string,
    opts: {
      token?: string;
      expiresIn?: number;
      query?: Record<string, string>;
      headers?: Record<string, string>;
    } = {},
  ): Promise<SigV4Request> {
    const req = request(method, path, {
      query: opts.query,
      headers: { 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD', ...(opts.headers ?? {}) },
    });
    const signed = await signer(opts.token).presign(req, {
      signingDate: new Date(DOC_TIME),
      expiresIn: opts.expiresIn ?? 900,
      unsignableHeaders: new Set(['content-type']),
    });
    return asReceived(signed);
  }

  it.each([
    ['GET', undefined],
    ['GET', 'session.token.jwt'],
    ['PUT', undefined],
    ['PUT', 'session+token/with=chars'],
  ])('%s with session token %s', async (method, token) => {
    const received = await presign(method, '/s3/tfstate/env%3A/dev/k.tfstate', {
      token,
      query: { 'x-id': method === 'GET' ? 'GetObject' : 'PutObject' },
    });
    expect(received.headers.authorization).toBeUndefined();
    const parsed = expectOk(parseSigV4(received));
    expect(parsed).toMatchObject({
      via: 'query',
      sessionToken: token,
      expiresSeconds: 900,
      payload: { kind: 'unsigned' },
    });
    expect(parsed.canonicalRequest).not.toContain('X-Amz-Signature');
    expectOk(verifySigV4(parsed, SECRET, DOC_TIME + 60_000));
    // Expired, and not valid yet.
    expectOk(verifySigV4(parsed, SECRET, DOC_TIME + 900_000));
    expectCode(verifySigV4(parsed, SECRET, DOC_TIME + 901_000), 'AccessDenied', /expired/);
    expectCode(
      verifySigV4(parsed, SECRET, DOC_TIME - MAX_CLOCK_SKEW_MS - 1000),
      'AccessDenied',
      /not valid yet/,
    );
    // Tampering.
    const q = received.rawQuery;
    const at = DOC_TIME + 1000;
    expectCode(
      check({ ...received, method: method === 'GET' ? 'DELETE' : 'GET' }, at),
      'SignatureDoesNotMatch',
    );
    expectCode(
      check({ ...received, rawPath: received.rawPath + '.tflock' }, at),
      'SignatureDoesNotMatch',
    );
    expectCode(
      check({ ...received, rawQuery: q.replace('X-Amz-Expires=900', 'X-Amz-Expires=901') }, at),
      'SignatureDoesNotMatch',
    );
    expectCode(check({ ...received, rawQuery: q + '&versionId=2' }, at), 'SignatureDoesNotMatch');
    expectCode(
      check({ ...received, rawQuery: q.replace(/x-id=[A-Za-z]+/, 'x-id=DeleteObject') }, at),
      'SignatureDoesNotMatch',
    );
    expectCode(
      check(withHeaders(received, { host: 'evil.example:8080' }), at),
      'SignatureDoesNotMatch',
    );
    expectCode(
      check(
        {
          ...received,
          rawQuery: q.replace('X-Amz-Date=20130524T000000Z', 'X-Amz-Date=20130524T000100Z'),
        },
        at,
      ),
      'SignatureDoesNotMatch',
    );
    expectCode(
      check({ ...received, rawQuery: q.replace('us-east-1', 'us-east-2') }, at),
      'SignatureDoesNotMatch',
    );
    if (token) {
      expectCode(
        check(
          {
            ...received,
            rawQuery: q.replace(/X-Amz-Security-Token=[^&]+/, 'X-Amz-Security-Token=other'),
          },
          at,
        ),
        'SignatureDoesNotMatch',
      );
      expectCode(
        check({ ...received, rawQuery: q.replace(/&?X-Amz-Security-Token=[^&]+/, '') }, at),
        'SignatureDoesNotMatch',
      );
    } else {
      expectCode(
        check({ ...received, rawQuery: q + '&X-Amz-Security-Token=added' }, at),
        'SignatureDoesNotMatch',
      );
    }
    // A body on a presigned PUT is not covered (UNSIGNED-PAYLOAD): nothing to check.
    expect(payloadHashCheck(parsed.payload)).toBeUndefined();
  });

  it('a 7-day URL is accepted, a longer one is refused with AccessDenied', async () => {
    const week = await presign('GET', '/s3/tfstate/k', { expiresIn: 604800 });
    expectOk(check(week, DOC_TIME + 604800 * 1000));
    expectCode(check(week, DOC_TIME + 604800 * 1000 + 1000), 'AccessDenied', /expired/);
    const longer = {
      ...week,
      rawQuery: week.rawQuery.replace('X-Amz-Expires=604800', 'X-Amz-Expires=604801'),
    };
    expectCode(check(longer, DOC_TIME), 'AccessDenied', /604800/);
  });

  it('refuses malformed presigned parameters', async () => {
    const good = await presign('GET', '/s3/tfstate/k');
    const q = good.rawQuery;
    const cases: Array<[string, string]> = [
      [q.replace(/&?X-Amz-Date=[^&]+/, ''), 'AuthorizationHeaderMalformed'],
      [q.replace(/X-Amz-Expires=\d+/, 'X-Amz-Expires=0'), 'AuthorizationHeaderMalformed'],
      [q.replace(/X-Amz-Expires=\d+/, 'X-Amz-Expires=-5'), 'AuthorizationHeaderMalformed'],
      [q.replace(/X-Amz-Expires=\d+/, 'X-Amz-Expires=1e3'), 'AuthorizationHeaderMalformed'],
      [
        q.replace(/X-Amz-Date=[^&]+/, 'X-Amz-Date=2013-05-24T00%3A00%3A00Z'),
        'AuthorizationHeaderMalformed',
      ],
      [
        q.replace(/X-Amz-Date=[^&]+/, 'X-Amz-Date=20130231T000000Z'),
        'AuthorizationHeaderMalformed',
      ],
      [q.replace('AWS4-HMAC-SHA256', 'AWS4-HMAC-SHA1'), 'AuthorizationHeaderMalformed'],
      [q + '&X-Amz-Signature=' + '0'.repeat(64), 'AuthorizationHeaderMalformed'],
      [q + '&X-Amz-Security-Token=a&X-Amz-Security-Token=b', 'AuthorizationHeaderMalformed'],
      [
        q.replace(/X-Amz-Signature=[0-9a-f]+/, 'X-Amz-Signature=zz'),
        'AuthorizationHeaderMalformed',
      ],
      [
        q.replace(/X-Amz-SignedHeaders=[^&]+/, 'X-Amz-SignedHeaders=content-type'),
        'AuthorizationHeaderMalformed',
      ],
      [
        q.replace(/X-Amz-Credential=[^&]+/, 'X-Amz-Credential=AKID%2F20130524%2Fus-east-1%2Fs3'),
        'AuthorizationHeaderMalformed',
      ],
      [
        q.replace(
          /X-Amz-Credential=[^&]+/,
          `X-Amz-Credential=${AKID}%2F20130523%2Fus-east-1%2Fs3%2Faws4_request`,
        ),
        'AuthorizationHeaderMalformed',
      ],
      [
        q.replace('x-amz-content-sha256=UNSIGNED-PAYLOAD', 'x-amz-content-sha256=nonsense'),
        'InvalidArgument',
      ],
    ];
    for (const [rawQuery, code] of cases) {
      expectCode(check({ ...good, rawQuery }, DOC_TIME), code);
    }
  });

  it('an unsigned x-amz-* header on a presigned request is refused', async () => {
    const good = await presign('PUT', '/s3/tfstate/k');
    expectCode(
      check(withHeaders(good, { 'x-amz-acl': 'public-read' }), DOC_TIME),
      'AccessDenied',
      /not signed/,
    );
    // A header that was signed (kept out of the query) must be sent as signed.
    const withHeader = await presign('PUT', '/s3/tfstate/k', {
      headers: { 'content-md5': '1B2M2Y8AsgTpgAmY7PhCfg==' },
    });
    expectOk(check(withHeader, DOC_TIME));
    expectCode(
      check(withHeaders(withHeader, { 'content-md5': 'XXXXXXXXXXXXXXXXXXXXXX==' }), DOC_TIME),
      'SignatureDoesNotMatch',
    );
  });
});

// --- parser refusals ---------------------------------------------------------------------

describe('parseSigV4 refusals', () => {
  let base: SigV4Request;
  beforeAll(async () => {
    base = asReceived(
      await signer().sign(request('GET', '/s3/tfstate/k'), { signingDate: new Date(DOC_TIME) }),
    );
  });

  it('no authentication at all → AccessDenied', () => {
    expectCode(parseSigV4(withHeaders(base, { authorization: undefined })), 'AccessDenied');
  });

  it('header and query authentication together → InvalidArgument', () => {
    expectCode(
      parseSigV4({ ...base, rawQuery: 'X-Amz-Algorithm=AWS4-HMAC-SHA256' }),
      'InvalidArgument',
      /Only one auth/,
    );
  });

  it('other schemes → InvalidRequest', () => {
    expectCode(
      parseSigV4(withHeaders(base, { authorization: 'AWS AKID:c2lnbmF0dXJl' })),
      'InvalidRequest',
      /AWS4-HMAC-SHA256/,
    );
    expectCode(parseSigV4(withHeaders(base, { authorization: 'Bearer abc' })), 'InvalidRequest');
    expectCode(
      parseSigV4(setAuth(base, (a) => a.replace('AWS4-HMAC-SHA256', 'AWS4-ECDSA-P256-SHA256'))),
      'InvalidRequest',
    );
    expectCode(
      parseSigV4({
        ...withHeaders(base, { authorization: undefined }),
        rawQuery: 'AWSAccessKeyId=A&Signature=x&Expires=1',
      }),
      'InvalidRequest',
    );
  });

  it('malformed Authorization headers → AuthorizationHeaderMalformed', () => {
    const edits: Array<(a: string) => string> = [
      (a) => a.replace(/, SignedHeaders=[^,]+/, ''),
      (a) => a.replace(/, Signature=\w+/, ''),
      (a) => a.replace('Credential=', 'Credentials='),
      (a) => a + ', Signature=' + '0'.repeat(64),
      (a) => a.replace(/Credential=[^,]+/, 'Credential=AKID/20130524/us-east-1/s3'),
      (a) => a.replace(/Credential=[^,]+/, 'Credential=/20130524/us-east-1/s3/aws4_request'),
      (a) =>
        a.replace(/Credential=[^,]+/, `Credential=${AKID}/2013-05-24/us-east-1/s3/aws4_request`),
      (a) =>
        a.replace(/Credential=[^,]+/, `Credential=${AKID}/20130524/us-east-1/s3/aws4_request/x`),
      (a) => a.replace('SignedHeaders=', 'SignedHeaders=Host;'),
      (a) => a.replace(/SignedHeaders=[^,]+/, 'SignedHeaders=x-amz-date;x-amz-content-sha256'),
      (a) =>
        a.replace(/SignedHeaders=[^,]+/, 'SignedHeaders=host;host;x-amz-date;x-amz-content-sha256'),
      (a) => a.replace(/SignedHeaders=[^,]+/, 'SignedHeaders='),
      (a) => a.replace(/Signature=\w+/, 'Signature=abc'),
      (a) => a.replace(/Signature=\w+/, 'Signature=' + 'g'.repeat(64)),
    ];
    for (const edit of edits)
      expectCode(parseSigV4(setAuth(base, edit)), 'AuthorizationHeaderMalformed');
  });

  it('tolerates the component spacing variants clients use', () => {
    const compact = setAuth(base, (a) => a.replace(/, /g, ','));
    expectOk(check(compact, DOC_TIME));
    const spaced = setAuth(base, (a) => a.replace(/, /g, ' ,  ').replace(' ', '   '));
    expectOk(check(spaced, DOC_TIME));
  });

  it('missing or invalid dates → AccessDenied', () => {
    expectCode(parseSigV4(withHeaders(base, { 'x-amz-date': undefined })), 'AccessDenied', /Date/);
    expectCode(parseSigV4(withHeaders(base, { 'x-amz-date': '20130524T250000Z' })), 'AccessDenied');
    expectCode(
      parseSigV4(withHeaders(base, { 'x-amz-date': 'Fri, 24 May 2013 00:00:00 GMT' })),
      'AccessDenied',
    );
    expectCode(
      parseSigV4(withHeaders(base, { 'x-amz-date': ['20130524T000000Z', '20130524T000001Z'] })),
      'InvalidArgument',
    );
  });

  it('a Date header gives the time only when signed', () => {
    const noAmzDate = setAuth(
      withHeaders(base, { 'x-amz-date': undefined, date: 'Fri, 24 May 2013 00:00:00 GMT' }),
      (a) => a.replace(';x-amz-date', ''),
    );
    expectCode(parseSigV4(noAmzDate), 'AccessDenied', /Date header must be signed/);
    const parsed = expectOk(
      parseSigV4(setAuth(noAmzDate, (a) => a.replace('SignedHeaders=', 'SignedHeaders=date;'))),
    );
    expect(parsed.amzDate).toBe('20130524T000000Z');
  });

  it('x-amz-content-sha256 missing → InvalidRequest, malformed → InvalidArgument', () => {
    expectCode(
      parseSigV4(withHeaders(base, { 'x-amz-content-sha256': undefined })),
      'InvalidRequest',
      /x-amz-content-sha256/,
    );
    expectCode(parseSigV4(withHeaders(base, { 'x-amz-content-sha256': 'abc' })), 'InvalidArgument');
    expectCode(
      parseSigV4(
        withHeaders(base, { 'x-amz-content-sha256': 'STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD' }),
      ),
      'InvalidRequest',
    );
    for (const mode of [
      'UNSIGNED-PAYLOAD',
      'STREAMING-UNSIGNED-PAYLOAD-TRAILER',
      'STREAMING-AWS4-HMAC-SHA256-PAYLOAD',
      'STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER',
    ]) {
      expect(
        expectOk(parseSigV4(withHeaders(base, { 'x-amz-content-sha256': mode }))).payload.kind,
      ).not.toBe('sha256');
    }
  });

  it('two different Authorization headers → InvalidArgument', () => {
    const a = base.headers.authorization as string;
    expectCode(
      parseSigV4(withHeaders(base, { authorization: [a, a.replace('us-east-1', 'eu-west-1')] })),
      'InvalidArgument',
    );
    expectOk(parseSigV4(withHeaders(base, { authorization: [a, a] })));
  });

  it('parseAccessKeyFromRequest reads the key id from either mechanism', async () => {
    expect(parseAccessKeyFromRequest(base)).toEqual({ ok: true, value: AKID });
    const presigned = asReceived(
      await signer().presign(request('GET', '/s3/tfstate/k'), { signingDate: new Date(DOC_TIME) }),
    );
    expect(parseAccessKeyFromRequest(presigned)).toEqual({ ok: true, value: AKID });
    expectCode(
      parseAccessKeyFromRequest(withHeaders(base, { authorization: undefined })),
      'AccessDenied',
    );
    expectCode(
      parseAccessKeyFromRequest(setAuth(base, (a) => a.replace('/s3/', '/ec2/'))),
      'AuthorizationHeaderMalformed',
    );
  });
});

// --- canonicalisation pieces ------------------------------------------------------------

describe('canonical forms', () => {
  it('canonicalQuery re-encodes per the spec and sorts by name, then value', () => {
    expect(canonicalQuery('b=2&a=1&a=0&c')).toBe('a=0&a=1&b=2&c=');
    expect(canonicalQuery('prefix=env%3a%2f&x=a+b&y=%7e~&z=%zz&%41=1')).toBe(
      'A=1&prefix=env%3A%2F&x=a%20b&y=~~&z=%25zz',
    );
    expect(canonicalQuery('k=%E2%82%AC&k=%C3%BC')).toBe('k=%C3%BC&k=%E2%82%AC');
    expect(canonicalQuery('&&a=1&')).toBe('a=1');
    expect(canonicalQuery("q=!'()*")).toBe('q=%21%27%28%29%2A');
    expect(canonicalQuery('X-Amz-Signature=abc&b=1', 'X-Amz-Signature')).toBe('b=1');
    expect(canonicalQuery('')).toBe('');
    // Sorting is by the encoded bytes: upper case before `_` before lower case
    // (by name first: `a` sorts before `a-b` although "a=1" > "a-b=1" as whole strings).
    expect(canonicalQuery('a=1&B=1&a-b=1&_=1')).toBe('B=1&_=1&a=1&a-b=1');
  });

  it('canonicalUriCandidates keeps the raw path first and adds the spec encoding only when it differs', () => {
    expect(canonicalUriCandidates('/s3/tfstate/env%3A/dev/k')).toEqual([
      '/s3/tfstate/env%3A/dev/k',
    ]);
    expect(canonicalUriCandidates('')).toEqual(['/']);
    expect(canonicalUriCandidates('/a:b/%7e/c%2fd/e+f')).toEqual([
      '/a:b/%7e/c%2fd/e+f',
      '/a%3Ab/~/c%2Fd/e%2Bf',
    ]);
    // Non-ASCII bytes as Node hands them over (latin1) are encoded as UTF-8 escapes.
    expect(canonicalUriCandidates('/ü'.replace('ü', Buffer.from('ü').toString('latin1')))[1]).toBe(
      '/%C3%BC',
    );
    expect(canonicalUriCandidates('/./a/../b//c')).toEqual(['/./a/../b//c']);
  });

  it('canonicalHeaderValue trims, collapses blank runs and joins lines with ","', () => {
    expect(canonicalHeaderValue(['  a   b  '])).toBe('a b');
    expect(canonicalHeaderValue(['a', ' b\t c ', ''])).toBe('a,b c,');
    expect(canonicalHeaderValue([])).toBe('');
  });

  it('decodeQuery decodes UTF-8 and `+`, leaves broken escapes literal', () => {
    expect(decodeQuery('a=%C3%BC+x&b&c=%zz&=v')).toEqual([
      ['a', 'ü x'],
      ['b', ''],
      ['c', '%zz'],
      ['', 'v'],
    ]);
  });
});
