import { randomBytes, randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import type { Pool } from 'pg';
import { Readable } from 'node:stream';
import type { DataSource } from 'typeorm';
import { QueryFailedError } from 'typeorm';
import { parseBinaryCopy, pooledBinaryCopy } from '../../src/database/pooled-statement';
import { PG_CHUNK_BYTES, PostgresBlobStore } from '../../src/storage/postgres-blob.store';
import { describeBlobStoreContract, readAll } from '../support/blob-store.contract';
import { ON_POSTGRES, openTestDatabase, TestDatabase } from '../support/database';
import { sentStatementsOf, statementsOf } from '../support/statements';

// The postgres driver keeps blobs as ordered 1 MiB chunk rows in the real database.
describeBlobStoreContract('postgres', async () => {
  const db = await openTestDatabase();
  return { store: new PostgresBlobStore(db.dataSource), teardown: () => db.close() };
});

/** Bytes the data source's pooled connections have received so far (pg keeps its clients). */
function bytesReceived(ds: DataSource): number {
  const pool = (ds.driver as unknown as { master: Pool & { _clients: unknown[] } }).master;
  return pool._clients.reduce<number>(
    (sum, c) => sum + ((c as { connection: { stream: Socket } }).connection.stream.bytesRead ?? 0),
    0,
  );
}

describe('postgres blob store: the cost of a read', () => {
  let db: TestDatabase;
  let store: PostgresBlobStore;
  beforeAll(async () => {
    db = await openTestDatabase();
    store = new PostgresBlobStore(db.dataSource);
  });
  afterAll(() => db?.close());

  const stored = async (size: number): Promise<{ key: string; body: Buffer }> => {
    const body = randomBytes(size);
    const key = `t/${randomUUID()}`;
    await store.put(key, Readable.from([body]));
    return { key, body };
  };

  it('reads a whole blob with one statement per chunk (no separate size query)', async () => {
    const one = await stored(100 * 1024);
    const three = await stored(2 * PG_CHUNK_BYTES + 12345);
    let got: Buffer | undefined;
    expect(
      await statementsOf(async () => (got = await readAll(await store.get(one.key)))),
    ).toHaveLength(1);
    expect(got?.equals(one.body)).toBe(true);
    expect(
      await statementsOf(async () => (got = await readAll(await store.get(three.key)))),
    ).toHaveLength(3);
    expect(got?.equals(three.body)).toBe(true);
  });

  it('reads on the pool, without a TypeORM QueryRunner: chunks as binary COPY on PostgreSQL, the size as a named statement', async () => {
    const three = await stored(2 * PG_CHUNK_BYTES + 1);
    const runners = jest.spyOn(db.dataSource, 'createQueryRunner');
    try {
      let whole: Buffer | undefined;
      let ranged: Buffer | undefined;
      const sent = await sentStatementsOf(async () => {
        whole = await readAll(await store.get(three.key));
        ranged = await readAll(
          await store.get(three.key, { start: PG_CHUNK_BYTES - 3, end: PG_CHUNK_BYTES + 9 }),
        );
      });
      expect(runners).not.toHaveBeenCalled();
      expect(whole?.equals(three.body)).toBe(true);
      expect(ranged?.equals(three.body.subarray(PG_CHUNK_BYTES - 3, PG_CHUNK_BYTES + 10))).toBe(
        true,
      );
      // The first chunk and the count, two more chunks; a range: the size, its two chunks.
      expect(sent).toHaveLength(6);
      const chunks = [sent[0], sent[1], sent[2], sent[4], sent[5]];
      expect(sent[3].text).toMatch(/^SELECT count/);
      if (ON_POSTGRES) {
        for (const c of chunks) {
          expect(c.text).toMatch(/^COPY \(SELECT data\b.*\) TO STDOUT \(FORMAT binary\)$/s);
          expect(c.name).toBeUndefined();
        }
        expect(sent[3].name).toMatch(/^statehouse_[0-9a-f]{40}$/);
      } else {
        expect(sent.map((x) => x.name)).toEqual(Array(6).fill(undefined));
      }
    } finally {
      runners.mockRestore();
    }
  });

  (ON_POSTGRES ? it : it.skip)(
    'a binary COPY answers NULLs and several rows, fails as a QueryFailedError, and gives its connection back',
    async () => {
      const rows = await pooledBinaryCopy(
        db.dataSource,
        "SELECT x, NULL::bytea, '\\x00ff'::bytea FROM generate_series(1, 3) x",
      );
      expect(rows.map((r) => [r[0]?.readInt32BE(0), r[1], r[2]?.toString('hex')])).toEqual([
        [1, null, '00ff'],
        [2, null, '00ff'],
        [3, null, '00ff'],
      ]);
      const e = await pooledBinaryCopy(db.dataSource, 'SELECT 1/0').catch((x: unknown) => x);
      expect(e).toBeInstanceOf(QueryFailedError);
      const pool = (db.dataSource.driver as unknown as { master: Pool }).master;
      // Every connection is idle again and still answers.
      expect(pool.totalCount - pool.idleCount).toBe(0);
      expect(await db.dataSource.query('SELECT 1 AS one')).toEqual([{ one: 1 }]);
    },
  );

  it('a malformed or cut binary COPY output is refused, never read short', () => {
    const sig = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');
    const header = Buffer.concat([sig, Buffer.alloc(8)]);
    const row = Buffer.from([0, 1, 0, 0, 0, 3, 1, 2, 3]);
    const trailer = Buffer.from([0xff, 0xff]);
    expect(parseBinaryCopy([Buffer.concat([header, row]), trailer])).toEqual([
      [Buffer.from([1, 2, 3])],
    ]);
    // Split anywhere, the same rows.
    const whole = Buffer.concat([header, row, trailer]);
    expect(parseBinaryCopy([whole.subarray(0, 21), whole.subarray(21)])).toEqual([
      [Buffer.from([1, 2, 3])],
    ]);
    expect(() => parseBinaryCopy([Buffer.concat([header, row.subarray(0, 8)])])).toThrow(
      /malformed/,
    );
    expect(() => parseBinaryCopy([Buffer.from('not a copy at all, no')])).toThrow(/malformed/);
  });

  it('receives a chunk in far fewer bytes than the hex text of a bytea (twice its size)', async () => {
    const { key, body } = await stored(PG_CHUNK_BYTES);
    // A first read opens the pool's connection, so the second counts only the read itself.
    await readAll(await store.get(key));
    const before = bytesReceived(db.dataSource);
    const got = await readAll(await store.get(key));
    const received = bytesReceived(db.dataSource) - before;
    expect(got.equals(body)).toBe(true);
    expect(received).toBeGreaterThan(body.length);
    // On PostgreSQL as the bytes themselves (a binary COPY); embedded as base64 text.
    expect(received).toBeLessThan((ON_POSTGRES ? 1.01 : 1.5) * body.length);
  });
});
