import { Injectable, Optional } from '@nestjs/common';
import { AuditService, SecurityEventInput } from '../../audit/audit.service';
import { changeEvent } from '../../audit/events';
import { Principal } from '../../common/principal';
import { DomainError, HeldLock } from '../../common/errors';
import type { StatementStep, TransactionStep } from '../../database/sql';
import { statementRetried } from '../../database/transaction';
import type { EntityManager } from 'typeorm';
import { assertUnitName } from '../../common/names';
import { MetricsService } from '../../metrics/metrics.service';
import { AuthorizationService } from '../../rbac/authorization.service';
import { StateRepository, StateRow } from '../state.repository';
import { StateAccess } from '../state-access';
import type { StateAddress } from '../state-types';
import { Door } from '../state.views';
import { parseLockInfo } from './lock-info';
import { LockIdHints } from './lock-id-hints';
import { HeldLocksSummary, LockRepository } from './lock.repository';
import { lockView, LockView } from './locks.views';

/** How the S3 door's unconditional release (`DeleteObject` of the lock object) may be narrowed. */
export interface UnlockOptions {
  /** Sees the held lock (null when none) before it is released; throw to refuse. */
  precondition?: (holder: HeldLock | null) => void;
  /** Work that commits with the removal of a lock (the S3 door's replay record). */
  inTransaction?: TransactionStep;
  /** `inTransaction` for the one-statement release; without it that path is not taken. */
  inStatement?: StatementStep;
}

/**
 * The lock authority (README, "Lock authority (every door)"), the same for every door: acquire (idempotent for the
 * same principal and ID), release by the holder (idempotent for a retried release), and
 * force-unlock as its own, audited action.
 */
@Injectable()
export class LocksService {
  /** The lock IDs this process saw each principal take (see `unlockAsPrincipal`). */
  private readonly hints = new LockIdHints();

  constructor(
    private readonly locks: LockRepository,
    private readonly repo: StateRepository,
    private readonly access: StateAccess,
    private readonly authz: AuthorizationService,
    private readonly audit: AuditService,
    @Optional() private readonly metrics?: MetricsService,
  ) {}

  async acquire(
    principal: Principal,
    addr: StateAddress,
    body: Buffer,
    options: {
      generateId: boolean;
      door?: Door;
      /**
       * Work that commits with a new lock (the S3 door's replay record). A repeat of the
       * holder's own acquire changes nothing and does not run it: a proxy that re-sends a lock
       * request (nginx, to the next replica) gets the same lock back, not a refusal.
       */
      inTransaction?: TransactionStep;
      /** `inTransaction` for the one-statement acquire; without it that path is not taken. */
      inStatement?: StatementStep;
    },
  ): Promise<HeldLock> {
    assertUnitName(addr.unit);
    await this.authz.authorize(principal, 'unit.lock', addr);
    let parsed: ReturnType<typeof parseLockInfo> | undefined;
    if (!options.inTransaction || options.inStatement) {
      // A LockInfo that does not parse is refused below, after the unit.create check, as always.
      parsed = lockInfoOrUndefined(body, options.generateId);
      const fast =
        parsed &&
        (await this.acquireAtOnce(principal, addr, parsed, options.door, options.inStatement));
      if (fast) return this.heldBy(principal, addr, fast);
    }
    await this.access.assertMayCreateOnUse(principal, addr.unit);
    const { id, infoJson } = parsed ?? parseLockInfo(body, options.generateId);
    let acquired = false;
    const held = await this.repo.transaction(async (m) => {
      acquired = false; // the transaction may run again
      const stateId = await this.ensureStateForLock(m, principal, addr);
      // A concurrent release can empty the row between our insert and our look; try again.
      for (let attempt = 0; attempt < 5; attempt++) {
        const won = await this.locks.tryInsert(m, stateId, id, infoJson, principal.subject);
        if (won) {
          await options.inTransaction?.(m);
          await this.audit.recordIn(m, acquireEvent(principal, addr, id, options.door));
          acquired = true;
          return won;
        }
        const holder = await this.locks.holderOf(m, stateId);
        if (holder === null) continue;
        if (holder.principal === principal.subject && holder.id === id) return holder;
        this.metrics?.lockConflict(options.door);
        throw lockConflict(addr, holder);
      }
      throw new DomainError('unavailable', 'the lock is changing hands too fast; try again');
    });
    if (acquired) this.metrics?.lockAcquired(options.door);
    return this.heldBy(principal, addr, held);
  }

  /** The caller's own lock, as acquire answers it: remembered as a hint for its release. */
  private heldBy(principal: Principal, addr: StateAddress, lock: HeldLock): HeldLock {
    this.hints.held(addr, principal.subject, lock.id);
    return lock;
  }

