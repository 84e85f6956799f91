import { randomBytes } from 'node:crypto';
import { mkdir, open, readdir, rename, rmdir, stat, unlink, writeFile } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import * as path from 'node:path';
import type { Readable } from 'node:stream';

import {
  assertBlobKey,
  assertByteRange,
  BlobNotFoundError,
  chunkToBuffer,
  clampByteRange,
} from './blob-store';
import type { BlobStore, ByteRange, PutResult } from './blob-store';

const TMP_DIR = '.tmp';
const DIR_MODE = 0o700;
const FILE_MODE = 0o600;

function errorCode(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err ? String(err.code) : undefined;
}

async function fsyncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Bytes gathered from the body before one write of them all (a request body arrives in chunks
 * of 16–64 KiB): each write is a round trip to the thread pool, so a 1 MiB state is one write
 * rather than sixteen or more. Bounded, so a large body stays streamed.
 */
export const WRITE_BATCH_BYTES = 1024 * 1024;

async function writeAll(handle: FileHandle, chunks: Buffer[]): Promise<void> {
  let rest = chunks;
  while (rest.length > 0) {
    const { bytesWritten } = await handle.writev(rest);
    rest = afterWritten(rest, bytesWritten);
  }
}

/** What of `chunks` is left once their first `n` bytes were written (a short write). */
function afterWritten(chunks: Buffer[], n: number): Buffer[] {
  let i = 0;
  while (i < chunks.length && n >= chunks[i].length) n -= chunks[i++].length;
  if (i === chunks.length) return [];
  return [chunks[i].subarray(n), ...chunks.slice(i + 1)];
}

/**
 * Blobs as files under `root`, the key being the path relative to `root`. A put writes to
 * `root/.tmp/<random>`, fsyncs it, renames it into place and fsyncs the directory, so a blob
 * is either absent or complete, also across a crash. Keys whose first segment is `.tmp` are
 * refused (that is where partial uploads live). As with any file tree, a key cannot also be
 * the directory of another key (`a` and `a/b` cannot both exist).
 */
export class FsBlobStore implements BlobStore {
  readonly driver = 'fs' as const;
  private readonly root: string;
  private readonly tmpDir: string;
  private ready: Promise<void> | undefined;

  constructor(root: string) {
    if (!root) throw new TypeError('FsBlobStore needs a root directory');
    this.root = path.resolve(root);
    this.tmpDir = path.join(this.root, TMP_DIR);
  }

  async put(key: string, body: Readable): Promise<PutResult> {
    const tmp = path.join(this.tmpDir, `${randomBytes(16).toString('hex')}.part`);
    let handle: FileHandle | undefined;
    let size = 0;
    try {
      const target = this.pathFor(key);
      await this.ensureRoot();
      handle = await open(tmp, 'wx', FILE_MODE);
      // for-await propagates the source's own error object and destroys the source when we
      // stop early (e.g. a failed write), so an HTTP request body is not left dangling.
      let batch: Buffer[] = [];
      let batched = 0;
      for await (const chunk of body) {
        const data = chunkToBuffer(chunk);
        if (data.length === 0) continue;
        batch.push(data);
        batched += data.length;
        size += data.length;
        if (batched >= WRITE_BATCH_BYTES || batch.length >= 512) {
          await writeAll(handle, batch);
          batch = [];
          batched = 0;
        }
      }
      await writeAll(handle, batch);
      await handle.sync();
      await handle.close();
      handle = undefined;
      await this.moveIntoPlace(tmp, target);
      return { size };
    } catch (err) {
      if (handle) await handle.close().catch(() => undefined);
      await unlink(tmp).catch(() => undefined);
      if (!body.destroyed) body.destroy();
      throw err;
    }
  }

  async get(key: string, range?: ByteRange): Promise<Readable> {
    const file = this.pathFor(key);
    if (range) assertByteRange(range);
    let handle: FileHandle;
    try {
      handle = await open(file, 'r');
    } catch (err) {
      if (isMissing(err)) throw new BlobNotFoundError(key);
      throw err;
    }
    try {
      const info = await handle.stat();
      if (!info.isFile()) throw new BlobNotFoundError(key);
      const bounds = range ? clampByteRange(key, range, info.size) : undefined;
      // autoClose (the default) closes the handle when the stream ends or is destroyed.
      return handle.createReadStream(bounds ?? {});
    } catch (err) {
      await handle.close().catch(() => undefined);
      throw err;
    }
  }

