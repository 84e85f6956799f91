import { createHash, randomUUID } from 'node:crypto';
import { crc32 } from 'node:zlib';
import { DATABASE_KIND } from '../support/database';
import {
  badSignature,
  expectUnsignedRefusedAlike,
  ParityScope,
  parityScope,
  Signed,
} from '../support/s3-parity';
import { sendRaw, signS3 } from '../support/s3-signer';
import { tfState } from '../support/services';

/**
 * PutObject and DeleteObject are served below Express (`S3WriteRoute`, src/lean-routes.ts) —
 * the `.tflock` object of every `terraform plan`, and the state of an apply. As for the reads
 * (s3-read-route.spec.ts), the `statehouse-parity` query parameter sends the same request to the
 * controller: each answer — a lock taken, held, released, a state written, and each kind of
 * refusal — must be the controller's, header for header and byte for byte, but for the ids and
 * the date. Between the two, what the first changed is put back, so both meet the same state.
 */

jest.setTimeout(120_000);

const KEY = 'parity-w/app.tfstate';
const LOCK = `${KEY}.tflock`;
const LOCK_INFO = Buffer.from(
  JSON.stringify({
    ID: '8c4b2f55-5e6f-4a59-9d2e-2f1f2f3c0a11',
    Operation: 'OperationTypePlan',
    Info: '',
    Who: 'ci@runner',
    Version: '1.10.0',
    Created: '2026-12-04T10:00:00.000000Z',
    Path: `tfstate/${KEY}`,
  }),
);
/** Another run's LockInfo (another ID) for the same lock. */
const OTHER_LOCK_INFO = Buffer.from(
  LOCK_INFO.toString().replace('8c4b2f55-5e6f-4a59-9d2e-2f1f2f3c0a11', 'another-run'),
);
const STATE = Buffer.from(tfState(1, 'lineage-parity-w', { out: 'y'.repeat(300) }));

/**
 * The request with an id of its own (signed, as SDKs sign `amz-sdk-invocation-id`): two equal
 * writes signed in the same second would otherwise carry one signature, and the second would be
 * refused as a replay.
 */
const fresh = (r: Signed): Signed => ({
  ...r,
  headers: { ...r.headers, 'amz-sdk-invocation-id': randomUUID() },
});

/** `data` as aws-chunked with a trailing CRC32 (as Terraform's SDK sends a body over https). */
function awsChunked(
  data: Buffer,
  checksumOf: Buffer = data,
): { body: Buffer; headers: Record<string, string> } {
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(checksumOf));
  const body = Buffer.concat([
    Buffer.from(`${data.length.toString(16)}\r\n`),
    data,
    Buffer.from(`\r\n0\r\nx-amz-checksum-crc32:${crc.toString('base64')}\r\n\r\n`),
  ]);
  const headers = {
    'content-encoding': 'aws-chunked',
    'x-amz-content-sha256': 'STREAMING-UNSIGNED-PAYLOAD-TRAILER',
    'x-amz-decoded-content-length': String(data.length),
    'x-amz-trailer': 'x-amz-checksum-crc32',
  };
  return { body, headers };
}

const md5Base64 = (b: Buffer): string => createHash('md5').update(b).digest('base64');

