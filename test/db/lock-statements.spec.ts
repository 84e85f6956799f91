import { createHash, randomBytes } from 'node:crypto';
import { DataSource } from 'typeorm';
import { SecurityEvent } from '../../src/audit/security-event';
import { Principal } from '../../src/common/principal';
import { DomainError } from '../../src/common/errors';
import { runWithRequestContext } from '../../src/common/request-context';
import { ReplayedRequestError, ReplayGuardService } from '../../src/s3compat/replay-guard.service';
import type { SigningContext } from '../../src/s3compat/sigv4';
import { UsedSignatureRepository } from '../../src/s3compat/used-signature.repository';
import { MemoryBlobStore } from '../../src/storage/memory-blob.store';
import { DATABASE_KIND, ON_POSTGRES, onTestDatabase, TestDatabase } from '../support/database';
import { ALICE, BOB, buildServices, failure, Services } from '../support/services';
import { sentStatementsOf, statementsOf } from '../support/statements';

const info = (id: string): Buffer =>
  Buffer.from(
    `{"ID":"${id}","Operation":"OperationTypeApply","Info":"","Who":"w@h","Version":"1.11.4","Created":"2026-11-30T00:00:00.000000000Z","Path":""}`,
  );

describe(`LOCK and UNLOCK as one statement each (${DATABASE_KIND})`, () => {
  let db: TestDatabase;
  let s: Services;
  let n = 0;
  onTestDatabase((opened) => {
    db = opened;
  });
  beforeEach(() => {
    s = buildServices(db.dataSource, new MemoryBlobStore());
  });

  /** A unit whose default state exists (created by a first lock, released again). */
  async function existingState(): Promise<{ unit: string; workspace: string }> {
    const addr = { unit: `one-statement/u-${++n}`, workspace: 'default' };
    await s.locks.acquire(ALICE, addr, info('setup'), { generateId: false });
    await s.locks.release(ALICE, addr, 'setup');
    return addr;
  }

  it("a LOCK of an existing state sends exactly one statement, and its holder's UNLOCK one", async () => {
    const addr = await existingState();
    const lock = await statementsOf(() =>
      s.locks.acquire(ALICE, addr, info('L1'), { generateId: false }),
    );
    expect(lock).toHaveLength(1);
    expect(lock[0]).toMatch(/INSERT INTO locks/);
    const unlock = await statementsOf(() => s.locks.release(ALICE, addr, 'L1'));
    expect(unlock).toHaveLength(1);
    expect(unlock[0]).toMatch(/DELETE FROM locks/);
    // And the lock is gone, remembered for a retried release, both events audited.
    await s.locks.release(ALICE, addr, 'L1');
    expect(s.audit.events.slice(-2).map((e) => e.type)).toEqual(['lock.acquire', 'lock.release']);
  });

  it('a LOCK and its UNLOCK run on the pool, without a TypeORM QueryRunner, as statements prepared once per connection on PostgreSQL', async () => {
    const addr = await existingState();
    const runners = jest.spyOn(db.dataSource, 'createQueryRunner');
    try {
      const sent = await sentStatementsOf(async () => {
        for (const id of ['P1', 'P2']) {
          await s.locks.acquire(ALICE, addr, info(id), { generateId: false });
          await s.locks.release(ALICE, addr, id);
        }
      });
      expect(runners).not.toHaveBeenCalled();
      expect(sent).toHaveLength(4);
      const [lock1, unlock1, lock2, unlock2] = sent;
      // The same text each time (the values are parameters), so a connection plans it once.
      expect(lock2.text).toBe(lock1.text);
      expect(unlock2.text).toBe(unlock1.text);
      if (ON_POSTGRES) {
        expect(lock1.name).toMatch(/^statehouse_[0-9a-f]{40}$/);
        expect(unlock1.name).toMatch(/^statehouse_[0-9a-f]{40}$/);
        expect(unlock1.name).not.toBe(lock1.name);
        expect([lock2.name, unlock2.name]).toEqual([lock1.name, unlock1.name]);
      } else {
        // PGlite's one session outlives the pool's connections: nothing is prepared by name.
        expect(sent.map((x) => x.name)).toEqual([undefined, undefined, undefined, undefined]);
      }
    } finally {
      runners.mockRestore();
    }
  });

  it('a refused LOCK of a held state is one statement too, and refuses with the holder', async () => {
    const addr = await existingState();
    await s.locks.acquire(ALICE, addr, info('L1'), { generateId: false });
    let refusal: DomainError | undefined;
    const sent = await statementsOf(async () => {
      refusal = await failure(s.locks.acquire(BOB, addr, info('L2'), { generateId: false }));
    });
    expect(sent).toHaveLength(1);
    expect(refusal?.code).toBe('lock_conflict');
    expect(refusal?.lock).toMatchObject({ id: 'L1', principal: 'user:alice' });
  });

  it("the holder's repeat of its LOCK is one statement and answers its lock, audited once", async () => {
    const addr = await existingState();
    await s.locks.acquire(ALICE, addr, info('L1'), { generateId: false });
    let again: { id: string } | undefined;
    const sent = await statementsOf(async () => {
      again = await s.locks.acquire(ALICE, addr, info('L1'), { generateId: false });
    });
    expect(sent).toHaveLength(1);
    expect(again?.id).toBe('L1');
    const acquires = s.audit.events.filter(
      (e) => e.type === 'lock.acquire' && e.unit === addr.unit,
    );
    expect(acquires.map((e) => e.details?.lock_id)).toEqual(['setup', 'L1']);
  });

  it('the audit rows a statement stores are the ones recordIn stores: same fields, same stamps', async () => {
    const addr = await existingState();
    const observed: SecurityEvent[] = [];
    s.audit.observe((e) => observed.push(e));
    const ctx = { requestId: 'req-one-statement', clientIp: '198.51.100.7' };
    await runWithRequestContext(ctx, async () => {
      await s.locks.acquire(ALICE, addr, info('L1'), { generateId: false, door: 'http' });
      await s.locks.release(ALICE, addr, 'L1', 'http');
    });
    const rows = await db.dataSource.query<Record<string, unknown>[]>(
      `SELECT at, type, actor, action, unit, workspace, outcome, door, request_id, client_ip, details, count
         FROM audit_events WHERE unit = $1 AND request_id = $2 ORDER BY id`,
      [addr.unit, ctx.requestId],
    );
    expect(observed.map((e) => e.type)).toEqual(['lock.acquire', 'lock.release']);
    expect(rows).toEqual(
      observed.map((e) => ({
        at: new Date(e.at),
        type: e.type,
        actor: 'user:alice',
        action: 'unit.lock',
        unit: addr.unit,
        workspace: 'default',
        outcome: 'success',
        door: 'http',
        request_id: ctx.requestId,
        client_ip: ctx.clientIp,
        details: { lock_id: 'L1' },
        count: 1,
      })),
    );
    expect(observed.map((e) => e.requestId)).toEqual([ctx.requestId, ctx.requestId]);
  });

  describe("the S3 door's lock object (its replay record in the same statement)", () => {
    const signing = (): SigningContext =>
      ({
        seedSignature: randomBytes(32).toString('hex'),
        validUntil: Date.now() + 15 * 60_000,
      }) as SigningContext;
    let guards: ReplayGuardService;
    beforeEach(() => {
      guards = new ReplayGuardService(new UsedSignatureRepository(db.dataSource), s.audit);
    });
    const guardOf = (ctx: SigningContext, method: string) => {
      const g = guards.guardFor(ALICE, method, ctx);
      if (!g) throw new Error('no guard');
      return { inTransaction: g.claim, inStatement: g.inStatement };
    };
    const recorded = async (ctx: SigningContext) =>
      (
        await db.dataSource.query<unknown[]>(
          'SELECT 1 FROM s3_used_signatures WHERE signature_sha256 = $1',
          [createHash('sha256').update(ctx.seedSignature).digest('hex')],
        )
      ).length;

    it('a PutObject of the lock object is one statement, with its signature recorded', async () => {
      const addr = await existingState();
      const ctx = signing();
      const sent = await statementsOf(() =>
        s.locks.acquire(ALICE, addr, info('L1'), { generateId: false, ...guardOf(ctx, 'PUT') }),
      );
      expect(sent).toHaveLength(1);
      expect(sent[0]).toMatch(/INSERT INTO locks[\s\S]*INSERT INTO s3_used_signatures/);
      expect(await recorded(ctx)).toBe(1);
      expect((await s.locks.holder(ALICE, addr)).id).toBe('L1');
    });

    it("a read of the lock object is one statement, and the holder's DeleteObject one (the release of the lock ID its PutObject took)", async () => {
      const addr = await existingState();
      await s.locks.acquire(ALICE, addr, info('L1'), { generateId: false });
      const read = await statementsOf(() => s.locks.holder(ALICE, addr));
      expect(read).toHaveLength(1);
      const ctx = signing();
      const sent = await statementsOf(() =>
        s.locks.unlockAsPrincipal(ALICE, addr, 's3', guardOf(ctx, 'DELETE')),
      );
      expect(sent).toHaveLength(1);
      expect(sent[0]).toMatch(/DELETE FROM locks[\s\S]*INSERT INTO s3_used_signatures/);
      expect(await recorded(ctx)).toBe(1);
      await expect(s.locks.holder(ALICE, addr)).rejects.toMatchObject({ code: 'lock_not_found' });
      expect(s.audit.events.slice(-1).map((e) => [e.type, e.door])).toEqual([
        ['lock.release', 's3'],
      ]);
    });

    it("the holder's DeleteObject on a replica that did not see the lock taken is two statements (the holder, then the release), audited the same", async () => {
      const addr = await existingState();
      await s.locks.acquire(ALICE, addr, info('L1'), { generateId: false });
      const other = buildServices(db.dataSource, new MemoryBlobStore());
      await other.locks.holder(ALICE, addr); // its rules read once, as a running replica has them
      const ctx = signing();
      const sent = await statementsOf(() =>
        other.locks.unlockAsPrincipal(ALICE, addr, 's3', guardOf(ctx, 'DELETE')),
      );
      expect(sent).toHaveLength(2);
      expect(sent[1]).toMatch(/DELETE FROM locks[\s\S]*INSERT INTO s3_used_signatures/);
      await expect(s.locks.holder(ALICE, addr)).rejects.toMatchObject({ code: 'lock_not_found' });
      expect(other.audit.events.slice(-1).map((e) => [e.type, e.details])).toEqual([
        ['lock.release', { lock_id: 'L1' }],
      ]);
    });

    it("a DeleteObject whose remembered lock ID is stale (the lock re-taken elsewhere) releases the lock held now, and one that is another's is a force-unlock", async () => {
      const addr = await existingState();
      await s.locks.acquire(ALICE, addr, info('L1'), { generateId: false });
      const other = buildServices(db.dataSource, new MemoryBlobStore());
      await other.locks.release(ALICE, addr, 'L1');
      await other.locks.acquire(ALICE, addr, info('L2'), { generateId: false });
      // This process remembers L1: that release deletes nothing, then the holder's read finds L2.
      const sent = await statementsOf(() =>
        s.locks.unlockAsPrincipal(ALICE, addr, 's3', guardOf(signing(), 'DELETE')),
      );
      expect(sent).toHaveLength(3);
      await expect(s.locks.holder(ALICE, addr)).rejects.toMatchObject({ code: 'lock_not_found' });
      expect(s.audit.events.slice(-1).map((e) => [e.type, e.details])).toEqual([
        ['lock.release', { lock_id: 'L2' }],
      ]);
      // Alice's remembered L3, now Bob's lock of the same ID: never released as Alice's.
      await s.locks.acquire(ALICE, addr, info('L3'), { generateId: false });
      await other.locks.release(ALICE, addr, 'L3');
      await other.locks.acquire(BOB, addr, info('L3'), { generateId: false });
      await expect(
        s.locks.unlockAsPrincipal(ALICE, addr, 's3', guardOf(signing(), 'DELETE')),
      ).rejects.toBeDefined();
      expect((await s.locks.holder(ALICE, addr)).principal).toBe(BOB.subject);
    });

    it('a replayed PutObject of the lock object is refused by the statement and takes no lock', async () => {
      const addr = await existingState();
      const ctx = signing();
      await s.locks.acquire(ALICE, addr, info('L1'), { generateId: false, ...guardOf(ctx, 'PUT') });
      await s.locks.unlockAsPrincipal(ALICE, addr, 's3', guardOf(signing(), 'DELETE'));
      const before = s.audit.events.length;
      await expect(
        s.locks.acquire(ALICE, addr, info('L1'), { generateId: false, ...guardOf(ctx, 'PUT') }),
      ).rejects.toBeInstanceOf(ReplayedRequestError);
      await expect(s.locks.holder(ALICE, addr)).rejects.toMatchObject({ code: 'lock_not_found' });
      // The refusal is audited; no lock.acquire is.
      expect(s.audit.events.slice(before).map((e) => e.type)).toEqual(['auth.failed']);
    });

    it('a replayed DeleteObject of the lock object is refused by the statement and releases nothing', async () => {
      const addr = await existingState();
      const ctx = signing();
      await s.locks.acquire(ALICE, addr, info('L1'), { generateId: false });
      await s.locks.unlockAsPrincipal(ALICE, addr, 's3', guardOf(ctx, 'DELETE'));
      await s.locks.acquire(ALICE, addr, info('L2'), { generateId: false });
      await expect(
        s.locks.unlockAsPrincipal(ALICE, addr, 's3', guardOf(ctx, 'DELETE')),
      ).rejects.toBeInstanceOf(ReplayedRequestError);
      expect((await s.locks.holder(ALICE, addr)).id).toBe('L2');
    });

    it("an If-Match that does not match the holder's lock object refuses the release before it is made", async () => {
      const addr = await existingState();
      await s.locks.acquire(ALICE, addr, info('L1'), { generateId: false });
      const ctx = signing();
      const refusal = new Error('precondition');
      await expect(
        s.locks.unlockAsPrincipal(ALICE, addr, 's3', {
          ...guardOf(ctx, 'DELETE'),
          precondition: (holder) => {
            if (holder?.id !== 'other') throw refusal;
          },
        }),
      ).rejects.toBe(refusal);
      expect((await s.locks.holder(ALICE, addr)).id).toBe('L1');
      expect(await recorded(ctx)).toBe(0);
    });
  });

  it('a LOCK of a unit that does not exist yet still creates it (the transactional path)', async () => {
    const addr = { unit: `one-statement/new-${++n}`, workspace: 'staging' };
    await s.locks.acquire(ALICE, addr, info('L1'), { generateId: false });
    expect((await s.locks.get(ALICE, addr)).id).toBe('L1');
    const workspaces = (await s.units.getUnit(ALICE, addr.unit)).workspaces.map((w) => w.workspace);
    expect(workspaces.sort()).toEqual(['default', 'staging']);
  });

  it('contention: 32 acquirers over 4 states on two replicas never see two holders, and each won round trip is audited once each way', async () => {
    const sources: DataSource[] = [db.dataSource];
    if (ON_POSTGRES && db.connectAnother) sources.push(await db.connectAnother());
    const replicas = sources.map((ds) => buildServices(ds, new MemoryBlobStore()));
    const states = await Promise.all(Array.from({ length: 4 }, () => existingState()));
    const holders = new Map<string, string>();
    const unexpected: unknown[] = [];
    const won = new Map<string, number>();
    let refused = 0;
    const until = Date.now() + (ON_POSTGRES ? 4000 : 2000);
    await Promise.all(
      Array.from({ length: 32 }, async (_, w) => {
        const svc = replicas[w % replicas.length].locks;
        const who: Principal = {
          subject: `user:contender-${w}`,
          kind: 'user',
          via: 'access-token',
        };
        for (let i = 0; Date.now() < until; i++) {
          const addr = states[(w + i) % states.length];
          const id = `C${w}-${i}`;
          try {
            await svc.acquire(who, addr, info(id), { generateId: false });
          } catch (e) {
            if (e instanceof DomainError && e.code === 'lock_conflict') refused++;
            else unexpected.push(e);
            continue;
          }
          const other = holders.get(addr.unit);
          if (other !== undefined)
            unexpected.push(new Error(`${addr.unit}: ${id} and ${other} both hold it`));
          holders.set(addr.unit, id);
          won.set(addr.unit, (won.get(addr.unit) ?? 0) + 1);
          await new Promise((r) => setImmediate(r)); // hold it across a turn of the event loop
          holders.delete(addr.unit);
          try {
            await svc.release(who, addr, id);
          } catch (e) {
            unexpected.push(e);
          }
        }
      }),
    );
    expect(unexpected).toEqual([]);
    expect(refused).toBeGreaterThan(0);
    const counted = await db.dataSource.query<{ unit: string; type: string; n: number }[]>(
      `SELECT unit, type, count(*)::int AS n FROM audit_events
          WHERE unit = ANY($1) AND type IN ('lock.acquire', 'lock.release') AND details->>'lock_id' <> 'setup'
          GROUP BY unit, type ORDER BY unit, type`,
      [states.map((a) => a.unit)],
    );
    const expected = states.flatMap((a) => [
      { unit: a.unit, type: 'lock.acquire', n: won.get(a.unit) },
      { unit: a.unit, type: 'lock.release', n: won.get(a.unit) },
    ]);
    expect(counted).toEqual(expected.sort((x, y) => x.unit.localeCompare(y.unit)));
    for (const a of states) expect(won.get(a.unit)).toBeGreaterThan(0);
  }, 60_000);
});
