import { Logger } from '@nestjs/common';
import { DataSource, EntityManager } from 'typeorm';
import { SecurityEvent } from '../../src/audit/security-event';
import {
  afterCommit,
  noteDefaultIsolation,
  transaction,
  TRANSACTION_ATTEMPTS,
} from '../../src/database/transaction';
import { MemoryBlobStore } from '../../src/storage/memory-blob.store';
import { statementsOf } from '../support/statements';
import { ON_POSTGRES, openTestDatabase, TestDatabase } from '../support/database';
import { ADMIN, ALICE, body, buildServices, tfState } from '../support/services';

const serializationFailure = (): Error =>
  Object.assign(new Error('injected: could not serialize access'), { code: '40001' });

/**
 * Makes the database refuse to commit: each transaction attempt the kernel opens runs its whole
 * body and then fails with a serialization failure (so PostgreSQL rolls it back) while `fail`
 * says so for that attempt — the worst moment for a body with effects outside the database.
 */
function injectFailures(
  ds: DataSource,
  fail: (attempt: number) => boolean,
): {
  attempts: () => number;
  restore: () => void;
} {
  const original = ds.transaction;
  const call = original.bind(ds) as (...args: unknown[]) => Promise<unknown>;
  let attempts = 0;
  // Called with an isolation level and the work, or with the work alone (see noteDefaultIsolation).
  const replaced = (...args: unknown[]) => {
    const work = args[args.length - 1] as (m: EntityManager) => Promise<unknown>;
    const failing = async (m: EntityManager) => {
      const result = await work(m);
      if (fail(++attempts)) throw serializationFailure();
      return result;
    };
    return call(...args.slice(0, -1), failing);
  };
  Object.assign(ds, { transaction: replaced });
  return { attempts: () => attempts, restore: () => (ds.transaction = original) };
}

async function settingValue(ds: DataSource, key: string): Promise<string[]> {
  const rows = await ds.query<{ value: string }[]>('SELECT value FROM settings WHERE key = $1', [
    key,
  ]);
  return rows.map((r) => r.value);
}

