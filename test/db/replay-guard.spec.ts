import { createHash, randomBytes } from 'node:crypto';
import type { Principal } from '../../src/common/principal';
import { ReplayedRequestError, ReplayGuardService } from '../../src/s3compat/replay-guard.service';
import type { SigningContext } from '../../src/s3compat/sigv4';
import { UsedSignatureRepository } from '../../src/s3compat/used-signature.repository';
import { MemoryBlobStore } from '../../src/storage/memory-blob.store';
import { ON_POSTGRES, openTestDatabase, TestDatabase } from '../support/database';
import { ALICE, BOB, buildServices, Services } from '../support/services';

/**
 * The S3 door's replay record against a real database: it commits with the operation it
 * guards or not at all, one use per signature (across connections, so across replicas), and
 * expired records are swept.
 */
const info = (id: string): Buffer => Buffer.from(`{"ID":"${id}","Operation":"OperationTypeApply"}`);
const signing = (validUntil = Date.now() + 15 * 60_000): SigningContext =>
  ({ seedSignature: randomBytes(32).toString('hex'), validUntil }) as SigningContext;

describe('replay guard on a real database', () => {
  let db: TestDatabase;
  let s: Services;
  let guards: ReplayGuardService;
  let n = 0;
  const addr = () => ({ unit: `replay/u-${n}`, workspace: 'default' });

  beforeAll(async () => {
    db = await openTestDatabase();
  });
  afterAll(async () => {
    await db.close();
  });
  beforeEach(() => {
    n++;
    s = buildServices(db.dataSource, new MemoryBlobStore());
    guards = new ReplayGuardService(new UsedSignatureRepository(db.dataSource), s.audit);
  });

  const guardOf = (ctx: SigningContext, method = 'PUT', who: Principal = ALICE) => {
    const g = guards.guardFor(who, method, ctx);
    if (!g) throw new Error('no guard');
    return g;
  };

  it('reads are not guarded; writes are', () => {
    expect(guards.guardFor(ALICE, 'GET', signing())).toBeUndefined();
    expect(guards.guardFor(ALICE, 'HEAD', signing())).toBeUndefined();
    for (const m of ['PUT', 'POST', 'DELETE'])
      expect(guards.guardFor(ALICE, m, signing())).toBeDefined();
  });

  it('a signature claimed by a committed lock acquire cannot be claimed again', async () => {
    const ctx = signing();
    await s.locks.acquire(ALICE, addr(), info('a'), {
      generateId: false,
      inTransaction: guardOf(ctx).claim,
    });
    await s.locks.unlockAsPrincipal(ALICE, addr(), 's3');
    await expect(
      s.locks.acquire(ALICE, addr(), info('a'), {
        generateId: false,
        inTransaction: guardOf(ctx).claim,
      }),
    ).rejects.toBeInstanceOf(ReplayedRequestError);
    // The refused replay took no lock.
    await expect(s.locks.holder(ALICE, addr())).rejects.toMatchObject({ code: 'lock_not_found' });
  });

  it('an operation that fails after the claim rolls the claim back: the same request can be sent again', async () => {
    await s.locks.acquire(BOB, addr(), info('bob'), { generateId: false });
    const ctx = signing();
    await expect(
      s.locks.acquire(ALICE, addr(), info('a'), {
        generateId: false,
        inTransaction: guardOf(ctx).claim,
      }),
    ).rejects.toMatchObject({ code: 'lock_conflict' });
    await s.locks.unlockAsPrincipal(BOB, addr(), 's3');
    // Not burnt by the failed attempt: the identical request now succeeds (once).
    await s.locks.acquire(ALICE, addr(), info('a'), {
      generateId: false,
      inTransaction: guardOf(ctx).claim,
    });
    expect((await s.locks.holder(ALICE, addr())).id).toBe('a');
  });

  it('a release when no lock is held records nothing; claimAfterRefusal records on its own', async () => {
    const ctx = signing();
    expect(
      await s.locks.unlockAsPrincipal(ALICE, addr(), 's3', {
        inTransaction: guardOf(ctx, 'DELETE').claim,
      }),
    ).toBe(false);
    const again = guardOf(ctx, 'DELETE');
    await again.claimAfterRefusal();
    await s.locks.acquire(ALICE, addr(), info('a'), { generateId: false });
    await expect(
      s.locks.unlockAsPrincipal(ALICE, addr(), 's3', { inTransaction: again.claim }),
    ).rejects.toBeInstanceOf(ReplayedRequestError);
    expect((await s.locks.holder(ALICE, addr())).id).toBe('a');
  });

  it('expired records are swept (with a margin for other replicas’ clocks); live ones stay', async () => {
    const repo = new UsedSignatureRepository(db.dataSource);
    const now = Date.now();
    const old = signing(now - 60 * 60_000);
    const recent = signing(now - 60_000);
    const live = signing(now + 60_000);
    for (const c of [old, recent, live]) await guardOf(c).claimAfterRefusal();
    await guards.sweep(now);
    const key = (c: SigningContext) =>
      db.dataSource.query<unknown[]>(
        'SELECT 1 FROM s3_used_signatures WHERE signature_sha256 = $1',
        [createHash('sha256').update(c.seedSignature).digest('hex')],
      );
    expect((await key(old)).length).toBe(0);
    expect((await key(recent)).length).toBe(1);
    expect((await key(live)).length).toBe(1);
    expect(await repo.sweep(new Date(now + 120_000))).toBeGreaterThanOrEqual(2);
  });

  (ON_POSTGRES ? it : it.skip)(
    'two connections claiming one signature at once: exactly one wins (what replicas rely on)',
    async () => {
      if (!db.connectAnother) throw new Error('PostgreSQL has a second connection');
      const other = await db.connectAnother();
      const otherGuards = new ReplayGuardService(new UsedSignatureRepository(other), s.audit);
      for (let i = 0; i < 10; i++) {
        const ctx = signing();
        const elsewhere = otherGuards.guardFor(ALICE, 'PUT', ctx);
        const results = await Promise.allSettled([
          db.dataSource.transaction((m) => guardOf(ctx).claim(m)),
          other.transaction((m) => (elsewhere ? elsewhere.claim(m) : Promise.resolve())),
        ]);
        expect(results.map((r) => r.status).sort()).toEqual(['fulfilled', 'rejected']);
      }
    },
  );
});
