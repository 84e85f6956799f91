import { Readable, Transform, TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream';
import { BytesReadable } from '../common/streams';
import { clampByteRange } from './blob-store';
import type { ByteRange, BlobStore, PutResult } from './blob-store';

/**
 * Keeps the bytes of recently read blobs in memory, at most `maxBytes` together, each at most
 * an eighth of that. A key is never reused and a blob never changes (see `BlobStore`), so what
 * is kept needs no invalidation: a version's bytes are the same for as long as it exists, and a
 * deleted blob's key is never asked for again (it is also dropped here). Reads of a byte range
 * are served from a kept blob (clamped as every driver clamps them), but never fill the cache;
 * a blob is kept only once it was read to its end.
 */
export class CachedBlobStore implements BlobStore {
  /** Least recently used first (a Map keeps insertion order). */
  private readonly kept = new Map<string, Buffer>();
  private bytes = 0;
  private readonly maxItemBytes: number;

  constructor(
    readonly inner: BlobStore,
    private readonly maxBytes: number,
  ) {
    this.maxItemBytes = Math.floor(maxBytes / 8);
  }

  get driver() {
    return this.inner.driver;
  }

  put(key: string, body: Readable): Promise<PutResult> {
    return this.inner.put(key, body);
  }

  async get(key: string, range?: ByteRange): Promise<Readable> {
    const held = this.kept.get(key);
    if (held) {
      this.kept.delete(key);
      this.kept.set(key, held);
      if (!range) return new BytesReadable(held);
      const { start, end } = clampByteRange(key, range, held.length);
      return new BytesReadable(held.subarray(start, end + 1));
    }
    const body = await this.inner.get(key, range);
    if (range || this.maxItemBytes === 0) return body;
    const collector = new Collector(this.maxItemBytes, (bytes) => this.keep(key, bytes));
    return pipeline(body, collector, () => undefined);
  }

  stat(key: string): Promise<number | undefined> {
    const held = this.kept.get(key);
    return held ? Promise.resolve(held.length) : this.inner.stat(key);
  }

  async delete(key: string): Promise<void> {
    this.forget(key);
    await this.inner.delete(key);
  }

  ping(): Promise<void> {
    return this.inner.ping();
  }

  async close(): Promise<void> {
    this.kept.clear();
    this.bytes = 0;
    await this.inner.close();
  }

  /** Bytes held now (for tests). */
  get heldBytes(): number {
    return this.bytes;
  }

  private keep(key: string, bytes: Buffer): void {
    this.forget(key);
    for (const [oldest, b] of this.kept) {
      if (this.bytes + bytes.length <= this.maxBytes) break;
      this.kept.delete(oldest);
      this.bytes -= b.length;
    }
    this.kept.set(key, bytes);
    this.bytes += bytes.length;
  }

  private forget(key: string): void {
    const held = this.kept.get(key);
    if (held) {
      this.kept.delete(key);
      this.bytes -= held.length;
    }
  }
}

/** Passes every chunk on, and hands over the whole once it ended within `limit` bytes. */
class Collector extends Transform {
  private chunks: Buffer[] | undefined = [];
  private size = 0;

  constructor(
    private readonly limit: number,
    private readonly complete: (bytes: Buffer) => void,
  ) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    if (this.chunks) {
      this.size += chunk.length;
      if (this.size > this.limit) this.chunks = undefined;
      else this.chunks.push(chunk);
    }
    done(null, chunk);
  }

  override _flush(done: TransformCallback): void {
    if (this.chunks) this.complete(Buffer.concat(this.chunks, this.size));
    done();
  }
}
