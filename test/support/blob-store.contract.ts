import { createHash, randomUUID } from 'node:crypto';
import { PassThrough, Readable } from 'node:stream';
import { setImmediate as nextTurn } from 'node:timers/promises';

import { BlobNotFoundError } from '../../src/storage/blob-store';
import type { BlobStore } from '../../src/storage/blob-store';

export const MiB = 1024 * 1024;
const CHUNK = 256 * 1024;
const LARGE = 20 * MiB;
const LARGE_TIMEOUT = 120_000;

/**
 * Deterministic pseudo-random bytes: chunk `index` of the body for `seed`. Bodies are made
 * of these chunks so a test can stream 20 MiB, and later recompute any slice or the digest,
 * without keeping the body around.
 */
function patternChunk(seed: number, index: number, length: number): Buffer {
  const buf = Buffer.allocUnsafe(length);
  let x = Math.imul(seed + 1, 0x9e3779b1) ^ Math.imul(index + 1, 0x85ebca6b) || 1;
  let i = 0;
  for (; i + 4 <= length; i += 4) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    buf.writeInt32LE(x | 0, i);
  }
  for (; i < length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    buf[i] = x & 0xff;
  }
  return buf;
}

function* patternChunks(seed: number, size: number): Generator<Buffer> {
  for (let offset = 0, index = 0; offset < size; offset += CHUNK, index++) {
    yield patternChunk(seed, index, Math.min(CHUNK, size - offset));
  }
}

export interface PatternBodyOptions {
  /** Throw `error` once this many bytes have been produced. */
  failAfter?: number;
  error?: Error;
  /** Yield to the event loop between chunks (lets concurrent puts interleave). */
  yieldBetweenChunks?: boolean;
  /** Awaited once `pauseAfter` bytes have been produced. */
  pauseAfter?: number;
  pause?: () => Promise<void>;
}

/** A byte stream (not object mode, like an HTTP request body) of the pattern for `seed`. */
export function patternBody(
  seed: number,
  size: number,
  options: PatternBodyOptions = {},
): Readable {
  async function* generate(): AsyncGenerator<Buffer> {
    let produced = 0;
    let paused = false;
    for (const chunk of patternChunks(seed, size)) {
      if (options.failAfter !== undefined && produced >= options.failAfter) {
        throw options.error ?? new Error('source failed');
      }
      if (!paused && options.pauseAfter !== undefined && produced >= options.pauseAfter) {
        paused = true;
        await options.pause?.();
      }
      if (options.yieldBetweenChunks) await nextTurn();
      produced += chunk.length;
      yield chunk;
    }
    if (options.failAfter !== undefined) throw options.error ?? new Error('source failed');
  }
  return Readable.from(generate(), { objectMode: false });
}

export function patternDigest(seed: number, size: number): string {
  const hash = createHash('sha256');
  for (const chunk of patternChunks(seed, size)) hash.update(chunk);
  return hash.digest('hex');
}

/** Bytes `start..end` (inclusive) of the pattern body for `seed`. */
export function patternSlice(seed: number, start: number, end: number): Buffer {
  const parts: Buffer[] = [];
  for (let index = Math.floor(start / CHUNK); index * CHUNK <= end; index++) {
    const chunk = patternChunk(seed, index, CHUNK);
    const from = Math.max(start - index * CHUNK, 0);
    const to = Math.min(end - index * CHUNK, CHUNK - 1);
    parts.push(chunk.subarray(from, to + 1));
  }
  return Buffer.concat(parts);
}

export async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.from(chunk as Uint8Array));
  return Buffer.concat(chunks);
}

export async function digestOf(stream: Readable): Promise<{ sha256: string; size: number }> {
  const hash = createHash('sha256');
  let size = 0;
  for await (const chunk of stream) {
    const data = chunk as Buffer;
    hash.update(data);
    size += data.length;
  }
  return { sha256: hash.digest('hex'), size };
}

function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

/** A key nothing else uses, so tests can share one store. */
export function uniqueKey(label: string): string {
  return `contract/${randomUUID()}/${label}`;
}