  /**
   * The common acquire — the unit is live and its state row exists — as one autocommit
   * statement (`LockRepository.acquireAtOnce`): the state row share-locked, the insert that
   * decides the winner, and the winner's audit row. A loser gets the lock it lost to: the
   * caller's own (a repeat, answered with it) or another (refused). Undefined when the
   * transactional path must decide: no live unit or state row (it creates them), or a lost
   * insert whose winner the statement's snapshot cannot show (it looks again).
   *
   * Why this cannot deadlock with the other lock paths, and so needs no transaction to retry
   * it (`statementRetried` would, all the same): every path takes rows in the order unit,
   * state, lock. This one key-share-locks the unit, share-locks the state (the order of its FROM), then
   * inserts the lock row (a loser key-share-locks the row it lost to; only a delete waits for
   * that, and every delete of a lock row first takes the state row, which this statement holds
   * share-locked, so none is waiting yet); the one-statement release locks only the state row, then deletes the
   * lock row and updates the state row it already holds; the transactional paths and the
   * writers take the unit, then the state, then read or change the lock. A path waits only on
   * a row later in that order than every row it holds, so no wait closes a cycle.
   */
  private async acquireAtOnce(
    principal: Principal,
    addr: StateAddress,
    lock: { id: string; infoJson: string },
    door: Door | undefined,
    step: StatementStep | undefined,
  ): Promise<HeldLock | undefined> {
    const record = this.audit.inStatement(acquireEvent(principal, addr, lock.id, door));
    const found = await oneStatement(step, () =>
      this.locks.acquireAtOnce(
        (params) => this.repo.sharedStateOfLiveUnit(params, addr),
        { id: lock.id, info: lock.infoJson, principal: principal.subject },
        step ? [record.insert, (params, when) => step.insert(params, when)] : [record.insert],
      ),
    );
    if (found.outcome === 'won') {
      record.stored();
      this.metrics?.lockAcquired(door);
      return found.lock;
    }
    if (found.outcome !== 'held') return undefined;
    const holder = found.lock;
    if (holder.principal === principal.subject && holder.id === lock.id) return holder;
    this.metrics?.lockConflict(door);
    throw lockConflict(addr, holder);
  }

  async release(
    principal: Principal,
    addr: StateAddress,
    lockId: string,
    door: Door = 'api',
  ): Promise<void> {
    assertUnitName(addr.unit);
    await this.authz.authorize(principal, 'unit.lock', addr);
    this.hints.forget(addr, principal.subject);
    if (await this.releaseAtOnce(principal, addr, lockId, door)) return;
    // Nothing was deleted: the transactional path says why (or finds a retried release).
    await this.repo.transaction(async (m) => {
      const state = await this.findStateRow(m, addr, true);
      if (state && (await this.locks.deleteIfHeldBy(m, state.id, lockId, principal.subject))) {
        await this.released(m, principal, addr, state.id, lockId, door);
        return;
      }
      const holder = state ? await this.locks.holderOf(m, state.id) : null;
      if (holder === null) {
        if (state?.last_lock_id === lockId && state.last_lock_principal === principal.subject) {
          return; // a retried release whose first answer was lost
        }
        throw new DomainError(
          'lock_not_held',
          `lock ${lockId} is not held on ${addr.unit} (workspace ${addr.workspace}); was it force-unlocked?`,
        );
      }
      if (holder.id !== lockId) {
        throw new DomainError(
          'lock_mismatch',
          `lock ${lockId} does not match the held lock ${holder.id} on ${addr.unit} (workspace ${addr.workspace})`,
          holder,
        );
      }
      throw new DomainError(
        'locked',
        `lock ${lockId} is held by ${holder.principal}; only its holder releases it (others need force-unlock)`,
        holder,
      );
    });
  }

  /**
   * The holder's release as one autocommit statement (`LockRepository.releaseAtOnce`): the
   * state row locked for update, the lock row deleted when the ID and principal match, the
   * released lock remembered on the state, and the audit row. False when nothing was deleted.
   * It locks the state row before the lock row, as `findStateRow` does, so it cannot deadlock
   * with an acquire (see `acquireAtOnce`).
   */
  private async releaseAtOnce(
    principal: Principal,
    addr: StateAddress,
    lockId: string,
    door: Door,
    step?: StatementStep,
  ): Promise<boolean> {
    const record = this.audit.inStatement(releaseEvent(principal, addr, lockId, door));
    const released = await oneStatement(step, () =>
      this.locks.releaseAtOnce(
        (params) => this.repo.updatableStateOf(params, addr),
        { id: lockId, principal: principal.subject },
        (params, from) => this.repo.releasedLockRecord(params, from, lockId, principal.subject),
        step ? [record.insert, (params, when) => step.insert(params, when)] : [record.insert],
      ),
    );
    if (released) record.stored();
    return released;
  }

