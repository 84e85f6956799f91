import type { Readable } from 'node:stream';
import type { BlobDriverName } from '../config/config';

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

const KEY_ALPHABET = /^[A-Za-z0-9/_.-]+$/;

/**
 * Throws unless `key` is a blob key every driver can store: characters from `[A-Za-z0-9/_.-]`,
 * no leading slash, no empty, `.` or `..` segments. Shared by all drivers so a key that works
 * on one driver works on every other.
 */
export function assertBlobKey(key: string): void {
  if (typeof key !== 'string' || !KEY_ALPHABET.test(key)) {
    throw new TypeError(
      `invalid blob key ${JSON.stringify(key)}: allowed characters are [A-Za-z0-9/_.-]`,
    );
  }
  for (const segment of key.split('/')) {
    if (segment === '' || segment === '.' || segment === '..') {
      throw new TypeError(
        `invalid blob key ${JSON.stringify(key)}: no leading slash, empty, "." or ".." segments`,
      );
    }
  }
}

/** Throws unless `range` is a well-formed inclusive range (`0 <= start <= end`, integers). */
export function assertByteRange(range: ByteRange): void {
  const { start, end } = range;
  if (!Number.isSafeInteger(start) || !Number.isSafeInteger(end) || start < 0 || end < start) {
    throw new RangeError(`invalid byte range ${start}-${end}`);
  }
}

/**
 * Clamps an inclusive range to a blob of `size` bytes the way S3 does: an `end` past the last
 * byte is cut to the last byte; a `start` at or past the end of the blob is unsatisfiable.
 */
export function clampByteRange(key: string, range: ByteRange, size: number): ByteRange {
  assertByteRange(range);
  if (range.start >= size) {
    throw new RangeError(
      `byte range ${range.start}-${range.end} is not satisfiable for blob ${key} of ${size} bytes`,
    );
  }
  return { start: range.start, end: Math.min(range.end, size - 1) };
}

/** `Buffer` view of a chunk read from a byte stream (string chunks come from `setEncoding`). */
export function chunkToBuffer(chunk: unknown): Buffer {
  if (Buffer.isBuffer(chunk)) return chunk;
  if (chunk instanceof Uint8Array)
    return Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  if (typeof chunk === 'string') return Buffer.from(chunk, 'utf8');
  throw new TypeError(`blob body yielded a ${typeof chunk}, expected bytes`);
}

/** Injection token for the configured BlobStore. */
export const BLOB_STORE = Symbol('BLOB_STORE');
