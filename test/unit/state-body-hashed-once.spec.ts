import * as crypto from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Request } from 'express';
import { checksumBase64 } from '../../src/s3compat/checksums';
import { openStateBody } from '../../src/s3compat/request-body';
import type { SigningContext } from '../../src/s3compat/sigv4';
import { StateIngest } from '../../src/state/state-ingest';
import { tfState } from '../support/services';

/**
 * A PutObject of a state is hashed once: the state writer's ingest computes the SHA-256 (the
 * version's identity) and the MD5 (its ETag) as it stores the bytes, and the S3 door checks
 * what the request declared (x-amz-content-sha256, Content-MD5, a SHA256 checksum) against
 * those digests instead of hashing the body a second time on its way in.
 */
const STATE = Buffer.from(tfState(7, 'lineage-hash', { big: 'x'.repeat(200_000) }));
const sha256Hex = crypto.createHash('sha256').update(STATE).digest('hex');
const md5B64 = crypto.createHash('md5').update(STATE).digest('base64');
const sha256B64 = checksumBase64('SHA256', STATE);

function request(headers: Record<string, string>): Request {
  const req = Readable.from([STATE.subarray(0, 70_000), STATE.subarray(70_000)], {
    objectMode: false,
  }) as unknown as IncomingMessage;
  const all = { 'content-length': String(STATE.length), ...headers };
  Object.assign(req, {
    headers: all,
    headersDistinct: Object.fromEntries(Object.entries(all).map(([k, v]) => [k, [v]])),
  });
  return req as unknown as Request;
}

const signing = (payloadHex?: string) =>
  ({
    via: 'header',
    payload: payloadHex ? { kind: 'sha256', hex: payloadHex } : { kind: 'unsigned' },
  }) as unknown as SigningContext;

/** The door's body into the writer's ingest into a sink, as `StateWriter.write` runs them. */
async function put(headers: Record<string, string>, payloadHex?: string) {
  const body = openStateBody(request(headers), signing(payloadHex));
  const ingest = new StateIngest(16 * 1024 * 1024, { verify: body.verify });
  let stored = 0;
  const sink = new Writable({
    write(c: Buffer, _e, cb) {
      stored += c.length;
      cb();
    },
  });
  await pipeline(body.stream, ingest, sink);
  return { stored, digest: ingest.result() };
}

describe('a PutObject of a state hashes each byte once', () => {
  /** Bytes that went through a node:crypto hash (SHA-256, MD5, SHA-1 alike). */
  let hashed: number;
  beforeEach(() => {
    hashed = 0;
    const original = crypto.Hash.prototype.update;
    jest.spyOn(crypto.Hash.prototype, 'update').mockImplementation(function (
      this: crypto.Hash,
      ...args: unknown[]
    ) {
      const data = args[0];
      hashed += typeof data === 'string' ? Buffer.byteLength(data) : (data as Buffer).length;
      return (original as (...a: unknown[]) => crypto.Hash).apply(this, args);
    });
  });
  afterEach(() => jest.restoreAllMocks());

  it('x-amz-content-sha256 and Content-MD5 are checked against the ingest’s SHA-256 and MD5: one of each', async () => {
    const r = await put({ 'x-amz-content-sha256': sha256Hex, 'content-md5': md5B64 }, sha256Hex);
    expect(r.stored).toBe(STATE.length);
    expect(r.digest.sha256).toBe(sha256Hex);
    // The SHA-256 and the MD5 of every byte, nothing more.
    expect(hashed).toBe(2 * STATE.length);
  });

  it('a SHA256 checksum header is the same digest: still one SHA-256', async () => {
    await put({ 'x-amz-checksum-sha256': sha256B64 }, sha256Hex);
    expect(hashed).toBe(2 * STATE.length);
  });

  it('each declaration that does not match is refused with the S3 error it had', async () => {
    const other = crypto.createHash('sha256').update('other').digest('hex');
    await expect(put({}, other)).rejects.toMatchObject({ code: 'XAmzContentSHA256Mismatch' });
    await expect(put({ 'content-md5': 'AAAAAAAAAAAAAAAAAAAAAA==' })).rejects.toMatchObject({
      code: 'BadDigest',
    });
    await expect(
      put({ 'x-amz-checksum-sha256': checksumBase64('SHA256', 'other') }),
    ).rejects.toMatchObject({ code: 'BadDigest' });
    // Both wrong: the payload hash is what is reported, as when the door checked it itself.
    await expect(put({ 'content-md5': 'AAAAAAAAAAAAAAAAAAAAAA==' }, other)).rejects.toMatchObject({
      code: 'XAmzContentSHA256Mismatch',
    });
  });
});
