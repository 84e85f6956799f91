import type { EntityManager } from 'typeorm';

/**
 * Runs a statement and returns its rows. TypeORM answers UPDATE and DELETE with
 * `[rows, rowCount]` instead of the rows; this gives the rows for every kind of statement,
 * so `... RETURNING` reads the same whatever the verb.
 */
export async function sqlRows<T>(
  m: EntityManager,
  sql: string,
  params: unknown[] = [],
): Promise<T[]> {
  const result: unknown = await m.query(sql, params);
  if (
    Array.isArray(result) &&
    result.length === 2 &&
    Array.isArray(result[0]) &&
    typeof result[1] === 'number'
  ) {
    return result[0] as T[];
  }
  return result as T[];
}

/**
 * Work another module adds to an operation's own transaction, so both commit or neither does
 * (the S3 door records the signature of a write it accepted).
 */
export type TransactionStep = (m: EntityManager) => Promise<void>;

/**
 * The same work as a `TransactionStep`, for an operation done by one autocommit statement that
 * another module's repository composes: `insert(params, when)` is its CTE body, run only when
 * the SQL condition `when` (the operation made its change) holds, and failing the whole
 * statement when the work cannot be done, so that nothing commits; `failed(e)` turns such a
 * failure of the statement into the step's own error and rethrows anything else.
 */
export interface StatementStep {
  insert(params: SqlParams, when: string): string;
  failed(e: unknown): never;
}

/** Anything statements run on: the pool, a transaction's entity manager or one connection. */
export interface Queryable {
  query(sql: string, params?: unknown[]): Promise<unknown>;
}

/**
 * The parameters of one statement composed from fragments that several repositories write
 * (each writes the SQL of its own tables): `add` takes a value and answers its placeholder, so
 * fragments need not know each other's numbering. Every placeholder is cast: a parameter in a
 * `SELECT` list (an `INSERT … SELECT`) gets no type from the column it goes into.
 */
export class SqlParams {
  readonly values: unknown[] = [];

  add(value: unknown, type: string): string {
    this.values.push(value);
    return `$${this.values.length}::${type}`;
  }
}