  /**
   * The S3 door's DELETE of a lock object, which carries no lock ID: the holder's principal
   * releases its own lock; anyone else's DELETE is a force-unlock (authorised and audited).
   * Answers whether a lock was removed. `options.precondition` sees the held lock (S3's
   * `If-Match`) and may refuse; `options.inTransaction` commits with a removal — and only with
   * one: releasing a lock nobody holds changes nothing and is not recorded.
   */
  async unlockAsPrincipal(
    principal: Principal,
    addr: StateAddress,
    door: Door,
    options: UnlockOptions = {},
  ): Promise<boolean> {
    assertUnitName(addr.unit);
    await this.authz.authorize(principal, 'unit.lock', addr);
    const hint = this.hints.get(addr, principal.subject);
    this.hints.forget(addr, principal.subject);
    if (!options.inTransaction || options.inStatement) {
      // The common case — the caller's own lock, taken through this process — in one statement:
      // the release of the lock ID it was seen to take, which deletes nothing unless that very
      // lock is still the caller's. A client that sends If-Match needs the holder read first.
      if (
        hint !== undefined &&
        !options.precondition &&
        (await this.releaseAtOnce(principal, addr, hint, door, options.inStatement))
      ) {
        return true;
      }
      // Otherwise in two statements: the holder read, then the one-statement release of
      // exactly that lock. Anything else (no lock, another's lock, a lock that changed hands in
      // between) is the transactional path's to decide.
      const held = await this.locks.holderAt((params) => this.repo.stateOf(params, addr));
      if (held && held.principal === principal.subject) {
        options.precondition?.(held);
        if (await this.releaseAtOnce(principal, addr, held.id, door, options.inStatement)) {
          return true;
        }
      }
    }
    const outcome = await this.repo.transaction(async (m) => {
      const state = await this.findStateRow(m, addr, true);
      const holder = state ? await this.locks.holderOf(m, state.id) : null;
      options.precondition?.(holder);
      if (!state || !holder) return 'none' as const;
      if (holder.principal !== principal.subject) return 'other' as const;
      await options.inTransaction?.(m);
      await this.locks.deleteIfHeldBy(m, state.id, holder.id, principal.subject);
      await this.released(m, principal, addr, state.id, holder.id, door);
      return 'released' as const;
    });
    switch (outcome) {
      case 'none':
        return false;
      case 'released':
        return true;
      case 'other':
        return (await this.forceUnlock(principal, addr, door, options)) !== undefined;
    }
  }

  /** After its holder's release: remembered on the state (for a retried release) and audited. */
  private async released(
    m: EntityManager,
    principal: Principal,
    addr: StateAddress,
    stateId: string,
    lockId: string,
    door: Door,
  ): Promise<void> {
    await this.repo.recordReleasedLock(m, stateId, lockId, principal.subject);
    await this.audit.recordIn(m, releaseEvent(principal, addr, lockId, door));
  }

  /** Removes any lock; needs `unit.force-unlock`; always audited. Undefined when none was held. */
  async forceUnlock(
    principal: Principal,
    addr: StateAddress,
    door: Door,
    options: UnlockOptions = {},
  ): Promise<HeldLock | undefined> {
    assertUnitName(addr.unit);
    try {
      await this.authz.authorize(principal, 'unit.force-unlock', addr);
    } catch (e) {
      this.audit.record(
        changeEvent(principal, 'lock.force_unlock', {
          outcome: 'denied',
          action: 'unit.force-unlock',
          unit: addr.unit,
          workspace: addr.workspace,
          door,
        }),
      );
      throw e;
    }
    const removed = await this.repo.transaction(async (m) => {
      const state = await this.findStateRow(m, addr, true);
      if (options.precondition) {
        options.precondition(state ? await this.locks.holderOf(m, state.id) : null);
      }
      const lock = state ? await this.locks.deleteAny(m, state.id) : undefined;
      if (lock) await options.inTransaction?.(m);
      await this.audit.recordIn(
        m,
        changeEvent(principal, 'lock.force_unlock', {
          action: 'unit.force-unlock',
          unit: addr.unit,
          workspace: addr.workspace,
          door,
          details: lock
            ? { lock_id: lock.id, holder: lock.principal, held_since: lock.createdAt.toISOString() }
            : { lock_id: null },
        }),
      );
      return lock;
    });
    if (removed) this.metrics?.forceUnlocked(door);
    return removed;
  }

