import { Injectable } from '@nestjs/common';
import { pooledRows } from '../../database/pooled-statement';
import { SqlParams, sqlRows } from '../../database/sql';
import { DataSource, EntityManager } from 'typeorm';
import { HeldLock } from '../../common/errors';
import { toHeldLock } from '../state.repository';

export interface LockListRow {
  unit: string;
  workspace: string;
  lock_id: string;
  info: string;
  principal: string;
  created_at: Date;
}

export interface HeldLocksSummary {
  held: number;
  /** Age of the oldest held lock; 0 when none is held. */
  oldestAgeSeconds: number;
}

/** A CTE body another repository writes into a composed statement, given its parameters. */
export type Fragment = (params: SqlParams) => string;

/**
 * A CTE body run alongside a one-statement change only when the SQL condition `when` (the
 * change was made) holds: the audit row, the S3 door's replay record.
 */
export type Alongside = (params: SqlParams, when: string) => string;

/** The CTEs of `steps`, each run only when `when` holds, as `name AS (…)` list items. */
function alongside(params: SqlParams, steps: readonly Alongside[], when: string): string {
  return steps.map((step, i) => `,\n      alongside_${i} AS (${step(params, when)})`).join('');
}

/** What the one-statement acquire found (`acquireAtOnce`). */
export type AcquireAtOnce =
  /** The unit is not live or the state row does not exist: the transactional path creates them. */
  | { outcome: 'no_state' }
  /** This acquire inserted the lock (and its audit row). */
  | { outcome: 'won'; lock: HeldLock }
  /** The lock the insert lost to (held since before the statement began, and still held). */
  | { outcome: 'held'; lock: HeldLock }
  /**
   * The insert lost to a lock the statement's snapshot cannot show (taken after it began, e.g.
   * while it waited for the state row): the transactional path looks again.
   */
  | { outcome: 'unseen' };

type OutcomeRow = Parameters<typeof toHeldLock>[0] & { outcome: 'won' | 'held' | 'found' };

/** SQL for lock rows. The state row must exist; the state module creates it. */
@Injectable()
export class LockRepository {
  constructor(private readonly db: DataSource) {}

  /**
   * The whole acquire, in one statement: the primary key on `state_id` lets exactly one
   * concurrent insert win, on any number of replicas. A loser gets no row back.
   */
  async tryInsert(
    m: EntityManager,
    stateId: string,
    lockId: string,
    info: string,
    principal: string,
  ): Promise<HeldLock | undefined> {
    const rows = await sqlRows<Parameters<typeof toHeldLock>[0]>(
      m,
      `INSERT INTO locks (state_id, lock_id, info, principal) VALUES ($1, $2, $3, $4)
       ON CONFLICT (state_id) DO NOTHING
       RETURNING lock_id, info, principal, created_at`,
      [stateId, lockId, info, principal],
    );
    return rows.length > 0 ? toHeldLock(rows[0]) : undefined;
  }

  /**
   * The common acquire — a live unit whose state row exists — as one autocommit statement:
   * `stateOf` (the state module's CTE body, naming the state's `id` and share-locking it) feeds
   * the same insert as `tryInsert`, and each of `steps` (the audit module's insert, the S3
   * door's replay record) runs only when the insert won. A loser reads the holder from the statement's snapshot, row-locked:
   * a lock released since the statement began is skipped (so it is never reported), which makes
   * a reported holder the lock the insert lost to — the one live row of that state.
   */
  async acquireAtOnce(
    stateOf: Fragment,
    lock: { id: string; info: string; principal: string },
    steps: readonly Alongside[],
  ): Promise<AcquireAtOnce> {
    const params = new SqlParams();
    const sql = `WITH target AS (${stateOf(params)}),
      won AS (
        INSERT INTO locks (state_id, lock_id, info, principal)
        SELECT id, ${params.add(lock.id, 'text')}, ${params.add(lock.info, 'text')},
               ${params.add(lock.principal, 'text')} FROM target
        ON CONFLICT (state_id) DO NOTHING
        RETURNING lock_id, info, principal, created_at
      )${alongside(params, steps, 'EXISTS (SELECT 1 FROM won)')},
      holder AS (
        SELECT l.lock_id, l.info, l.principal, l.created_at
          FROM locks l JOIN target t ON t.id = l.state_id
           FOR KEY SHARE OF l
      )
      SELECT 'won' AS outcome, lock_id, info, principal, created_at FROM won
      UNION ALL
      SELECT 'held', lock_id, info, principal, created_at FROM holder
       WHERE NOT EXISTS (SELECT 1 FROM won)
      UNION ALL
      SELECT 'found', NULL, NULL, NULL, NULL FROM target`;
    const rows = await pooledRows<OutcomeRow>(this.db, sql, params.values);
    const won = rows.find((r) => r.outcome === 'won');
    if (won) return { outcome: 'won', lock: toHeldLock(won) };
    const held = rows.find((r) => r.outcome === 'held');
    if (held) return { outcome: 'held', lock: toHeldLock(held) };
    return rows.length > 0 ? { outcome: 'unseen' } : { outcome: 'no_state' };
  }

