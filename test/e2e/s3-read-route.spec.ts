import type { IncomingHttpHeaders } from 'node:http';
import { DATABASE_KIND } from '../support/database';
import { RawReply, RawRequest, S3Creds, sendRaw, signS3 } from '../support/s3-signer';
import { apiFetch, onFreshServer, RunningServer, s3CredentialsFor } from '../support/server';
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
/** What differs between any two answers: the request's ids, the time, the connection. */
const PER_ANSWER = new Set([
  'x-request-id',
  'x-amz-request-id',
  'date',
  'connection',
  'keep-alive',
]);

function comparable(r: RawReply): { status: number; headers: IncomingHttpHeaders; text: string } {
  const headers: IncomingHttpHeaders = {};
  for (const [k, v] of Object.entries(r.headers)) if (!PER_ANSWER.has(k)) headers[k] = v;
  const ids = [r.headers['x-amz-request-id'], r.headers['x-request-id']].filter(
    (id): id is string => typeof id === 'string' && id !== '',
  );
  let text = r.text;
  for (const id of ids) text = text.split(id).join('<request-id>');
  return { status: r.status, headers, text };
}

describe(`S3 reads below Express answer as the controller does (${DATABASE_KIND})`, () => {
  let server: RunningServer;
  let writer: S3Creds;
  let nobody: S3Creds;
  onFreshServer((s) => (server = s));

  beforeAll(async () => {
    writer = await s3CredentialsFor(server, 'svc:parity-writer');
    nobody = await s3CredentialsFor(server, 'svc:parity-nobody');
    const put = await sendRaw(
      server.port,
      await signS3(server.port, writer, { method: 'PUT', key: KEY, body: Buffer.from(STATE) }),
    );
    expect(put.status).toBe(200);
    // From here on deny by default: only the writer (the RBAC admin) may read.
    const init = await apiFetch(server, '/v1/rbac/init', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ admin: { subject: 'svc:parity-writer' } }),
    });
    expect(init.status).toBeLessThan(300);
  });

  type Signed = Parameters<typeof signS3>[2];
  /** The request through the lean route, then through the controller; both answers. */
  async function both(
    creds: S3Creds,
    r: Signed,
    tamper: (raw: RawRequest) => RawRequest = (raw) => raw,
  ): Promise<[RawReply, RawReply]> {
    const lean = await sendRaw(server.port, tamper(await signS3(server.port, creds, r)));
    const routed = await sendRaw(
      server.port,
      tamper(
        await signS3(server.port, creds, {
          ...r,
          query: { ...r.query, 'statehouse-parity': '1' },
        }),
      ),
    );
    return [lean, routed];
  }

  async function expectSame(
    creds: S3Creds,
    r: Signed,
    expected: { status: number; code?: string },
    tamper?: (raw: RawRequest) => RawRequest,
  ): Promise<void> {
    const [lean, routed] = await both(creds, r, tamper);
    expect(lean.status).toBe(expected.status);
    if (expected.code) expect(lean.text).toContain(`<Code>${expected.code}</Code>`);
    const a = comparable(lean);
    const b = comparable(routed);
    // The error's Resource names the path, without the query: the same for both.
    expect(a).toEqual(b);
  }

  it('GetObject and HeadObject of a state', async () => {
    await expectSame(writer, { method: 'GET', key: KEY }, { status: 200 });
    await expectSame(writer, { method: 'HEAD', key: KEY }, { status: 200 });
  });

  it('conditions and ranges', async () => {
    const head = await sendRaw(
      server.port,
      await signS3(server.port, writer, { method: 'HEAD', key: KEY }),
    );
    const etag = head.headers.etag as string;
    expect(etag).toMatch(/^"[0-9a-f]{32}"$/);
    const get = (headers: Record<string, string>): Signed => ({ method: 'GET', key: KEY, headers });
    await expectSame(writer, get({ 'if-none-match': etag }), { status: 304 });
    await expectSame(writer, get({ 'if-match': '"0123"' }), {
      status: 412,
      code: 'PreconditionFailed',
    });
    await expectSame(writer, get({ range: 'bytes=0-9' }), { status: 206 });
    await expectSame(writer, get({ range: 'bytes=100000-' }), {
      status: 416,
      code: 'InvalidRange',
    });
  });

  it('refusals: missing object, unknown bucket, no access, lock object, bad signature', async () => {
    await expectSame(
      writer,
      { method: 'GET', key: 'parity/none.tfstate' },
      { status: 404, code: 'NoSuchKey' },
    );
    await expectSame(writer, { method: 'HEAD', key: 'parity/none.tfstate' }, { status: 404 });
    await expectSame(
      writer,
      { method: 'GET', key: KEY, bucket: 'other-bucket' },
      { status: 404, code: 'NoSuchBucket' },
    );
    await expectSame(nobody, { method: 'GET', key: KEY }, { status: 403, code: 'AccessDenied' });
    await expectSame(nobody, { method: 'HEAD', key: KEY }, { status: 403 });
    await expectSame(writer, { method: 'GET', key: `${KEY}.tflock` }, { status: 404 });
    await expectSame(
      writer,
      { method: 'GET', key: KEY },
      { status: 403, code: 'SignatureDoesNotMatch' },
      (raw) => ({
        ...raw,
        headers: {
          ...raw.headers,
          authorization: raw.headers.authorization.replace(
            /Signature=[0-9a-f]{4}/,
            'Signature=0000',
          ),
        },
      }),
    );
    await expectSame(
      writer,
      { method: 'GET', key: KEY, host: `tfstate.127.0.0.1:${server.port}` },
      { status: 400, code: 'InvalidRequest' },
    );
  });

  it('an unsigned read is refused alike', async () => {
    const anon = (target: string) => sendRaw(server.port, { method: 'GET', target, headers: {} });
    const path = `/s3/tfstate/${KEY}`;
    const [lean, routed] = [await anon(path), await anon(`${path}?statehouse-parity=1`)];
    expect(lean.status).toBe(403);
    expect(comparable(lean)).toEqual(comparable(routed));
  });
});
