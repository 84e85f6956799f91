import { Injectable } from '@nestjs/common';
import { sqlRows } from '../../database/sql';
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
