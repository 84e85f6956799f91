import { DATABASE_KIND } from '../support/database';
import { badSignature, comparable, parityScope } from '../support/s3-parity';
import { sendRaw, signS3 } from '../support/s3-signer';
import { tfState } from '../support/services';

/**
 * ListObjectsV2 is served below Express (`S3ListRoute`, src/lean-routes.ts) — the workspace
 * listing of every `terraform plan` of `backend "s3"`. As for the reads and writes
 * (s3-read-route.spec.ts, s3-write-route.spec.ts), the `statehouse-parity` query parameter sends
 * the same request to the controller: each answer — listings, pages, encodings and each kind of
 * refusal — must be the controller's, header for header and byte for byte, but for the ids and
 * the date.
 */

jest.setTimeout(120_000);

const KEYS = [
  'parity-l/app.tfstate',
  'parity-l/db.tfstate',
  'parity-l/net/core.tfstate',
  'env:/staging/parity-l/app.tfstate',
  'env:/prod/parity-l/app.tfstate',
];

const listing = (query: Record<string, string>, bucket?: string) => ({
  method: 'GET',
  key: '',
  bucket,
  query: { 'list-type': '2', ...query },
});

describe(`S3 listings below Express answer as the controller does (${DATABASE_KIND})`, () => {
  const scope = parityScope('parity-l', async ({ server, writer }) => {
    for (const [i, key] of KEYS.entries()) {
      const body = Buffer.from(tfState(1, `lineage-parity-l-${i}`, { i }));
      const put = await sendRaw(
        server.port,
        await signS3(server.port, writer, { method: 'PUT', key, body }),
      );
      expect(put.status).toBe(200);
    }
  });
  const { expectSame } = scope;

  it("Terraform's workspace listing, and the whole bucket", async () => {
    await expectSame(scope.writer, listing({ prefix: 'env:/' }), { status: 200 });
    await expectSame(scope.writer, listing({}), { status: 200 });
    await expectSame(scope.writer, listing({ prefix: 'parity-l/', 'x-id': 'ListObjectsV2' }), {
      status: 200,
    });
    const lean = await sendRaw(
      scope.server.port,
      await signS3(scope.server.port, scope.writer, listing({ prefix: 'env:/' })),
    );
    expect(lean.text).toContain('<Key>env:/prod/parity-l/app.tfstate</Key>');
    expect(lean.text).toContain('<Key>env:/staging/parity-l/app.tfstate</Key>');
    expect(lean.headers['content-type']).toBe('application/xml');
  });

  it('delimiters, pages, start-after, url encoding, fetch-owner', async () => {
    await expectSame(scope.writer, listing({ delimiter: '/' }), { status: 200 });
    await expectSame(scope.writer, listing({ prefix: 'env:/', delimiter: '/' }), { status: 200 });
    await expectSame(scope.writer, listing({ 'max-keys': '1' }), { status: 200 });
    await expectSame(scope.writer, listing({ 'max-keys': '0' }), { status: 200 });
    await expectSame(scope.writer, listing({ 'start-after': 'parity-l/' }), { status: 200 });
    await expectSame(scope.writer, listing({ 'encoding-type': 'url' }), { status: 200 });
    await expectSame(scope.writer, listing({ 'fetch-owner': 'true' }), { status: 200 });
    const first = await sendRaw(
      scope.server.port,
      await signS3(scope.server.port, scope.writer, listing({ 'max-keys': '2' })),
    );
    const token = /<NextContinuationToken>([^<]+)</.exec(first.text)?.[1];
    expect(token).toBeDefined();
    await expectSame(
      scope.writer,
      listing({ 'max-keys': '2', 'continuation-token': token as string }),
      {
        status: 200,
      },
    );
  });

  it('refusals: bad arguments, unknown bucket, bad signature, virtual-hosted style', async () => {
    for (const bad of <Record<string, string>[]>[
      { 'continuation-token': 'not-a-token' },
      { 'continuation-token': '' },
      { 'max-keys': '-1' },
      { 'encoding-type': 'base64' },
    ]) {
      await expectSame(scope.writer, listing(bad), { status: 400, code: 'InvalidArgument' });
    }
    await expectSame(scope.writer, listing({}, 'other-bucket'), {
      status: 404,
      code: 'NoSuchBucket',
    });
    await expectSame(
      scope.writer,
      listing({}),
      { status: 403, code: 'SignatureDoesNotMatch' },
      {
        tamper: badSignature,
      },
    );
    await expectSame(
      scope.writer,
      { ...listing({}), host: `tfstate.127.0.0.1:${scope.server.port}` },
      { status: 400, code: 'InvalidRequest' },
    );
  });

  it('a caller allowed nothing lists nothing, alike', async () => {
    await expectSame(scope.nobody, listing({ prefix: 'env:/' }), { status: 200 });
    const r = await sendRaw(
      scope.server.port,
      await signS3(scope.server.port, scope.nobody, listing({})),
    );
    expect(r.text).toContain('<KeyCount>0</KeyCount>');
  });

  it('an unsigned listing is refused alike', async () => {
    const anon = (target: string) =>
      sendRaw(scope.server.port, { method: 'GET', target, headers: {} });
    const lean = await anon('/s3/tfstate?list-type=2&prefix=env%3A%2F');
    const routed = await anon('/s3/tfstate?list-type=2&prefix=env%3A%2F&statehouse-parity=1');
    expect(lean.status).toBe(403);
    expect(comparable(lean)).toEqual(comparable(routed));
  });
});