describe('the transaction kernel: retried on deadlock and serialization failure, effects once', () => {
  let db: TestDatabase;
  let n = 0;
  const key = () => `kernel-test-${process.pid}-${++n}`;

  beforeAll(async () => {
    db = await openTestDatabase();
  });
  afterAll(async () => {
    await db.close();
  });

  const levelInside = (ds: DataSource) =>
    transaction(ds, async (m) => {
      const rows = await m.query<{ transaction_isolation: string }[]>('SHOW transaction_isolation');
      return rows[0].transaction_isolation;
    });

  /** The level a transaction ran at, and the statements it sent (transaction control included). */
  async function oneTransaction(): Promise<{ level: string; sent: string[] }> {
    let level = '';
    const sent = await statementsOf(async () => (level = await levelInside(db.dataSource)));
    return { level, sent };
  }

  it('where sessions begin READ COMMITTED (checked once), a transaction sends no SET TRANSACTION and still runs READ COMMITTED', async () => {
    expect(await noteDefaultIsolation(db.dataSource)).toBe(true);
    const { level, sent } = await oneTransaction();
    expect(level).toBe('read committed');
    expect(sent.filter((q) => /SET TRANSACTION/i.test(q))).toEqual([]);
    expect(sent).toHaveLength(3); // START TRANSACTION, the SHOW, COMMIT
  });

  (ON_POSTGRES ? it.skip : it)(
    'where sessions begin at another level, every transaction sets READ COMMITTED itself (embedded: its one session)',
    async () => {
      await db.dataSource.query("SET default_transaction_isolation = 'repeatable read'");
      try {
        expect(await noteDefaultIsolation(db.dataSource)).toBe(false);
        const { level, sent } = await oneTransaction();
        expect(level).toBe('read committed');
        expect(
          sent.filter((q) => /SET TRANSACTION ISOLATION LEVEL READ COMMITTED/.test(q)),
        ).toHaveLength(1);
      } finally {
        await db.dataSource.query('RESET default_transaction_isolation');
        await noteDefaultIsolation(db.dataSource);
      }
    },
  );

  it('a failed attempt is rolled back and the body runs again: what it wrote is there once', async () => {
    const k = key();
    const faults = injectFailures(db.dataSource, (attempt) => attempt === 1);
    try {
      const result = await transaction(db.dataSource, async (m) => {
        // A plain INSERT: it would violate the key on the second run had the first not been undone.
        await m.query('INSERT INTO settings (key, value) VALUES ($1, $2)', [k, 'v']);
        return 'done';
      });
      expect(result).toBe('done');
      expect(faults.attempts()).toBe(2);
    } finally {
      faults.restore();
    }
    expect(await settingValue(db.dataSource, k)).toEqual(['v']);
  });

  it('afterCommit runs its effect once, after the commit — never for an attempt that was rolled back', async () => {
    const seen: string[] = [];
    const faults = injectFailures(db.dataSource, (attempt) => attempt <= 2);
    try {
      await transaction(db.dataSource, async (m) => {
        await m.query('SELECT 1');
        afterCommit(m, () => seen.push('effect'));
        seen.push('body');
      });
    } finally {
      faults.restore();
    }
    expect(seen).toEqual(['body', 'body', 'body', 'effect']);
  });

  it('an error that is not a deadlock or serialization failure is not retried, and no effect runs', async () => {
    const seen: string[] = [];
    let runs = 0;
    await expect(
      transaction(db.dataSource, async (m) => {
        runs++;
        afterCommit(m, () => seen.push('effect'));
        await m.query('SELECT 1/0');
      }),
    ).rejects.toThrow(/division by zero/);
    expect(runs).toBe(1);
    expect(seen).toEqual([]);
  });

  it(`gives up after ${TRANSACTION_ATTEMPTS} attempts with the database's error`, async () => {
    const k = key();
    const faults = injectFailures(db.dataSource, () => true);
    try {
      await expect(
        transaction(db.dataSource, (m) =>
          m.query('INSERT INTO settings (key, value) VALUES ($1, $2)', [k, 'v']),
        ),
      ).rejects.toMatchObject({ code: '40001' });
      expect(faults.attempts()).toBe(TRANSACTION_ATTEMPTS);
    } finally {
      faults.restore();
    }
    expect(await settingValue(db.dataSource, k)).toEqual([]);
  });

  it('a failing effect does not turn a committed change into an error', async () => {
    const k = key();
    const logged = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    await transaction(db.dataSource, async (m) => {
      await m.query('INSERT INTO settings (key, value) VALUES ($1, $2)', [k, 'v']);
      afterCommit(m, () => {
        throw new Error('an observer broke');
      });
    });
    expect(logged).toHaveBeenCalledWith(
      'an effect after a commit failed (the change is stored): an observer broke',
    );
    logged.mockRestore();
    expect(await settingValue(db.dataSource, k)).toEqual(['v']);
  });

  it('afterCommit on an entity manager that is not a transaction(...) one throws at once', async () => {
    expect(() => afterCommit(db.dataSource.manager, () => undefined)).toThrow(/not a transaction/);
    await db.dataSource.transaction(async (m) => {
      expect(() => afterCommit(m, () => undefined)).toThrow(/not a transaction/);
      await m.query('SELECT 1');
    });
  });

  (ON_POSTGRES ? it : it.skip)(
    'two transactions that deadlock on PostgreSQL both finish: the one the database chose as victim runs again',
    async () => {
      const other = await db.connectAnother!();
      const [a, b] = [key(), key()];
      await db.dataSource.query('INSERT INTO settings (key, value) VALUES ($1, $3), ($2, $3)', [
        a,
        b,
        '0',
      ]);
      const runs = { first: 0, second: 0 };
      // Each takes one row, waits until the other has taken its row, then wants the other's.
      let took = 0;
      const bothTook = () =>
        new Promise<void>((resolve) => {
          const check = () => (took >= 2 ? resolve() : setTimeout(check, 5));
          check();
        });
      const cross = (ds: DataSource, mine: string, theirs: string, counter: 'first' | 'second') =>
        transaction(ds, async (m) => {
          runs[counter]++;
          await m.query('UPDATE settings SET value = value || $2 WHERE key = $1', [mine, counter]);
          if (runs[counter] === 1) {
            took++;
            await bothTook();
          }
          await m.query('UPDATE settings SET value = value || $2 WHERE key = $1', [
            theirs,
            counter,
          ]);
        });
      try {
        await Promise.all([cross(db.dataSource, a, b, 'first'), cross(other, b, a, 'second')]);
      } finally {
        await other.destroy();
      }
      // One of them was rolled back once (deadlock_detected) and ran again; both changes are there once.
      expect(runs.first + runs.second).toBe(3);
      for (const k of [a, b]) {
        const [value] = await settingValue(db.dataSource, k);
        expect([...value].sort().join('')).toBe(['0', ...'first', ...'second'].sort().join(''));
      }
    },
    30_000,
  );

  describe('the services keep the rule: every body may run twice', () => {
    // Every transaction fails its first attempt after its whole body ran. A body that logs,
    // notifies an observer, counts or caches inside the transaction does it twice, and the
    // counts below catch it.
    it('state writes, locks and RBAC changes record and show each audit event once', async () => {
      const s = buildServices(db.dataSource, new MemoryBlobStore());
      const observed: SecurityEvent[] = [];
      s.audit.observe((e) => observed.push(e));
      const unit = `kernel/retry-${++n}`;
      const addr = { unit, workspace: 'default' };
      const faults = injectFailures(db.dataSource, (attempt) => attempt % 2 === 1);
      const [{ last }] = await db.dataSource.query<{ last: string }[]>(
        'SELECT coalesce(max(id), 0) AS last FROM audit_events',
      );
      try {
        await s.rbac.createPermission(ADMIN, `retry-${n}`, '', [
          { effect: 'allow', actions: ['unit.read'], resources: [`${unit}`], workspaces: null },
        ]);
        const held = await s.locks.acquire(
          ALICE,
          addr,
          Buffer.from(
            '{"ID":"R1","Operation":"OperationTypeApply","Info":"","Who":"a","Version":"1.11.4","Created":"2026-11-30T00:00:00Z","Path":""}',
          ),
          { generateId: false },
        );
        await s.writer.write({
          ...addr,
          principal: ALICE,
          door: 'api',
          lockId: held.id,
          body: body(tfState(1)),
        });
        await s.locks.unlockAsPrincipal(ALICE, addr, 'api');
      } finally {
        faults.restore();
      }
      // Three transactions, each run twice (the holder's unlock is one statement of its own).
      expect(faults.attempts()).toBeGreaterThanOrEqual(6);
      const rows = await db.dataSource.query<{ type: string }[]>(
        'SELECT type FROM audit_events WHERE id > $1 ORDER BY id',
        [last],
      );
      const stored = rows.map((r) => r.type);
      expect(stored).toEqual(expect.arrayContaining(['rbac.change', 'state.write']));
      expect(observed.map((e) => e.type)).toEqual(stored);
      expect(s.audit.events.map((e) => e.type)).toEqual(expect.arrayContaining(stored));
      expect((await s.units.getUnit(ADMIN, unit)).workspaces[0]).toMatchObject({
        locked: false,
      });
    });
  });
});