describe(`S3 writes below Express answer as the controller does (${DATABASE_KIND})`, () => {
  const scope = parityScope('parity-w');
  const expectSame: ParityScope['expectSame'] = (creds, r, expected, options) =>
    scope.expectSame(creds, fresh(r), expected, options);

  const send = async (r: Signed): Promise<number> =>
    (await sendRaw(scope.server.port, await signS3(scope.server.port, scope.writer, fresh(r))))
      .status;
  const takeLock = async (): Promise<void> => {
    expect(await send({ method: 'PUT', key: LOCK, body: LOCK_INFO })).toBe(200);
  };
  const dropLock = async (): Promise<void> => {
    expect(await send({ method: 'DELETE', key: LOCK })).toBe(204);
  };
  const putLock = (headers: Record<string, string> = {}): Signed => ({
    method: 'PUT',
    key: LOCK,
    body: LOCK_INFO,
    headers: { 'if-none-match': '*', 'content-type': 'application/json', ...headers },
  });

  it('a lock taken and released, as Terraform does it', async () => {
    await expectSame(
      scope.writer,
      putLock({ 'content-md5': md5Base64(LOCK_INFO) }),
      { status: 200 },
      {
        between: dropLock,
      },
    );
    await expectSame(
      scope.writer,
      { method: 'DELETE', key: LOCK },
      { status: 204 },
      {
        between: takeLock,
      },
    );
  });

  it('a lock already held: the conditional write fails alike', async () => {
    await takeLock();
    await expectSame(
      scope.writer,
      { ...putLock(), body: OTHER_LOCK_INFO },
      { status: 412, code: 'PreconditionFailed' },
    );
    await dropLock();
  });

  it('a delete of a lock nobody holds', async () => {
    await expectSame(scope.writer, { method: 'DELETE', key: LOCK }, { status: 204 });
  });

  it('a state written, a conditional write refused, a state deleted', async () => {
    const put: Signed = { method: 'PUT', key: KEY, body: STATE };
    await expectSame(scope.writer, put, { status: 200 });
    await expectSame(
      scope.writer,
      { ...put, headers: { 'if-none-match': '*' } },
      { status: 412, code: 'PreconditionFailed' },
    );
    await expectSame(
      scope.writer,
      { ...put, headers: { 'x-amz-server-side-encryption': 'AES256' } },
      { status: 200 },
    );
    await expectSame(
      scope.writer,
      { method: 'DELETE', key: KEY },
      { status: 204 },
      {
        between: async () => expect(await send(put)).toBe(200),
      },
    );
  });

  it('bodies: a wrong Content-MD5, a payload that is not the signed one, a lock too large', async () => {
    await expectSame(scope.writer, putLock({ 'content-md5': md5Base64(Buffer.from('other')) }), {
      status: 400,
      code: 'BadDigest',
    });
    await expectSame(
      scope.writer,
      { method: 'PUT', key: KEY, body: STATE },
      { status: 400, code: 'XAmzContentSHA256Mismatch' },
      { tamper: (raw) => ({ ...raw, body: Buffer.from(STATE.toString().replace('y', 'z')) }) },
    );
    await expectSame(
      scope.writer,
      { method: 'PUT', key: LOCK, body: Buffer.alloc(64 * 1024 + 1, 0x20) },
      { status: 400, code: 'EntityTooLarge' },
    );
  });

  it('an aws-chunked lock with a trailing checksum, and one whose checksum is wrong', async () => {
    const chunked = (checksumOf?: Buffer): Signed => {
      const { body, headers } = awsChunked(LOCK_INFO, checksumOf);
      return { method: 'PUT', key: LOCK, body, headers: { 'if-none-match': '*', ...headers } };
    };
    await expectSame(scope.writer, chunked(), { status: 200 }, { between: dropLock });
    await dropLock();
    await expectSame(scope.writer, chunked(Buffer.from('other')), {
      status: 400,
      code: 'BadDigest',
    });
  });

  it('refusals: bad signature, unknown bucket, no permission, virtual-hosted style', async () => {
    await expectSame(
      scope.writer,
      putLock(),
      { status: 403, code: 'SignatureDoesNotMatch' },
      {
        tamper: badSignature,
      },
    );
    await expectSame(
      scope.writer,
      { method: 'DELETE', key: LOCK },
      { status: 403, code: 'SignatureDoesNotMatch' },
      { tamper: badSignature },
    );
    await expectSame(
      scope.writer,
      { ...putLock(), bucket: 'other-bucket' },
      { status: 404, code: 'NoSuchBucket' },
    );
    await expectSame(
      scope.writer,
      { method: 'DELETE', key: LOCK, bucket: 'other-bucket' },
      { status: 404, code: 'NoSuchBucket' },
    );
    await expectSame(scope.nobody, putLock(), { status: 403, code: 'AccessDenied' });
    await expectSame(
      scope.nobody,
      { method: 'DELETE', key: LOCK },
      { status: 403, code: 'AccessDenied' },
    );
    await expectSame(
      scope.nobody,
      { method: 'PUT', key: KEY, body: STATE },
      {
        status: 403,
        code: 'AccessDenied',
      },
    );
    await expectSame(
      scope.writer,
      { ...putLock(), host: `tfstate.127.0.0.1:${scope.server.port}` },
      { status: 400, code: 'InvalidRequest' },
    );
  });

  it('a signed write is accepted once, through either way', async () => {
    const signed = await signS3(scope.server.port, scope.writer, putLock());
    expect((await sendRaw(scope.server.port, signed)).status).toBe(200);
    await dropLock();
    const again = await sendRaw(scope.server.port, signed);
    expect(again.status).toBe(403);
    expect(again.text).toContain('already accepted once');
  });

  it('an unsigned write is refused alike', async () => {
    await expectUnsignedRefusedAlike(scope.server.port, 'DELETE', `/s3/tfstate/${LOCK}`);
  });
});
