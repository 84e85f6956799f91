import type { Readable } from 'node:stream';

/** Names of the blob drivers, in the order they are documented. */
export const BLOB_DRIVERS = ['fs', 's3', 'postgres', 'memory'] as const;
export type BlobDriverName = (typeof BLOB_DRIVERS)[number];

/** An inclusive byte range, as HTTP `Range: bytes=start-end` means it. */
export interface ByteRange {
  start: number;
  end: number;
}

export interface PutResult {
  /** Bytes written. */
  size: number;
}

/**
 * Where state bodies live. Every driver keeps these promises:
 *
 * - `put` streams: the body is never held in memory whole. The blob becomes visible under
 *   `key` only once every byte is durable (temp file + fsync + rename, a completed object
 *   upload, or chunk rows under a key nothing refers to yet). When the source stream
 *   errors, nothing is left under `key` and the source's error is what `put` rejects with.
 * - `get` resolves only once the blob is known to exist and can be read, so a caller can
 *   still answer with an error status; a missing blob rejects with `BlobNotFoundError`.
 * - keys are opaque strings of `[A-Za-z0-9/_.-]`, chosen by the caller, never reused.
 */
export interface BlobStore {
  readonly driver: BlobDriverName;
  put(key: string, body: Readable): Promise<PutResult>;
  get(key: string, range?: ByteRange): Promise<Readable>;
  /** Size in bytes, or `undefined` when there is no such blob. */
  stat(key: string): Promise<number | undefined>;
  /** Removes the blob; removing a missing blob is not an error. */
  delete(key: string): Promise<void>;
  /** Throws when the store cannot be reached (readiness probe). */
  ping(): Promise<void>;
  /** Releases connections and timers. */
  close(): Promise<void>;
}

export class BlobNotFoundError extends Error {
  constructor(readonly key: string) {
    super(`blob ${key} does not exist`);
    this.name = 'BlobNotFoundError';
  }
}

/** Injection token for the configured BlobStore. */
export const BLOB_STORE = Symbol('BLOB_STORE');
