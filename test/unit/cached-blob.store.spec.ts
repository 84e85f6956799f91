import { Readable } from 'node:stream';
import { BytesReadable } from '../../src/common/streams';
import { BlobNotFoundError, BlobStore, ByteRange } from '../../src/storage/blob-store';
import { CachedBlobStore } from '../../src/storage/cached-blob.store';
import { MemoryBlobStore } from '../../src/storage/memory-blob.store';
import { describeBlobStoreContract } from '../support/blob-store.contract';

// Every promise of a blob store holds with the cache in front of one…
describeBlobStoreContract('memory, cached', () => {
  const inner = new MemoryBlobStore();
  const store = new CachedBlobStore(inner, 1024 * 1024);
  return Promise.resolve({ store, teardown: () => store.close() });
});

/** A store that counts the reads that reach it, and can be made to fail a read half-way. */
class CountingStore extends MemoryBlobStore {
  gets = 0;
  failNextAfter: number | undefined;

  override async get(key: string, range?: ByteRange): Promise<Readable> {
    this.gets++;
    const body = await super.get(key, range);
    const failAfter = this.failNextAfter;
    if (failAfter === undefined) return body;
    this.failNextAfter = undefined;
    const bytes = await readAll(body);
    return new Readable({
      read() {
        this.push(bytes.subarray(0, failAfter));
        this.destroy(new Error('the disk went away'));
      },
    });
  }
}

async function readAll(r: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of r) chunks.push(Buffer.from(c as Buffer));
  return Buffer.concat(chunks);
}

const bytesOf = (n: number, fill: number) => Buffer.alloc(n, fill);

// …and what it adds: blobs read to their end are served from memory afterwards, within bounds.
describe('CachedBlobStore', () => {
  let inner: CountingStore;
  let store: CachedBlobStore;
  const put = (s: BlobStore, key: string, b: Buffer) => s.put(key, Readable.from([b]));

  beforeEach(() => {
    inner = new CountingStore();
    store = new CachedBlobStore(inner, 8 * 1024); // items up to 1 KiB
  });

  it('serves a blob read to its end from memory the next time, byte for byte', async () => {
    const b = bytesOf(1000, 7);
    await put(store, 'a', b);
    expect(await readAll(await store.get('a'))).toEqual(b);
    expect(await readAll(await store.get('a'))).toEqual(b);
    expect(inner.gets).toBe(1);
    expect(await store.stat('a')).toBe(1000);
  });

  it('hands a kept blob over whole (a BytesReadable), so a sender writes it without piping', async () => {
    const b = bytesOf(1000, 3);
    await put(store, 'w', b);
    const first = await store.get('w');
    expect(first).not.toBeInstanceOf(BytesReadable); // read from the store, filling the cache
    await readAll(first);
    const held = await store.get('w');
    expect(held).toBeInstanceOf(BytesReadable);
    expect((held as BytesReadable).bytes).toEqual(b);
    const range = await store.get('w', { start: 10, end: 19 });
    expect((range as BytesReadable).bytes).toEqual(b.subarray(10, 20));
  });

  it('serves byte ranges from a kept blob, clamped as the drivers clamp them; never fills from a range', async () => {
    const b = Buffer.from('0123456789');
    await put(store, 'r', b);
    expect((await readAll(await store.get('r', { start: 2, end: 4 }))).toString()).toBe('234');
    expect(inner.gets).toBe(1); // a range read is not kept
    await readAll(await store.get('r'));
    expect((await readAll(await store.get('r', { start: 8, end: 100 }))).toString()).toBe('89');
    await expect(store.get('r', { start: 10, end: 12 })).rejects.toThrow(RangeError);
    await expect(store.get('r', { start: 5, end: 2 })).rejects.toThrow(RangeError);
    expect(inner.gets).toBe(2);
  });

  it('does not keep a blob larger than an eighth of its memory', async () => {
    const big = bytesOf(1025, 1);
    await put(store, 'big', big);
    expect(await readAll(await store.get('big'))).toEqual(big);
    expect(await readAll(await store.get('big'))).toEqual(big);
    expect(inner.gets).toBe(2);
    expect(store.heldBytes).toBe(0);
  });

  it('keeps at most its memory, dropping the least recently read', async () => {
    for (let i = 0; i < 10; i++) {
      await put(store, `k${i}`, bytesOf(1000, i));
      await readAll(await store.get(`k${i}`));
    }
    expect(store.heldBytes).toBeLessThanOrEqual(8 * 1024);
    const before = inner.gets;
    await readAll(await store.get('k9')); // recent: kept
    expect(inner.gets).toBe(before);
    await readAll(await store.get('k0')); // oldest: gone
    expect(inner.gets).toBe(before + 1);
  });

  it('keeps nothing of a read that failed or was abandoned half-way', async () => {
    const b = bytesOf(1000, 3);
    await put(store, 'f', b);
    inner.failNextAfter = 100;
    await expect(readAll(await store.get('f'))).rejects.toThrow('the disk went away');
    expect(store.heldBytes).toBe(0);
    const abandoned = await store.get('f');
    abandoned.destroy();
    await new Promise((r) => setImmediate(r));
    expect(store.heldBytes).toBe(0);
    expect(await readAll(await store.get('f'))).toEqual(b);
    expect(store.heldBytes).toBe(1000);
  });

  it('forgets a deleted blob: a later read is the store’s not-found', async () => {
    await put(store, 'd', bytesOf(10, 1));
    await readAll(await store.get('d'));
    await store.delete('d');
    expect(store.heldBytes).toBe(0);
    await expect(store.get('d')).rejects.toBeInstanceOf(BlobNotFoundError);
    expect(await store.stat('d')).toBeUndefined();
  });
});