/** Asserts that `key` holds nothing: stat says so and get rejects with BlobNotFoundError. */
export async function expectNoBlob(store: BlobStore, key: string): Promise<void> {
  expect(await store.stat(key)).toBeUndefined();
  const err: unknown = await store.get(key).then(
    (stream) => {
      stream.destroy();
      return undefined;
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(BlobNotFoundError);
  expect((err as BlobNotFoundError).key).toBe(key);
}

/**
 * The promises every BlobStore driver keeps (see src/storage/blob-store.ts). `setup` runs
 * once for the suite; every test uses its own keys.
 */
/** Every operation of `store` refuses `key` as an invalid blob key. */
export async function expectKeyRefused(store: BlobStore, key: string): Promise<void> {
  await expect(store.put(key, Readable.from([Buffer.from('x')]))).rejects.toThrow(
    /invalid blob key/,
  );
  await expect(store.get(key)).rejects.toThrow(/invalid blob key/);
  await expect(store.stat(key)).rejects.toThrow(/invalid blob key/);
  await expect(store.delete(key)).rejects.toThrow(/invalid blob key/);
}

export function describeBlobStoreContract(
  name: string,
  setup: () => Promise<{ store: BlobStore; teardown: () => Promise<void> }>,
): void {
  describe(`BlobStore contract: ${name}`, () => {
    let store: BlobStore;
    let teardown: (() => Promise<void>) | undefined;

    beforeAll(async () => {
      ({ store, teardown } = await setup());
    });

    afterAll(async () => {
      await teardown?.();
    });

    it('ping succeeds', async () => {
      await expect(store.ping()).resolves.toBeUndefined();
    });

    it('round-trips an empty body', async () => {
      const key = uniqueKey('empty');
      await expect(store.put(key, Readable.from([], { objectMode: false }))).resolves.toEqual({
        size: 0,
      });
      expect(await store.stat(key)).toBe(0);
      expect((await readAll(await store.get(key))).length).toBe(0);
    });

    it('round-trips a small body', async () => {
      const key = uniqueKey('small');
      const body = Buffer.from('{"version":4,"terraform_version":"1.9.0","serial":1}\n');
      await expect(store.put(key, Readable.from([body]))).resolves.toEqual({ size: body.length });
      expect(await store.stat(key)).toBe(body.length);
      expect(sha256(await readAll(await store.get(key)))).toBe(sha256(body));
    });

    it('accepts keys using the whole alphabet and nested segments', async () => {
      const key = `${uniqueKey('nested')}/A-z_0.9/deeper/state.tfstate`;
      const body = Buffer.from('nested');
      await store.put(key, Readable.from([body]));
      expect((await readAll(await store.get(key))).toString()).toBe('nested');
      await store.delete(key);
      await expectNoBlob(store, key);
    });

    describe('a 20 MiB body', () => {
      const seed = 20;
      const key = uniqueKey('large');
      let putResult: unknown;

      beforeAll(async () => {
        putResult = await store.put(key, patternBody(seed, LARGE));
      }, LARGE_TIMEOUT);

      it(
        'round-trips (sha256) with the right size',
        async () => {
          expect(putResult).toEqual({ size: LARGE });
          expect(await store.stat(key)).toBe(LARGE);
          expect(await digestOf(await store.get(key))).toEqual({
            sha256: patternDigest(seed, LARGE),
            size: LARGE,
          });
        },
        LARGE_TIMEOUT,
      );

      it.each([
        ['first byte', 0, 0],
        ['middle, across an 8 MiB boundary', 8 * MiB - 10, 8 * MiB + 9],
        ['last byte', LARGE - 1, LARGE - 1],
      ])('serves a ranged read: %s', async (_label, start, end) => {
        const got = await readAll(await store.get(key, { start, end }));
        expect(got.equals(patternSlice(seed, start, end))).toBe(true);
      });

      it(
        'serves a ranged read of the whole body',
        async () => {
          const got = await digestOf(await store.get(key, { start: 0, end: LARGE - 1 }));
          expect(got).toEqual({ sha256: patternDigest(seed, LARGE), size: LARGE });
        },
        LARGE_TIMEOUT,
      );
    });

    describe('ranged reads of a small body', () => {
      const seed = 7;
      const size = 1000;
      const key = uniqueKey('ranged');

      beforeAll(async () => {
        await store.put(key, patternBody(seed, size));
      });

      it.each([
        ['first byte', 0, 0],
        ['middle', 100, 199],
        ['last byte', size - 1, size - 1],
        ['whole', 0, size - 1],
      ])('%s', async (_label, start, end) => {
        const got = await readAll(await store.get(key, { start, end }));
        expect(got.equals(patternSlice(seed, start, end))).toBe(true);
      });

      it('cuts an end past the last byte to the last byte (as HTTP and S3 do)', async () => {
        const got = await readAll(await store.get(key, { start: size - 2, end: size + 100 }));
        expect(got.equals(patternSlice(seed, size - 2, size - 1))).toBe(true);
      });

      it('rejects a range starting past the end with a RangeError', async () => {
        await expect(store.get(key, { start: size, end: size + 10 })).rejects.toBeInstanceOf(
          RangeError,
        );
      });

      it('rejects a malformed range with a RangeError', async () => {
        await expect(store.get(key, { start: 10, end: 5 })).rejects.toBeInstanceOf(RangeError);
        await expect(store.get(key, { start: -1, end: 5 })).rejects.toBeInstanceOf(RangeError);
      });
    });

    it('reports a missing key: get rejects with BlobNotFoundError, stat gives undefined', async () => {
      await expectNoBlob(store, uniqueKey('missing'));
    });

    it('reports a missing key in a ranged get as BlobNotFoundError', async () => {
      const key = uniqueKey('missing-ranged');
      await expect(store.get(key, { start: 0, end: 0 })).rejects.toBeInstanceOf(BlobNotFoundError);
    });

    it('delete is idempotent', async () => {
      const key = uniqueKey('delete');
      await expect(store.delete(uniqueKey('never-existed'))).resolves.toBeUndefined();
      await store.put(key, Readable.from([Buffer.from('bye')]));
      expect(await store.stat(key)).toBe(3);
      await store.delete(key);
      await expectNoBlob(store, key);
      await expect(store.delete(key)).resolves.toBeUndefined();
    });

    it('deleting one key leaves its siblings alone', async () => {
      const dir = uniqueKey('siblings');
      await store.put(`${dir}/a`, Readable.from([Buffer.from('a')]));
      await store.put(`${dir}/b`, Readable.from([Buffer.from('bb')]));
      await store.delete(`${dir}/a`);
      await expectNoBlob(store, `${dir}/a`);
      expect(await store.stat(`${dir}/b`)).toBe(2);
    });

    it.each([
      ['after 1 KiB', 1024],
      ['after 12 MiB (past the first multipart part)', 12 * MiB],
      ['before the first byte', 0],
    ])(
      'a source that errors %s leaves nothing and put rejects with that error',
      async (_label, failAfter) => {
        const key = uniqueKey('failing');
        const error = new Error(`source failed after ${failAfter} bytes`);
        await expect(store.put(key, patternBody(3, LARGE, { failAfter, error }))).rejects.toBe(
          error,
        );
        await expectNoBlob(store, key);
      },
      LARGE_TIMEOUT,
    );

    it('a source destroyed from outside (like an aborted request) leaves nothing', async () => {
      const key = uniqueKey('destroyed');
      const error = new Error('client went away');
      const source = new PassThrough();
      source.write(patternSlice(4, 0, 100 * 1024 - 1));
      const put = store.put(key, source);
      setTimeout(() => source.destroy(error), 20);
      await expect(put).rejects.toBe(error);
      await expectNoBlob(store, key);
    });

    it('a source that ends at the end of its data is not mistaken for an error', async () => {
      const key = uniqueKey('passthrough');
      const source = new PassThrough();
      const put = store.put(key, source);
      source.write(Buffer.from('hello '));
      setTimeout(() => source.end(Buffer.from('world')), 10);
      await expect(put).resolves.toEqual({ size: 11 });
      expect((await readAll(await store.get(key))).toString()).toBe('hello world');
    });

    it(
      'two concurrent puts under different keys do not mix',
      async () => {
        const a = { key: uniqueKey('concurrent-a'), seed: 101, size: 9 * MiB + 1 };
        const b = { key: uniqueKey('concurrent-b'), seed: 202, size: 3 * MiB + 7 };
        const results = await Promise.all(
          [a, b].map(({ key, seed, size }) =>
            store.put(key, patternBody(seed, size, { yieldBetweenChunks: true })),
          ),
        );
        expect(results).toEqual([{ size: a.size }, { size: b.size }]);
        for (const { key, seed, size } of [a, b]) {
          expect(await store.stat(key)).toBe(size);
          expect(await digestOf(await store.get(key))).toEqual({
            sha256: patternDigest(seed, size),
            size,
          });
        }
      },
      LARGE_TIMEOUT,
    );

    it.each(['', '/abs', 'a//b', 'a/', '../x', 'a/../b', 'a/./b', 'a b', 'a\\b', 'é', 'a?b'])(
      'refuses the bad key %j',
      (key) => expectKeyRefused(store, key),
    );
  });
}
