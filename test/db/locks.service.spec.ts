import { DataSource } from 'typeorm';
import { Principal } from '../../src/common/principal';
import { DomainError } from '../../src/common/errors';
import { MemoryBlobStore } from '../../src/storage/memory-blob.store';
import { ON_POSTGRES, openTestDatabase, TestDatabase } from '../support/database';
import {
  ADMIN,
  ALICE,
  BOB,
  body,
  buildServices,
  failure,
  Services,
  tfState,
} from '../support/services';

const info = (id: string, who = 'someone@host'): Buffer =>
  Buffer.from(
    `{"ID":"${id}","Operation":"OperationTypeApply","Info":"","Who":"${who}","Version":"1.11.4","Created":"2026-11-30T00:00:00.000000000Z","Path":""}`,
  );

describe('lock authority on a real database', () => {
  let db: TestDatabase;
  let s: Services;
  let n = 0;
  let unit: string;
  const addr = (): { unit: string; workspace: string } => ({ unit, workspace: 'default' });

  beforeAll(async () => {
    db = await openTestDatabase();
  });
  afterAll(async () => {
    await db.close();
  });
  beforeEach(() => {
    s = buildServices(db.dataSource, new MemoryBlobStore());
    unit = `locks/u-${++n}`;
  });

  it('acquire on a unit that does not exist creates it, and stores the LockInfo as sent', async () => {
    const held = await s.locks.acquire(ALICE, addr(), info('L1', 'alice'), { generateId: false });
    expect(held.infoJson).toBe(info('L1', 'alice').toString());
    expect((await s.units.getUnit(ADMIN, unit)).workspaces[0]).toMatchObject({
      workspace: 'default',
      locked: true,
    });
    const view = await s.locks.get(ADMIN, addr());
    expect(view).toMatchObject({ id: 'L1', principal: 'user:alice', info: { Who: 'alice' } });
  });

  it('a retry by the same principal with the same ID succeeds again', async () => {
    await s.locks.acquire(ALICE, addr(), info('L1'), { generateId: false });
    const again = await s.locks.acquire(ALICE, addr(), info('L1'), { generateId: false });
    expect(again.id).toBe('L1');
  });

  it('a second acquire with another ID, or by another principal, is refused with the holder', async () => {
    await s.locks.acquire(ALICE, addr(), info('L1', 'alice'), { generateId: false });
    for (const [who, id] of [
      [ALICE, 'L2'],
      [BOB, 'L1'],
      [BOB, 'L3'],
    ] as [Principal, string][]) {
      const e = await failure(s.locks.acquire(who, addr(), info(id), { generateId: false }));
      expect(e.code).toBe('lock_conflict');
      expect(e.lock?.infoJson).toBe(info('L1', 'alice').toString());
      expect(e.lock?.principal).toBe('user:alice');
    }
  });

  it('generates an ID for the API when the LockInfo has none', async () => {
    const held = await s.locks.acquire(ALICE, addr(), Buffer.from('{"Who":"api"}'), {
      generateId: true,
    });
    expect(held.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(JSON.parse(held.infoJson)).toMatchObject({ ID: held.id, Who: 'api' });
  });

  it('release by the holder frees the lock; a retried release still answers success', async () => {
    await s.locks.acquire(ALICE, addr(), info('L1'), { generateId: false });
    await s.locks.release(ALICE, addr(), 'L1');
    await s.locks.release(ALICE, addr(), 'L1');
    expect((await failure(s.locks.get(ADMIN, addr()))).code).toBe('lock_not_found');
    await s.locks.acquire(BOB, addr(), info('L2'), { generateId: false });
  });

  it('release with the wrong ID is a mismatch naming the holder; by another principal it is refused', async () => {
    await s.locks.acquire(ALICE, addr(), info('L1'), { generateId: false });
    const wrongId = await failure(s.locks.release(ALICE, addr(), 'nope'));
    expect(wrongId.code).toBe('lock_mismatch');
    expect(wrongId.lock?.id).toBe('L1');
    const other = await failure(s.locks.release(BOB, addr(), 'L1'));
    expect(other.code).toBe('locked');
    expect((await s.locks.get(ADMIN, addr())).id).toBe('L1');
  });

  it('releasing a lock that is not held (and was not just released by the caller) is refused', async () => {
    expect((await failure(s.locks.release(ALICE, addr(), 'never'))).code).toBe('lock_not_held');
    await s.locks.acquire(ALICE, addr(), info('L1'), { generateId: false });
    await s.locks.forceUnlock(ADMIN, addr(), 'api');
    // Alice's lock was force-unlocked: her release must not pretend it was hers to release.
    expect((await failure(s.locks.release(ALICE, addr(), 'L1'))).code).toBe('lock_not_held');
  });

  it('force-unlock needs unit.force-unlock, removes any lock and is audited either way', async () => {
    await s.locks.acquire(ALICE, addr(), info('L1'), { generateId: false });
    expect((await failure(s.locks.forceUnlock(BOB, addr(), 'http'))).code).toBe('forbidden');
    expect((await s.locks.get(ADMIN, addr())).id).toBe('L1');
    const removed = await s.locks.forceUnlock(ADMIN, addr(), 'http');
    expect(removed?.id).toBe('L1');
    const events = s.audit.events.filter((e) => e.type === 'lock.force_unlock');
    expect(events.map((e) => e.outcome)).toEqual(['denied', 'success']);
    expect(events[1].details).toMatchObject({ lock_id: 'L1', holder: 'user:alice' });
  });

  describe('writes while locked', () => {
    const write = (p: Principal, serial: number, lockId?: string) =>
      s.writer.write({
        ...addr(),
        principal: p,
        door: 'http',
        body: body(tfState(serial)),
        lockId,
      });

    it('the holder writes with its lock ID; without it, with another ID, or as another principal it is refused', async () => {
      await write(ALICE, 1);
      await s.locks.acquire(ALICE, addr(), info('L1'), { generateId: false });
      expect((await failure(write(ALICE, 2))).code).toBe('locked');
      expect((await failure(write(ALICE, 2, 'L9'))).code).toBe('lock_mismatch');
      const other = await failure(write(BOB, 2, 'L1'));
      expect(other.code).toBe('locked');
      expect(other.lock?.id).toBe('L1');
      expect((await write(ALICE, 2, 'L1')).version.serial).toBe(2);
    });

    it('a write naming a lock that is no longer held is refused', async () => {
      await s.locks.acquire(ALICE, addr(), info('L1'), { generateId: false });
      await s.locks.release(ALICE, addr(), 'L1');
      expect((await failure(write(ALICE, 1, 'L1'))).code).toBe('lock_not_held');
      expect((await failure(s.reader.current(ADMIN, addr()))).code).toBe('state_not_found');
    });

    it('the S3 door, which cannot send an ID, is decided by the principal', async () => {
      await s.locks.acquire(ALICE, addr(), info('L1'), { generateId: false });
      const s3 = (p: Principal) =>
        s.writer.write({ ...addr(), principal: p, door: 's3', body: body(tfState(1)) });
      expect((await failure(s3(BOB))).code).toBe('locked');
      expect((await s3(ALICE)).created).toBe(true);
    });
  });

  it('lists held locks with their age', async () => {
    await s.locks.acquire(ALICE, addr(), info('L1'), { generateId: false });
    const mine = (await s.locks.list(ADMIN)).find((l) => l.unit === unit);
    expect(mine).toMatchObject({ id: 'L1', workspace: 'default', principal: 'user:alice' });
    expect(mine?.ageSeconds).toBeGreaterThanOrEqual(0);
  });

  it('a lock on a soft-deleted unit brings the unit back', async () => {
    await s.units.createUnit(ADMIN, unit);
    await s.units.deleteUnit(ADMIN, unit, 'api');
    await s.locks.acquire(ALICE, addr(), info('L1'), { generateId: false });
    expect((await s.units.getUnit(ADMIN, unit)).deletedAt).toBeNull();
  });

  it('of many concurrent acquirers on one state, exactly one wins, every round', async () => {
    const sources: DataSource[] = [db.dataSource];
    if (ON_POSTGRES && db.connectAnother)
      sources.push(await db.connectAnother(), await db.connectAnother());
    const services = sources.map((ds) => buildServices(ds, new MemoryBlobStore()));
    for (let round = 0; round < 5; round++) {
      const target = { unit: `${unit}-race-${round}`, workspace: 'default' };
      const attempts = Array.from({ length: 24 }, (_, i) => {
        const svc = services[i % services.length];
        const who: Principal = { subject: `user:racer-${i}`, kind: 'user', via: 'access-token' };
        return svc.locks.acquire(who, target, info(`R${round}-${i}`), { generateId: false });
      });
      const results = await Promise.allSettled(attempts);
      const winners = results.filter((r) => r.status === 'fulfilled');
      const losers = results.filter(
        (r) => r.status === 'rejected' && (r.reason as DomainError).code === 'lock_conflict',
      );
      expect(winners).toHaveLength(1);
      expect(losers).toHaveLength(23);
      const holder = await s.locks.get(ADMIN, target);
      expect(holder.id).toBe((winners[0] as PromiseFulfilledResult<{ id: string }>).value.id);
    }
  });

  it('acquirers and releasers racing on one state never fail with anything but a conflict', async () => {
    const sources: DataSource[] = [db.dataSource];
    if (ON_POSTGRES && db.connectAnother) sources.push(await db.connectAnother());
    const services = sources.map((ds) => buildServices(ds, new MemoryBlobStore()));
    const target = { unit: `${unit}-churn`, workspace: 'default' };
    const unexpected: unknown[] = [];
    let held = 0;
    await Promise.all(
      Array.from({ length: 16 }, async (_, w) => {
        const svc = services[w % services.length];
        const who: Principal = { subject: `user:churn-${w}`, kind: 'user', via: 'access-token' };
        for (let i = 0; i < 15; i++) {
          const id = `C${w}-${i}`;
          try {
            await svc.locks.acquire(who, target, info(id), { generateId: false });
            held++;
            await svc.locks.release(who, target, id);
          } catch (e) {
            if (!(e instanceof DomainError && e.code === 'lock_conflict')) unexpected.push(e);
          }
        }
      }),
    );
    expect(unexpected).toEqual([]);
    expect(held).toBeGreaterThan(0);
    expect((await failure(s.locks.get(ADMIN, target))).code).toBe('lock_not_found');
  });
});
