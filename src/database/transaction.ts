import { Logger } from '@nestjs/common';
import type { DataSource, EntityManager, QueryRunner } from 'typeorm';
import { sqlRows } from './sql';

const logger = new Logger('database');

/** How many times a transaction is tried before a deadlock or serialization failure is final. */
export const TRANSACTION_ATTEMPTS = 4;

/** 40P01 deadlock_detected, 40001 serialization_failure: the database rolled everything back. */
export function isRetryableTransactionError(e: unknown): boolean {
  const code =
    (e as { driverError?: { code?: string }; code?: string }).driverError?.code ??
    (e as { code?: string }).code;
  return code === '40P01' || code === '40001';
}

/**
 * Work done inside one transaction. It may run more than once: a deadlock or serialization
 * failure rolls the whole transaction back and the work is run again from the start. So the body
 * must touch nothing but the database through `m` — no network calls, no in-process caches, no
 * queued events, no counters — and keep no state of its own between runs. Anything that must
 * happen once goes after `transaction(...)` returns, or is handed to `afterCommit(m, …)`.
 */
export type TransactionWork<T> = (m: EntityManager) => Promise<T>;

/** Data sources whose sessions begin READ COMMITTED (`noteDefaultIsolation`). */
const READ_COMMITTED_BY_DEFAULT = new WeakSet<DataSource>();

/**
 * Reads, once at start, whether the database's sessions begin READ COMMITTED — PostgreSQL's
 * default, PGlite's always — so that `transaction` need not say so in a statement of its own
 * (`SET TRANSACTION ISOLATION LEVEL`, one round trip of every transaction). A session option
 * (`-c default_transaction_isolation=…` at connect) would do the same, but PgBouncer refuses
 * startup options. The level is read from the database's own settings (`ALTER DATABASE`/`ALTER
 * ROLE … SET`, postgresql.conf), which every connection of the pool shares; a server started
 * where it is anything else keeps setting READ COMMITTED on every transaction. Changing it
 * while servers run takes effect for them at their next start (README, "PostgreSQL").
 */
export async function noteDefaultIsolation(db: DataSource): Promise<boolean> {
  const rows = await sqlRows<{ level: string }>(
    db.manager,
    "SELECT current_setting('default_transaction_isolation') AS level",
  );
  const readCommitted = rows[0]?.level === 'read committed';
  if (readCommitted) READ_COMMITTED_BY_DEFAULT.add(db);
  else READ_COMMITTED_BY_DEFAULT.delete(db);
  return readCommitted;
}

/**
 * The one way to open a transaction: READ COMMITTED, retried (with jitter) on deadlock or
 * serialization failure up to `TRANSACTION_ATTEMPTS` times. On the embedded database (one
 * connection) nothing may query outside `m` while the work runs.
 */
export async function transaction<T>(db: DataSource, work: TransactionWork<T>): Promise<T> {
  return retried(async () => {
    const effects: (() => void)[] = [];
    const body = async (m: EntityManager): Promise<T> => {
      AFTER_COMMIT.set(m, effects);
      try {
        return await work(m);
      } finally {
        AFTER_COMMIT.delete(m);
      }
    };
    const result = READ_COMMITTED_BY_DEFAULT.has(db)
      ? await db.transaction(body)
      : await db.transaction('READ COMMITTED', body);
    runAfterCommit(effects);
    return result;
  });
}

/**
 * Runs a single autocommit statement (`run` sends exactly one, outside any transaction), tried
 * again like a transaction when the database answers deadlock or serialization failure: such a
 * statement was rolled back whole, so running it again is safe. For the lock fast paths, whose
 * lock order makes a deadlock impossible (see `LocksService`); this keeps a future statement
 * that breaks the order from failing a request instead of waiting a moment.
 */
export function statementRetried<T>(run: () => Promise<T>): Promise<T> {
  return retried(run);
}

/** `attempt`, run again (with jitter) on deadlock or serialization failure, up to the limit. */
async function retried<T>(attempt: () => Promise<T>): Promise<T> {
  for (let n = 1; ; n++) {
    try {
      return await attempt();
    } catch (e) {
      if (n >= TRANSACTION_ATTEMPTS || !isRetryableTransactionError(e)) throw e;
      await new Promise((r) => setTimeout(r, Math.random() * 20 * n));
    }
  }
}

/** The effects each open `transaction(...)` runs once it has committed, by its entity manager. */
const AFTER_COMMIT = new WeakMap<EntityManager, (() => void)[]>();

/**
 * Runs `effect` once the transaction `m` belongs to has committed — and never when it rolls back
 * or is tried again. This is how a body does what must happen once (log a line, tell an
 * observer) without breaking the retry rule. `m` must come from `transaction(...)`: anything
 * else is a programming error and throws at once, so it cannot go unnoticed.
 */
export function afterCommit(m: EntityManager, effect: () => void): void {
  const effects = AFTER_COMMIT.get(m);
  if (!effects) throw new Error('afterCommit: the entity manager is not a transaction(...) one');
  effects.push(effect);
}

function runAfterCommit(effects: (() => void)[]): void {
  for (const effect of effects) {
    try {
      effect();
    } catch (e) {
      // The change is committed; a failing effect (a log line, a counter) must not report it
      // as failed to the caller, who would then retry a write that is already stored.
      logger.error(
        `an effect after a commit failed (the change is stored): ${e instanceof Error ? e.message : String(e)}`,
      );
    }
  }
}

/**
 * Session advisory-lock keys, one per purpose, so unrelated start-up steps never wait for each
 * other. The migration key must never change: replicas of older releases take it too.
 */
export const ADVISORY_LOCK = {
  migrations: 7_337_001,
  sharedSecrets: 7_337_002,
  bootstrapToken: 7_337_003,
  signingKeys: 7_337_004,
} as const;

export type AdvisoryLockKey = (typeof ADVISORY_LOCK)[keyof typeof ADVISORY_LOCK];

/**
 * Runs `work` on one dedicated connection holding the session advisory lock `key`, released
 * (and the connection returned) however `work` ends. Replicas doing the same `key` at the same
 * time run one after the other. On the embedded database the lock costs nothing but keeps the
 * same code path; `work` must use the runner it is given.
 */
export async function withAdvisoryLock<T>(
  db: DataSource,
  key: AdvisoryLockKey,
  work: (runner: QueryRunner) => Promise<T>,
): Promise<T> {
  const runner = db.createQueryRunner();
  await runner.connect();
  try {
    await runner.query('SELECT pg_advisory_lock($1)', [key]);
    try {
      return await work(runner);
    } finally {
      await runner.query('SELECT pg_advisory_unlock($1)', [key]);
    }
  } finally {
    await runner.release();
  }
}
