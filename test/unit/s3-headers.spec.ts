import { createServer, IncomingMessage, Server } from 'node:http';
import { AddressInfo, connect } from 'node:net';
import { describeS3Request, S3RequestHead } from '../../src/s3compat/s3-headers';

/** What describeS3Request made of a request sent as raw header lines over a real socket. */
let server: Server;
let seen: { head: S3RequestHead; again: S3RequestHead; req: IncomingMessage } | undefined;

beforeAll(async () => {
  server = createServer((req, res) => {
    const head = describeS3Request(req);
    req.headers['if-match'] = '"changed later"';
    seen = { head, again: describeS3Request(req), req };
    res.end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

async function headOf(lines: string[]): Promise<S3RequestHead> {
  seen = undefined;
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.write(
        ['PUT /s3/b/k HTTP/1.1', 'Host: x', 'Connection: close', ...lines, '', ''].join('\r\n'),
      );
    });
    socket.on('data', () => undefined);
    socket.on('end', () => resolve());
    socket.on('error', reject);
  });
  return lastSeen().head;
}

function lastSeen(): NonNullable<typeof seen> {
  if (!seen) throw new Error('the server saw no request');
  return seen;
}

describe('describeS3Request', () => {
  it('reads the door’s headers once and keeps the description on the request', async () => {
    const head = await headOf([
      'If-Match: "abc"',
      'If-None-Match: *',
      'Range: bytes=0-9',
      'x-amz-copy-source: /b/k',
      'x-amz-server-side-encryption: AES256',
    ]);
    expect(head).toMatchObject({
      ifMatch: '"abc"',
      ifNoneMatch: '*',
      range: 'bytes=0-9',
      copySource: '/b/k',
      sse: 'AES256',
      declaredLength: undefined,
    });
    expect(lastSeen().again).toBe(head);
  });

  it('keeps every header line untouched for SigV4 and the body plan', async () => {
    const head = await headOf(['X-Amz-Meta-A: one', 'x-amz-meta-a:  two']);
    expect(head.lines['x-amz-meta-a']).toEqual(['one', 'two']);
    expect(head.lines['host']).toEqual(['x']);
  });

  it('reads repeated conditions as Node joins them', async () => {
    expect((await headOf(['If-Match: "a"', 'If-Match: "b"'])).ifMatch).toBe('"a", "b"');
  });

  it.each([
    [['x-amz-decoded-content-length: 10', 'Content-Length: 0'], 10],
    [['Content-Length: 0'], 0],
    [['x-amz-decoded-content-length: 1e3', 'Content-Length: 0'], undefined],
    [['x-amz-decoded-content-length: -1', 'Content-Length: 0'], undefined],
    [[], undefined],
  ])('declares the decoded length from %j as %p', async (lines, expected) => {
    expect((await headOf(lines)).declaredLength).toBe(expected);
  });
});
