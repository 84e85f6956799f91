import { randomBytes, randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import type { Pool } from 'pg';
import { Readable } from 'node:stream';
import type { DataSource } from 'typeorm';
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

  it('reads on the pool, without a TypeORM QueryRunner, as statements prepared once per connection on PostgreSQL', async () => {
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
      expect([third.text, ranged.text]).toEqual([second.text, second.text]);
      expect(size.text).toMatch(/^SELECT count/);
      if (ON_POSTGRES) {
        for (const s of sent) expect(s.name).toMatch(/^statehouse_[0-9a-f]{40}$/);
        expect(new Set(sent.map((s) => s.name)).size).toBe(3);
        expect(first.name).not.toBe(second.name);
      } else {
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

  it('receives a chunk in far fewer bytes than the hex text of a bytea (twice its size)', async () => {
    const { key, body } = await stored(PG_CHUNK_BYTES);
    // A first read opens the pool's connection, so the second counts only the read itself.
    await readAll(await store.get(key));
    const before = bytesReceived(db.dataSource);
    const got = await readAll(await store.get(key));
    const received = bytesReceived(db.dataSource) - before;
    expect(got.equals(body)).toBe(true);
    expect(received).toBeGreaterThan(body.length);
    expect(received).toBeLessThan(1.5 * body.length);
  });
});
