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

/**
 * Lends one of `ds`'s pool connections to `use`. As through TypeORM, a connection that cannot be
 * had fails with the driver's own error, and a failed statement is told to the data source's
 * logger and thrown as a `QueryFailedError`.
 */
async function withPooledClient<T>(
  ds: DataSource,
  pool: Pool,
  text: string,
  values: unknown[],
  use: (client: PoolClient) => Promise<T>,
): Promise<T> {
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
    return await use(client);
  } catch (e) {
    // pg gave up waiting (query_timeout) but the connection still carries the statement: were
    // it lent again, the next holder would wait behind whatever the server still sends.
    if ((e as Error | undefined)?.message === 'Query read timeout') broken ??= e as Error;
    ds.logger.logQueryError(e as Error, text, values);
    throw new QueryFailedError(text, values, e as Error);
  } finally {
    client.removeListener('error', onError);
    client.release(broken);
  }
}

/** The data source's `pg` pool, or undefined when it has none. */
function poolOf(ds: DataSource): Pool | undefined {
  return (ds.driver as unknown as { master?: Pool }).master;
}

/** Runs one statement on `ds`'s pool and answers its rows (`sqlRows` of the pooled path). */
export async function pooledRows<T>(ds: DataSource, text: string, values: unknown[]): Promise<T[]> {
  const pool = poolOf(ds);
  if (!pool) return await ds.query<T[]>(text, values);
  return await withPooledClient(ds, pool, text, values, async (client) => {
    const name = statementName(ds, text);
    const config: QueryConfig = name === undefined ? { text, values } : { name, text, values };
    try {
      return (await client.query(config)).rows as T[];
    } catch (e) {
      if (name === undefined || !namesBroken(e)) throw e;
      namesRefused = true;
      return (await client.query({ text, values })).rows as T[];
    }
  });
}

/** Whether `ds` talks to a PostgreSQL server (not the embedded database), which can `COPY` out. */
export function canCopyOut(ds: DataSource): boolean {
  return NAMED_STATEMENTS.has(ds) && poolOf(ds) !== undefined;
}

/**
 * Runs `select` on a connection of `ds`'s pool as `COPY (select) TO STDOUT (FORMAT binary)` and
 * answers its rows, each value as the bytes of its binary form (null for NULL). It is the one way
 * `pg` hands over a value's bytes as they are: a query's values come as text (a `bytea` as hex,
 * twice its size, that the server encodes and this process decodes), but COPY's data messages
 * are passed on raw, so a `bytea` costs no encoding on either side. COPY takes no parameters:
 * `select` must hold its values as literals. Only for `canCopyOut` data sources, and for answers
 * small enough to hold in memory.
 */
export async function pooledCopyRows(ds: DataSource, select: string): Promise<(Buffer | null)[][]> {
  const pool = poolOf(ds);
  if (!pool || !canCopyOut(ds)) throw new TypeError('COPY out needs a PostgreSQL server');
  const text = `COPY (${select}) TO STDOUT (FORMAT binary)`;
  const bytes = await withPooledClient(ds, pool, text, [], (client) => {
    const copy = new CopyOut(text);
    client.query(copy as never);
    return copy.done;
  });
  return binaryCopyRows(bytes);
}

const COPY_SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');

/** The rows of a binary COPY (PostgreSQL's "binary format" of `COPY`); throws on anything else. */
export function binaryCopyRows(bytes: Buffer): (Buffer | null)[][] {
  const fail = (why: string): never => {
    throw new Error(`malformed binary COPY data: ${why}`);
  };
  const need = (at: number, n: number): void => {
    if (at + n > bytes.length) fail('truncated');
  };
  need(0, COPY_SIGNATURE.length + 8);
  if (!bytes.subarray(0, COPY_SIGNATURE.length).equals(COPY_SIGNATURE)) fail('no signature');
  // Bit 16 would add an OID field to every row, and a reader must refuse bits it does not
  // know: a `COPY (query)` sets none.
  if (bytes.readUInt32BE(COPY_SIGNATURE.length) !== 0) fail('flags set');
  let at = COPY_SIGNATURE.length + 4;
  const extension = bytes.readUInt32BE(at);
  at += 4;
  need(at, extension);
  at += extension;
  const rows: (Buffer | null)[][] = [];
  for (;;) {
    need(at, 2);
    const fields = bytes.readInt16BE(at);
    at += 2;
    if (fields === -1) break;
    if (fields < 0) fail('negative field count');
    const row: (Buffer | null)[] = [];
    for (let i = 0; i < fields; i++) {
      need(at, 4);
      const length = bytes.readInt32BE(at);
      at += 4;
      if (length === -1) {
        row.push(null);
        continue;
      }
      if (length < 0) fail('negative length');
      need(at, length);
      row.push(bytes.subarray(at, at + length));
      at += length;
    }
    rows.push(row);
  }
  if (at !== bytes.length) fail('bytes after the trailer');
  return rows;
}

/**
 * A `pg` custom query (a "submittable": the client calls `submit`, then a `handle…` method per
 * message of the answer) that gathers a COPY's data messages. A message's bytes are a view of
 * the connection's receive buffer, which later messages may overwrite, so each is copied out.
 */
class CopyOut {
  readonly done: Promise<Buffer>;
  private readonly parts: Buffer[] = [];
  private bytes = 0;
  private settle!: (error: Error | undefined) => void;
  /**
   * Set by the client when it times the query (`query_timeout`): told of the end, so that it
   * stops its timer, and the client's own timeout error reaches `done` through `handleError`.
   */
  callback?: (error: Error | null) => void;

  constructor(readonly text: string) {
    this.done = new Promise((resolve, reject) => {
      this.settle = (error) => {
        this.callback?.(error ?? null);
        this.callback = undefined;
        if (error) reject(error);
        else resolve(Buffer.concat(this.parts, this.bytes));
      };
    });
  }

  submit(connection: { query(text: string): void }): void {
    connection.query(this.text);
  }

  handleCopyData(message: { chunk: Buffer }): void {
    this.parts.push(Buffer.from(message.chunk));
    this.bytes += message.chunk.length;
  }

  handleCommandComplete(): void {}

  /**
   * Answers no COPY TO sends. They cannot come from the statements this runs, but pg would
   * call them on the active query, and a missing handler would throw inside its socket reader.
   */
  handleRowDescription(): void {
    this.settle(new Error('a COPY TO STDOUT was answered with rows'));
  }

  handleDataRow(): void {}

  handleEmptyQuery(): void {
    this.settle(new Error('a COPY TO STDOUT was answered as an empty query'));
  }

  /** A COPY FROM, which would wait for data forever: refused, so the server ends it. */
  handleCopyInResponse(connection: { sendCopyFail(message: string): void }): void {
    connection.sendCopyFail('not a COPY TO STDOUT');
    this.settle(new Error('a COPY TO STDOUT was answered as a COPY FROM'));
  }

  handleReadyForQuery(): void {
    this.settle(undefined);
  }

  /** An error answer (the client then forgets this query), or the connection failing. */
  handleError(error: Error): void {
    this.settle(error);
  }
}
