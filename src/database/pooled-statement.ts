import { createHash } from 'node:crypto';
import type { Pool, PoolClient, QueryConfig } from 'pg';
import { DataSource, QueryFailedError } from 'typeorm';

/**
 * The hot one-statement changes (the lock fast paths), run on the data source's `pg` pool
 * itself instead of through a TypeORM QueryRunner and EntityManager (which add a runner, a
 * broadcaster and a result reshaping to every statement), and, where the database keeps a
 * session per connection, as named prepared statements: each connection parses and plans the
 * statement once, and later runs send only its parameters. Everything else TypeORM does for a
 * statement is kept: a failed statement is told to the data source's logger (the database error
 * observer) and thrown as the same `QueryFailedError`, the connection goes back to the pool
 * unharmed, and the statement is counted like any other (`StatementCounts`, in the pool's
 * client class).
 */

/** How many distinct statement texts get a name; later ones run unnamed. */
export const MAX_NAMED_STATEMENTS = 64;

/** Data sources whose connections are sessions of their own (`createDataSource`, not embedded). */
const NAMED_STATEMENTS = new WeakSet<DataSource>();

/**
 * Says that each connection of `ds` is a database session of its own, so a statement prepared
 * on it stays there until it closes (not so on the embedded database, whose one session outlives
 * the pool's connections).
 */
export function allowNamedStatements(ds: DataSource): void {
  NAMED_STATEMENTS.add(ds);
}

/**
 * Names given so far, by statement text. A name is the text's own digest, never a counter: the
 * same name means the same text in every process, so a statement prepared by one replica and
 * found by another behind a pooler that hands server sessions around can only be the same
 * statement (a counter would let replica B's `statehouse_1` run replica A's `statehouse_1`).
 */
const names = new Map<string, string>();
/** Set when the database refused a named statement (a transaction-mode pooler): none from then on. */
let namesRefused = false;

/** The name of a statement text, or undefined when it runs unnamed. */
export function statementName(ds: DataSource, text: string): string | undefined {
  if (namesRefused || !NAMED_STATEMENTS.has(ds)) return undefined;
  let name = names.get(text);
  if (name === undefined && names.size < MAX_NAMED_STATEMENTS) {
    name = `statehouse_${createHash('sha256').update(text).digest('hex').slice(0, 40)}`;
    names.set(text, name);
  }
  return name;
}

/**
 * 26000 invalid_sql_statement_name, 42P05 duplicate_prepared_statement: a pooler between us and
 * the database moved the session (PgBouncer's transaction mode). The statement did not run.
 */
function namesBroken(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return code === '26000' || code === '42P05';
}

/** Runs one statement on `ds`'s pool and answers its rows (`sqlRows` of the pooled path). */
export async function pooledRows<T>(ds: DataSource, text: string, values: unknown[]): Promise<T[]> {
  const pool = (ds.driver as unknown as { master?: Pool }).master;
  if (!pool) return await ds.query<T[]>(text, values);
  // As through TypeORM, a connection that cannot be had fails with the driver's own error.
  const client: PoolClient = await pool.connect();
  // While lent out, a connection that breaks tells only its holder (the pool listens to idle
  // ones): as TypeORM's runner does, it is listened to, and given back broken so the pool
  // drops it instead of lending it again.
  let broken: Error | undefined;
  const onError = (e: Error): void => {
    broken ??= e;
  };
  client.on('error', onError);
  try {
    const name = statementName(ds, text);
    const config: QueryConfig = name === undefined ? { text, values } : { name, text, values };
    try {
      return (await client.query(config)).rows as T[];
    } catch (e) {
      if (name === undefined || !namesBroken(e)) throw e;
      namesRefused = true;
      return (await client.query({ text, values })).rows as T[];
    }
  } catch (e) {
    ds.logger.logQueryError(e as Error, text, values);
    throw new QueryFailedError(text, values, e as Error);
  } finally {
    client.removeListener('error', onError);
    client.release(broken);
  }
}
