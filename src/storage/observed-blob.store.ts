import type { Readable } from 'node:stream';
import type { BlobDriverName } from '../config/config';
import { BlobNotFoundError, BlobStore, ByteRange, PutResult } from './blob-store';

/** The blob store operations whose failures are reported. */
export const BLOB_STORE_OPERATIONS = ['put', 'get', 'stat', 'delete', 'ping'] as const;
export type BlobStoreOperation = (typeof BLOB_STORE_OPERATIONS)[number];

/**
 * The configured blob store, telling `onFailure` of each operation that failed in the store
 * (the metrics count them). Two outcomes are answers, not store failures, and are not reported:
 * a blob that does not exist (`BlobNotFoundError`: a read racing a prune looks again), and a
 * `put` failed by its own source (the client went away, or the state was refused while it
 * streamed) — every driver reads the source to its end or destroys it without an error, so a
 * source with an error of its own (`errored`) is what failed.
 */
export class ObservedBlobStore implements BlobStore {
  constructor(
    readonly inner: BlobStore,
    private readonly onFailure: (operation: BlobStoreOperation) => void,
  ) {}

  get driver(): BlobDriverName {
    return this.inner.driver;
  }

  async put(key: string, body: Readable): Promise<PutResult> {
    try {
      return await this.inner.put(key, body);
    } catch (e) {
      if (!body.errored) this.onFailure('put');
      throw e;
    }
  }

  get(key: string, range?: ByteRange): Promise<Readable> {
    return this.observed('get', () => this.inner.get(key, range));
  }

  stat(key: string): Promise<number | undefined> {
    return this.observed('stat', () => this.inner.stat(key));
  }

  delete(key: string): Promise<void> {
    return this.observed('delete', () => this.inner.delete(key));
  }

  ping(): Promise<void> {
    return this.observed('ping', () => this.inner.ping());
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  private async observed<T>(operation: BlobStoreOperation, work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (e) {
      if (!(e instanceof BlobNotFoundError)) this.onFailure(operation);
      throw e;
    }
  }
}