  async stat(key: string): Promise<number | undefined> {
    const file = this.pathFor(key);
    try {
      const info = await stat(file);
      return info.isFile() ? info.size : undefined;
    } catch (err) {
      if (isMissing(err)) return undefined;
      throw err;
    }
  }

  async delete(key: string): Promise<void> {
    const file = this.pathFor(key);
    try {
      await unlink(file);
    } catch (err) {
      if (isMissing(err)) return;
      throw err;
    }
    await this.pruneEmptyParents(path.dirname(file));
  }

  /**
   * Removes temp files older than `maxAgeMs`: uploads a crash interrupted. Only old ones, so an
   * upload in flight on another replica sharing the volume is left alone. Returns the count.
   */
  async removeStaleTemp(maxAgeMs: number): Promise<number> {
    let names: string[];
    try {
      names = await readdir(this.tmpDir);
    } catch {
      return 0;
    }
    let removed = 0;
    for (const name of names) {
      const p = path.join(this.tmpDir, name);
      try {
        if (Date.now() - (await stat(p)).mtimeMs > maxAgeMs) {
          await unlink(p);
          removed++;
        }
      } catch {
        // gone already
      }
    }
    return removed;
  }

  async ping(): Promise<void> {
    await this.ensureRoot();
    const probe = path.join(this.tmpDir, `ping-${randomBytes(8).toString('hex')}`);
    try {
      await writeFile(probe, 'ok', { mode: FILE_MODE, flag: 'wx' });
    } finally {
      await unlink(probe).catch(() => undefined);
    }
  }

  /** Nothing is held open between calls; streams returned by get close their own fds. */
  close(): Promise<void> {
    return Promise.resolve();
  }

  private pathFor(key: string): string {
    assertBlobKey(key);
    if (key === TMP_DIR || key.startsWith(`${TMP_DIR}/`)) {
      throw new TypeError(`invalid blob key ${JSON.stringify(key)}: ${TMP_DIR}/ is reserved`);
    }
    return path.join(this.root, ...key.split('/'));
  }

  private ensureRoot(): Promise<void> {
    this.ready ??= (async () => {
      await mkdir(this.root, { recursive: true, mode: DIR_MODE });
      await mkdir(this.tmpDir, { recursive: true, mode: DIR_MODE });
    })().catch((err: unknown) => {
      this.ready = undefined; // let a later call retry (e.g. once the volume is mounted)
      throw err;
    });
    return this.ready;
  }

  private async moveIntoPlace(tmp: string, target: string): Promise<void> {
    const dir = path.dirname(target);
    // A concurrent delete may prune the (momentarily empty) directory between mkdir and
    // rename; retry a few times when that happens.
    for (let attempt = 1; ; attempt++) {
      const firstCreated = await mkdir(dir, { recursive: true, mode: DIR_MODE });
      try {
        await rename(tmp, target);
      } catch (err) {
        if (errorCode(err) === 'ENOENT' && attempt < 5) continue;
        throw err;
      }
      // Make the new directory entries durable: the target's directory and, when mkdir had
      // to create directories, each of them in its parent.
      const dirs = [dir];
      if (firstCreated) {
        for (let d = dir; d !== path.dirname(firstCreated); d = path.dirname(d)) {
          dirs.push(path.dirname(d));
        }
      }
      for (const d of new Set(dirs)) await fsyncDirectory(d);
      return;
    }
  }

  private async pruneEmptyParents(dir: string): Promise<void> {
    for (let d = dir; d !== this.root && d.startsWith(this.root + path.sep); d = path.dirname(d)) {
      try {
        await rmdir(d);
      } catch {
        return; // not empty (ENOTEMPTY/EEXIST), already gone, or not ours to remove
      }
    }
  }
}

function isMissing(err: unknown): boolean {
  const code = errorCode(err);
  return code === 'ENOENT' || code === 'ENOTDIR';
}
