import { Readable } from 'node:stream';
import type { DataSource } from 'typeorm';
import { sqlRows } from '../database/sql';
import {
  assertBlobKey,
  BlobNotFoundError,
  BlobStore,
  ByteRange,
  chunkToBuffer,
  clampByteRange,
  PutResult,
} from './blob-store';

/** Every chunk but the last holds exactly this many bytes, so a range maps to chunk numbers. */
export const PG_CHUNK_BYTES = 1024 * 1024;

/**
 * Blobs as ordered `bytea` chunk rows (`pg` cannot stream a single `bytea` value). A put inserts
 * chunks as they arrive, outside any transaction, under a key nothing refers to yet; the blob is
 * complete when `put` resolves, and only then does a version row point at it. A failed put
 * deletes what it inserted. Reads fetch one chunk at a time, so memory stays at one chunk.
 */
export class PostgresBlobStore implements BlobStore {
  readonly driver = 'postgres' as const;

  constructor(private readonly db: DataSource) {}

  async put(key: string, body: Readable): Promise<PutResult> {
    assertBlobKey(key);
    let seq = 0;
    let size = 0;
    let pending: Buffer[] = [];
    let pendingBytes = 0;
    const flush = async (final: boolean): Promise<void> => {
      while (pendingBytes >= PG_CHUNK_BYTES || (final && (pendingBytes > 0 || seq === 0))) {
        const all = Buffer.concat(pending, pendingBytes);
        const chunk = all.subarray(0, PG_CHUNK_BYTES);
        const rest = all.subarray(chunk.length);
        await this.db.query('INSERT INTO blob_chunks (blob_key, seq, data) VALUES ($1, $2, $3)', [
          key,
          seq++,
          chunk,
        ]);
        pending = rest.length > 0 ? [Buffer.from(rest)] : [];
        pendingBytes = rest.length;
      }
    };
    try {
      for await (const piece of body) {
        const buf = chunkToBuffer(piece);
        size += buf.length;
        pending.push(buf);
        pendingBytes += buf.length;
        if (pendingBytes >= PG_CHUNK_BYTES) await flush(false);
      }
      await flush(true);
      return { size };
    } catch (e) {
      await this.delete(key).catch(() => undefined);
      throw e;
    }
  }

  async get(key: string, range?: ByteRange): Promise<Readable> {
    const size = await this.stat(key);
    if (size === undefined) throw new BlobNotFoundError(key);
    const bounds = range ? clampByteRange(key, range, size) : { start: 0, end: size - 1 };
    const { start, end } = bounds;
    let seq = Math.floor(start / PG_CHUNK_BYTES);
    const lastSeq = end < start ? seq - 1 : Math.floor(end / PG_CHUNK_BYTES);
    const db = this.db;
    return new Readable({
      read() {
        void readNext(this);
      },
    });
    async function readNext(stream: Readable): Promise<void> {
      try {
        if (seq > lastSeq) {
          stream.push(null);
          return;
        }
        const rows = await sqlRows<{ data: Buffer }>(
          db.manager,
          'SELECT data FROM blob_chunks WHERE blob_key = $1 AND seq = $2',
          [key, seq],
        );
        if (rows.length === 0) throw new BlobNotFoundError(key);
        const base = seq * PG_CHUNK_BYTES;
        const from = Math.max(start - base, 0);
        const to = Math.min(end - base + 1, rows[0].data.length);
        seq++;
        stream.push(rows[0].data.subarray(from, to));
      } catch (e) {
        stream.destroy(e as Error);
      }
    }
  }

  async stat(key: string): Promise<number | undefined> {
    assertBlobKey(key);
    const rows = await sqlRows<{ n: number; size: string }>(
      this.db.manager,
      'SELECT count(*)::int AS n, coalesce(sum(octet_length(data)), 0)::bigint AS size FROM blob_chunks WHERE blob_key = $1',
      [key],
    );
    return rows[0].n === 0 ? undefined : Number(rows[0].size);
  }

  async delete(key: string): Promise<void> {
    assertBlobKey(key);
    await this.db.query('DELETE FROM blob_chunks WHERE blob_key = $1', [key]);
  }

  async ping(): Promise<void> {
    await this.db.query('SELECT 1 FROM blob_chunks LIMIT 1');
  }

  async close(): Promise<void> {
    // The data source belongs to the database module.
  }
}
