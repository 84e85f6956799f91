import { BucketRepository } from '../../src/s3compat/bucket.repository';
import { openTestDatabase, TestDatabase } from '../support/database';

/**
 * When each S3 door bucket was first served (ListBuckets' CreationDate), on a real database:
 * recorded once, kept across later starts, and the same for every replica — two that start
 * together agree on one time.
 */
describe('bucket creation times', () => {
  let db: TestDatabase;
  let buckets: BucketRepository;

  beforeAll(async () => {
    db = await openTestDatabase();
    buckets = new BucketRepository(db.dataSource);
  });
  afterAll(async () => {
    await db.close();
  });

  it('the first time a bucket is served is kept; serving it again changes nothing', async () => {
    await buckets.recordServed(['first']);
    const before = (await buckets.firstServed(['first'])).get('first');
    expect(before).toBeInstanceOf(Date);
    await new Promise((r) => setTimeout(r, 20));
    await buckets.recordServed(['first', 'second']);
    const after = await buckets.firstServed(['first', 'second', 'never']);
    expect(after.get('first')?.getTime()).toBe(before?.getTime());
    expect(after.get('second')?.getTime()).toBeGreaterThan(before?.getTime() ?? Infinity);
    expect(after.has('never')).toBe(false);
  });

  it('replicas starting together (each on its own connection) record one time per bucket', async () => {
    const others = db.connectAnother
      ? await Promise.all([db.connectAnother(), db.connectAnother(), db.connectAnother()])
      : [db.dataSource, db.dataSource, db.dataSource]; // PGlite: one session, the same race in turn
    const names = ['together-a', 'together-b'];
    await Promise.all(others.map((ds) => new BucketRepository(ds).recordServed(names)));
    const seen = await Promise.all(
      others.map(async (ds) => {
        const m = await new BucketRepository(ds).firstServed(names);
        return names.map((n) => m.get(n)?.toISOString());
      }),
    );
    expect(seen[0].every((t) => t !== undefined)).toBe(true);
    for (const s of seen) expect(s).toEqual(seen[0]);
  });
});
