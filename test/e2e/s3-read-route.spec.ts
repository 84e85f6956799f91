import { DATABASE_KIND } from '../support/database';
import {
  badSignature,
  expectUnsignedRefusedAlike,
  parityScope,
  Signed,
} from '../support/s3-parity';
import { sendRaw, signS3 } from '../support/s3-signer';
import { tfState } from '../support/services';

/**
 * GetObject and HeadObject are served below Express (`S3ReadRoute`, src/lean-routes.ts), every
 * other S3 request by the door's controller. A query parameter the door ignores
 * (`statehouse-parity`, signed like the rest) sends the same read to the controller instead:
 * every answer of the lean route — successes, conditions, ranges and each kind of refusal —
 * must be the controller's, header for header and byte for byte, but for the ids and the date.
 */

jest.setTimeout(120_000);

const KEY = 'parity/app.tfstate';
const STATE = tfState(4, 'lineage-parity', { out: 'x'.repeat(300) });

describe(`S3 reads below Express answer as the controller does (${DATABASE_KIND})`, () => {
  const scope = parityScope('parity', async ({ server, writer }) => {
    const put = await sendRaw(
      server.port,
      await signS3(server.port, writer, { method: 'PUT', key: KEY, body: Buffer.from(STATE) }),
    );
    expect(put.status).toBe(200);
  });
  const { expectSame } = scope;

  it('GetObject and HeadObject of a state', async () => {
    await expectSame(scope.writer, { method: 'GET', key: KEY }, { status: 200 });
    await expectSame(scope.writer, { method: 'HEAD', key: KEY }, { status: 200 });
  });

  it('conditions and ranges', async () => {
    const head = await sendRaw(
      scope.server.port,
      await signS3(scope.server.port, scope.writer, { method: 'HEAD', key: KEY }),
    );
    const etag = head.headers.etag as string;
    expect(etag).toMatch(/^"[0-9a-f]{32}"$/);
    const get = (headers: Record<string, string>): Signed => ({ method: 'GET', key: KEY, headers });
    await expectSame(scope.writer, get({ 'if-none-match': etag }), { status: 304 });
    await expectSame(scope.writer, get({ 'if-match': '"0123"' }), {
      status: 412,
      code: 'PreconditionFailed',
    });
    await expectSame(scope.writer, get({ range: 'bytes=0-9' }), { status: 206 });
    await expectSame(scope.writer, get({ range: 'bytes=100000-' }), {
      status: 416,
      code: 'InvalidRange',
    });
  });

  it('refusals: missing object, unknown bucket, no access, lock object, bad signature', async () => {
    await expectSame(
      scope.writer,
      { method: 'GET', key: 'parity/none.tfstate' },
      { status: 404, code: 'NoSuchKey' },
    );
    await expectSame(scope.writer, { method: 'HEAD', key: 'parity/none.tfstate' }, { status: 404 });
    await expectSame(
      scope.writer,
      { method: 'GET', key: KEY, bucket: 'other-bucket' },
      { status: 404, code: 'NoSuchBucket' },
    );
    await expectSame(
      scope.nobody,
      { method: 'GET', key: KEY },
      { status: 403, code: 'AccessDenied' },
    );
    await expectSame(scope.nobody, { method: 'HEAD', key: KEY }, { status: 403 });
    await expectSame(scope.writer, { method: 'GET', key: `${KEY}.tflock` }, { status: 404 });
    await expectSame(
      scope.writer,
      { method: 'GET', key: KEY },
      { status: 403, code: 'SignatureDoesNotMatch' },
      { tamper: badSignature },
    );
    await expectSame(
      scope.writer,
      { method: 'GET', key: KEY, host: `tfstate.127.0.0.1:${scope.server.port}` },
      { status: 400, code: 'InvalidRequest' },
    );
  });

  it('an unsigned read is refused alike', async () => {
    await expectUnsignedRefusedAlike(scope.server.port, 'GET', `/s3/tfstate/${KEY}`);
  });
});