  /**
   * The holder's release as one autocommit statement: `stateOf` (the state module's CTE body,
   * naming the state's `id` and locking its row for update) scopes the same delete as
   * `deleteIfHeldBy`; `remember(params, from)` (the state module's `recordReleasedLock`) and
   * each of `steps` (the audit module's insert, the S3 door's replay record) run only for a
   * deleted lock. False when nothing was deleted.
   */
  async releaseAtOnce(
    stateOf: Fragment,
    lock: { id: string; principal: string },
    remember: (params: SqlParams, from: string) => string,
    steps: readonly Alongside[],
  ): Promise<boolean> {
    const params = new SqlParams();
    const sql = `WITH target AS (${stateOf(params)}),
      released AS (
        DELETE FROM locks
         WHERE state_id = (SELECT id FROM target)
           AND lock_id = ${params.add(lock.id, 'text')}
           AND principal = ${params.add(lock.principal, 'text')}
        RETURNING state_id
      ),
      remembered AS (${remember(params, 'released')})${alongside(params, steps, 'EXISTS (SELECT 1 FROM released)')}
      SELECT count(*)::int AS released FROM released`;
    const rows = await pooledRows<{ released: number }>(this.db, sql, params.values);
    return rows[0].released > 0;
  }

  /**
   * Release by the holder: deletes only when both the ID and the principal match. (The caller
   * records the released lock on the state, `StateRepository.recordReleasedLock`, so a retry
   * whose first answer was lost still succeeds.)
   */
  async deleteIfHeldBy(
    m: EntityManager,
    stateId: string,
    lockId: string,
    principal: string,
  ): Promise<boolean> {
    const rows = await sqlRows<unknown>(
      m,
      'DELETE FROM locks WHERE state_id = $1 AND lock_id = $2 AND principal = $3 RETURNING 1',
      [stateId, lockId, principal],
    );
    return rows.length > 0;
  }

  /** Force-unlock: removes whatever lock is held and returns it. */
  async deleteAny(m: EntityManager, stateId: string): Promise<HeldLock | undefined> {
    const rows = await sqlRows<Parameters<typeof toHeldLock>[0]>(
      m,
      'DELETE FROM locks WHERE state_id = $1 RETURNING lock_id, info, principal, created_at',
      [stateId],
    );
    return rows.length > 0 ? toHeldLock(rows[0]) : undefined;
  }

  /**
   * Read-only, in one statement outside any transaction: the lock held on the state named by
   * `stateOf` (the state module's CTE body naming its `id`), if any.
   */
  async holderAt(stateOf: Fragment): Promise<HeldLock | null> {
    const params = new SqlParams();
    const rows = await sqlRows<Parameters<typeof toHeldLock>[0]>(
      this.db.manager,
      `SELECT lock_id, info, principal, created_at FROM locks
        WHERE state_id = (${stateOf(params)})`,
      params.values,
    );
    return rows.length > 0 ? toHeldLock(rows[0]) : null;
  }

  /** Read-only: the lock held on the state, if any. */
  async holderOf(m: EntityManager, stateId: string): Promise<HeldLock | null> {
    const rows = await sqlRows<Parameters<typeof toHeldLock>[0]>(
      m,
      'SELECT lock_id, info, principal, created_at FROM locks WHERE state_id = $1',
      [stateId],
    );
    return rows.length > 0 ? toHeldLock(rows[0]) : null;
  }

  /** Read-only: any lock held on any workspace of the unit (a locked unit cannot be deleted). */
  async anyHolderInUnit(
    m: EntityManager,
    unitId: string,
  ): Promise<(HeldLock & { workspace: string }) | null> {
    const rows = await sqlRows<Parameters<typeof toHeldLock>[0] & { workspace: string }>(
      m,
      `SELECT l.lock_id, l.info, l.principal, l.created_at, s.workspace
         FROM locks l JOIN states s ON s.id = l.state_id
        WHERE s.unit_id = $1 ORDER BY s.workspace LIMIT 1`,
      [unitId],
    );
    return rows.length > 0 ? { ...toHeldLock(rows[0]), workspace: rows[0].workspace } : null;
  }

  async list(): Promise<LockListRow[]> {
    return await sqlRows<LockListRow>(
      this.db.manager,
      `SELECT u.name AS unit, s.workspace, l.lock_id, l.info, l.principal, l.created_at
         FROM locks l JOIN states s ON s.id = l.state_id JOIN units u ON u.id = s.unit_id
        ORDER BY u.name, s.workspace`,
    );
  }

  /**
   * How many locks are held and how long the oldest has been (seconds, by the database's clock,
   * so every replica reads the same). One aggregate over the small `locks` table.
   */
  async heldSummary(): Promise<HeldLocksSummary> {
    const rows = await sqlRows<{ held: number; oldest_age: number | null }>(
      this.db.manager,
      `SELECT count(*)::int AS held,
              EXTRACT(EPOCH FROM now() - min(created_at))::float8 AS oldest_age
         FROM locks`,
    );
    return { held: rows[0].held, oldestAgeSeconds: Math.max(0, rows[0].oldest_age ?? 0) };
  }
}
