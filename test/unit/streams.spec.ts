import { PassThrough, Readable, Transform, TransformCallback } from 'node:stream';
import { BytesReadable, feed, sendWhole } from '../../src/common/streams';

/** A pass-through that fails at its end, as a body checksum does on a mismatch. */
class FailsAtEnd extends Transform {
  override _transform(chunk: Buffer, _e: BufferEncoding, cb: TransformCallback): void {
    cb(null, chunk);
  }
  override _flush(cb: TransformCallback): void {
    cb(new Error('digest mismatch'));
  }
}

async function drain(s: Readable): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of s) parts.push(c as Buffer);
  return Buffer.concat(parts);
}

const settle = () => new Promise((r) => setImmediate(r));

describe('feed (piping a request body into a transform)', () => {
  it('passes the bytes through', async () => {
    const src = new PassThrough();
    const out = feed(src, new PassThrough());
    src.end('hello');
    expect((await drain(out)).toString()).toBe('hello');
  });

  it('a source that already failed before feed was called fails the transform (no hang)', async () => {
    const req = new PassThrough();
    const check = feed(req, new FailsAtEnd());
    req.end(Buffer.from('small body'));
    await settle();
    await settle();
    expect(check.errored).toBeTruthy();
    // Later, once the caller has finished authorising, it feeds the checked body onwards.
    const out = feed(check, new PassThrough());
    // ... and starts reading it later still (a blob store opens its file first).
    await settle();
    await settle();
    await expect(drain(out)).rejects.toThrow('digest mismatch');
  });

  it('a source that failed while feeding fails the transform', async () => {
    const req = new PassThrough();
    const check = feed(req, new FailsAtEnd());
    const out = feed(check, new PassThrough());
    const result = drain(out);
    req.end(Buffer.from('body'));
    await expect(result).rejects.toThrow('digest mismatch');
  });

  it('a source destroyed before it was read fails the transform', async () => {
    const src = new PassThrough();
    src.destroy();
    await settle();
    const out = feed(src, new PassThrough());
    await settle();
    await expect(drain(out)).rejects.toThrow(/closed before it was read/);
  });

  it('a failing transform does not destroy the source: the rest of the body is drained', async () => {
    const src = new PassThrough();
    const failing = new Transform({
      transform(_c, _e, cb) {
        cb(new Error('too large'));
      },
    });
    const out = feed(src, failing);
    const result = drain(out);
    src.write(Buffer.alloc(10));
    await expect(result).rejects.toThrow('too large');
    src.end(Buffer.alloc(1_000_000));
    // Read to its end (a destroyed request would never emit 'end'), without an error.
    await new Promise((r) => src.once('end', r));
    expect(src.errored).toBeNull();
  });
});

describe('BytesReadable and sendWhole: a body already in memory', () => {
  const sink = () => {
    const ended: Buffer[] = [];
    return { ended, end: (b: Buffer) => ended.push(b) };
  };

  it('reads as a stream of its bytes (one chunk), and as an empty stream when empty', async () => {
    const b = Buffer.from('{"version":4}');
    expect(await drain(new BytesReadable(b))).toEqual(b);
    expect((await drain(new BytesReadable(Buffer.alloc(0)))).length).toBe(0);
  });

  it('is written whole by sendWhole, which leaves any other stream to the caller', () => {
    const b = Buffer.from('state bytes');
    const res = sink();
    expect(sendWhole(res, new BytesReadable(b))).toBe(true);
    expect(res.ended).toEqual([b]);
    expect(sendWhole(res, Readable.from([b]))).toBe(false);
    expect(res.ended).toHaveLength(1);
  });

  it('is not sent whole once something read from it or destroyed it (the bytes would be sent twice or after an error)', async () => {
    const res = sink();
    const read = new BytesReadable(Buffer.from('abc'));
    await drain(read);
    expect(sendWhole(res, read)).toBe(false);
    const destroyed = new BytesReadable(Buffer.from('abc'));
    destroyed.destroy();
    expect(sendWhole(res, destroyed)).toBe(false);
    expect(res.ended).toHaveLength(0);
  });
});
