import { randomBytes, randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import type { Pool } from 'pg';
import { Readable } from 'node:stream';
import { QueryFailedError, type DataSource } from 'typeorm';
import { canCopyOut, pooledCopyRows, pooledRows } from '../../src/database/pooled-statement';
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

  it('reads on the pool, without a TypeORM QueryRunner: binary COPYs on PostgreSQL, unnamed queries on the embedded database', async () => {
    const three = await stored(2 * PG_CHUNK_BYTES + 1);
    const runners = jest.spyOn(db.dataSource, 'createQueryRunner');
    try {
      const sent = await sentStatementsOf(async () => {
        await readAll(await store.get(three.key));
        await readAll(
          await store.get(three.key, { start: PG_CHUNK_BYTES, end: PG_CHUNK_BYTES + 9 }),
        );
      });
      expect(runners).not.toHaveBeenCalled();
      // The first chunk and the count, two more chunks; a range: the size, its one chunk.
      expect(sent).toHaveLength(5);
      const [first, second, third, size, ranged] = sent;
      expect(size.text).toMatch(/^SELECT count/);
      const chunkReads = [first, second, third, ranged];
      if (ON_POSTGRES) {
        for (const s of chunkReads) {
          expect(s.text).toMatch(/^COPY \(SELECT data\b.* TO STDOUT \(FORMAT binary\)$/);
          expect(s.text).toContain(`'${three.key}'`);
        }
        expect(
          [second.text, third.text, ranged.text].map((t) => /seq = (\d+)/.exec(t)?.[1]),
        ).toEqual(['1', '2', '1']);
        // The size is still a query, prepared once per connection.
        expect(size.name).toMatch(/^statehouse_[0-9a-f]{40}$/);
      } else {
        expect([third.text, ranged.text]).toEqual([second.text, second.text]);
        expect(sent.map((s) => s.name)).toEqual([
          undefined,
          undefined,
          undefined,
          undefined,
          undefined,
        ]);
      }
    } finally {
      runners.mockRestore();
    }
  });

  it('receives a chunk as its own bytes from PostgreSQL, and in far fewer bytes than hex text (twice its size) from the embedded database', async () => {
    const { key, body } = await stored(PG_CHUNK_BYTES);
    // A first read opens the pool's connection, so the second counts only the read itself.
    await readAll(await store.get(key));
    const before = bytesReceived(db.dataSource);
    const got = await readAll(await store.get(key));
    const received = bytesReceived(db.dataSource) - before;
    expect(got.equals(body)).toBe(true);
    expect(received).toBeGreaterThan(body.length);
    // Base64 text is 4/3 of the bytes (and line-wrapped); a binary COPY adds a few framing bytes.
    expect(received).toBeLessThan((ON_POSTGRES ? 1.01 : 1.5) * body.length);
  });
});

describe('pooledCopyRows (a binary COPY on the pool)', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await openTestDatabase();
  });
  afterAll(() => db?.close());

  if (ON_POSTGRES) {
    it('answers the rows’ values as their binary bytes, and a refused COPY as a QueryFailedError that leaves the pool usable', async () => {
      expect(canCopyOut(db.dataSource)).toBe(true);
      const rows = await pooledCopyRows(
        db.dataSource,
        "SELECT '\\x00ff'::bytea, NULL::bytea, 42::int UNION ALL SELECT ''::bytea, '\\x01'::bytea, -1",
      );
      expect(rows.map((r) => r.map((v) => v?.toString('hex') ?? null))).toEqual([
        ['00ff', null, '0000002a'],
        ['', '01', 'ffffffff'],
      ]);
      await expect(
        pooledCopyRows(db.dataSource, 'SELECT * FROM no_such_table'),
      ).rejects.toBeInstanceOf(QueryFailedError);
      // The pool times each statement (query_timeout): a COPY that ended stops its timer.
      const timers = (): number =>
        process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
      const before = timers();
      for (let i = 0; i < 20; i++) {
        expect(await pooledCopyRows(db.dataSource, `SELECT ${i}::int`)).toEqual([
          [expect.any(Buffer)],
        ]);
      }
      expect(timers()).toBeLessThan(before + 5);
      expect(await pooledRows(db.dataSource, 'SELECT 1 AS one', [])).toEqual([{ one: 1 }]);
    });
  } else {
    it('is not used on the embedded database, which cannot COPY out to this process', async () => {
      expect(canCopyOut(db.dataSource)).toBe(false);
      await expect(pooledCopyRows(db.dataSource, 'SELECT 1')).rejects.toThrow(TypeError);
    });
  }
});