  /**
   * The held lock of a state, or null, for a door that shows it beside what the caller was
   * already allowed to see (the TFE workspace's `locked`): no authorization of its own.
   */
  async heldLockOf(addr: StateAddress): Promise<HeldLock | null> {
    return (await this.locks.holderAt((params) => this.repo.stateOf(params, addr))) ?? null;
  }

  /** The held lock with its LockInfo exactly as sent (`lock_not_found` when unlocked). */
  async holder(principal: Principal, addr: StateAddress): Promise<HeldLock> {
    assertUnitName(addr.unit);
    await this.authz.authorize(principal, 'unit.read', addr);
    const holder = await this.locks.holderAt((params) => this.repo.stateOf(params, addr));
    if (!holder) {
      throw new DomainError(
        'lock_not_found',
        `${addr.unit} (workspace ${addr.workspace}) is not locked`,
      );
    }
    return holder;
  }

  async get(principal: Principal, addr: StateAddress): Promise<LockView> {
    return lockView(addr.unit, addr.workspace, await this.holder(principal, addr));
  }

  /** How many locks are held, and the oldest one's age: for the metrics, so it names nothing. */
  heldSummary(): Promise<HeldLocksSummary> {
    return this.locks.heldSummary();
  }

  /** Held locks the caller may read (`unit.read` in that workspace, as for GET /lock), with their age. */
  async list(principal: Principal): Promise<LockView[]> {
    const rows = await this.locks.list();
    const now = Date.now();
    const out: LockView[] = [];
    for (const r of rows) {
      if (await this.authz.can(principal, 'unit.read', { unit: r.unit, workspace: r.workspace })) {
        out.push(
          lockView(
            r.unit,
            r.workspace,
            { id: r.lock_id, infoJson: r.info, principal: r.principal, createdAt: r.created_at },
            now,
          ),
        );
      }
    }
    return out;
  }

  /**
   * The state row of a door's LOCK, created (with its unit) when absent, and share-locked so
   * the acquire waits for an in-flight version commit of the same state.
   */
  private async ensureStateForLock(
    m: EntityManager,
    principal: Principal,
    addr: StateAddress,
  ): Promise<string> {
    const { unit } = await this.repo.ensureUnit(m, addr.unit, principal.subject);
    const state = await this.repo.ensureState(m, unit.id, addr.workspace);
    await this.repo.shareStateRow(m, state.id);
    return state.id;
  }

  /**
   * The state row of an existing unit, or undefined; used to release and inspect locks. With
   * `forUpdate` the row is locked first, in the same order acquire takes it (state row, then
   * lock row), so a release and a concurrent acquire can never deadlock.
   */
  private async findStateRow(
    m: EntityManager,
    addr: StateAddress,
    forUpdate = false,
  ): Promise<Pick<StateRow, 'id' | 'last_lock_id' | 'last_lock_principal'> | undefined> {
    const unit = await this.repo.findUnit(m, addr.unit);
    if (!unit) return undefined;
    const state = await this.repo.findState(m, unit.id, addr.workspace);
    return state && forUpdate ? this.repo.lockStateRow(m, state.id) : state;
  }
}

/**
 * A one-statement change, run again on deadlock or serialization failure; a failure caused by
 * `step` (the S3 door's replay record refusing a signature used before) becomes its error.
 */
async function oneStatement<T>(step: StatementStep | undefined, run: () => Promise<T>): Promise<T> {
  try {
    return await statementRetried(run);
  } catch (e) {
    if (step) step.failed(e);
    throw e;
  }
}

/** The audit event of an acquire that won, the same on both paths. */
function acquireEvent(
  principal: Principal,
  addr: StateAddress,
  lockId: string,
  door: Door | undefined,
): SecurityEventInput {
  return changeEvent(principal, 'lock.acquire', {
    action: 'unit.lock',
    unit: addr.unit,
    workspace: addr.workspace,
    door,
    details: { lock_id: lockId },
  });
}

/** The audit event of a holder's release, the same on both paths. */
function releaseEvent(
  principal: Principal,
  addr: StateAddress,
  lockId: string,
  door: Door,
): SecurityEventInput {
  return changeEvent(principal, 'lock.release', {
    action: 'unit.lock',
    ...addr,
    door,
    details: { lock_id: lockId },
  });
}

function lockConflict(addr: StateAddress, holder: HeldLock): DomainError {
  return new DomainError(
    'lock_conflict',
    `${addr.unit} (workspace ${addr.workspace}) is locked by ${holder.principal} (lock ${holder.id})`,
    holder,
  );
}

/** The parsed LockInfo, or undefined when it does not parse (the caller refuses it later). */
function lockInfoOrUndefined(
  body: Buffer,
  generateId: boolean,
): ReturnType<typeof parseLockInfo> | undefined {
  try {
    return parseLockInfo(body, generateId);
  } catch {
    return undefined;
  }
}
