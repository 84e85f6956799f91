import { Readable } from 'node:stream';

import {
  assertBlobKey,
  assertByteRange,
  chunkToBuffer,
  clampByteRange,
  BlobNotFoundError,
} from './blob-store';
import type { BlobStore, ByteRange, PutResult } from './blob-store';

/**
 * Blobs in a Map of Buffers, for tests and throwaway instances. Unlike the other drivers it
 * does hold each body in memory whole; a put only stores once the source ended successfully.
 */
export class MemoryBlobStore implements BlobStore {
  readonly driver = 'memory' as const;
  private readonly blobs = new Map<string, Buffer>();

  /** Keys held (tests check that nothing is left behind). */
  keys(): string[] {
    return [...this.blobs.keys()];
  }

  async put(key: string, body: Readable): Promise<PutResult> {
    const chunks: Buffer[] = [];
    let size = 0;
    try {
      assertBlobKey(key);
      for await (const chunk of body) {
        // Copy: a source may reuse its buffers after handing them out.
        const data = Buffer.from(chunkToBuffer(chunk));
        chunks.push(data);
        size += data.length;
      }
    } catch (err) {
      if (!body.destroyed) body.destroy();
      throw err;
    }
    this.blobs.set(key, Buffer.concat(chunks, size));
    return { size };
  }

  get(key: string, range?: ByteRange): Promise<Readable> {
    return attempt(() => {
      assertBlobKey(key);
      if (range) assertByteRange(range);
      const blob = this.blobs.get(key);
      if (!blob) throw new BlobNotFoundError(key);
      const bounds = range ? clampByteRange(key, range, blob.length) : undefined;
      const bytes = bounds ? blob.subarray(bounds.start, bounds.end + 1) : blob;
      // One chunk in an array: Readable.from(buffer) would iterate it byte by byte.
      return Readable.from(bytes.length > 0 ? [bytes] : [], { objectMode: false });
    });
  }

  stat(key: string): Promise<number | undefined> {
    return attempt(() => {
      assertBlobKey(key);
      return this.blobs.get(key)?.length;
    });
  }

  delete(key: string): Promise<void> {
    return attempt(() => {
      assertBlobKey(key);
      this.blobs.delete(key);
    });
  }

  ping(): Promise<void> {
    return Promise.resolve();
  }

  /** Nothing to release; the blobs stay readable so tests can inspect them afterwards. */
  close(): Promise<void> {
    return Promise.resolve();
  }
}

/** Runs `fn` (on the next microtask), turning a throw into a rejected promise. */
function attempt<T>(fn: () => T): Promise<T> {
  return Promise.resolve().then(fn);
}
