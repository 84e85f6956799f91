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
  return onPooledClient(ds, pool, text, values, async (client) => {
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

/**
 * Whether `ds` is a PostgreSQL server of its own (not the embedded database), which answers a
 * `COPY … TO STDOUT (FORMAT binary)` (`pooledBinaryCopy`).
 */
export function binaryCopyAllowed(ds: DataSource): boolean {
  return (
    NAMED_STATEMENTS.has(ds) && (ds.driver as unknown as { master?: Pool }).master !== undefined
  );
}

/**
 * Runs `COPY (query) TO STDOUT (FORMAT binary)` on `ds`'s pool and answers its rows, each value
 * its bytes as stored (a `bytea` as is, an `int4` as 4 bytes big-endian), null for NULL. A value
 * read this way is neither encoded by the database nor decoded by this process: `pg` hands
 * COPY data over as bytes, where every value of an ordinary result is first read as UTF-8 text
 * (a `bytea` as hex or base64 text, encoded by the server and decoded here, ~4× the CPU of the
 * copy on both sides). COPY takes no parameters: `query` is complete SQL, its values literals
 * (`escapeLiteral`). Only where `binaryCopyAllowed(ds)`. Failures are told and thrown as
 * `pooledRows` tells and throws them.
 */
export async function pooledBinaryCopy(
  ds: DataSource,
  query: string,
): Promise<(Buffer | null)[][]> {
  const pool = (ds.driver as unknown as { master?: Pool }).master;
  if (!pool) throw new Error('pooledBinaryCopy needs a pg pool');
  const text = `COPY (${query}) TO STDOUT (FORMAT binary)`;
  return onPooledClient(ds, pool, text, [], async (client) => {
    const copy = new BinaryCopyOut(text);
    // A submittable: the client hands it the protocol messages (no promise of its own).
    void client.query(copy as never);
    return parseBinaryCopy(await copy.done);
  });
}

/** The `pg` submittable of one `COPY … TO STDOUT`: what it receives, as copies of its bytes. */
class BinaryCopyOut {
  readonly chunks: Buffer[] = [];
  readonly done: Promise<Buffer[]>;
  private settle!: { resolve: (c: Buffer[]) => void; reject: (e: unknown) => void };
  private failed = false;

  constructor(readonly text: string) {
    this.done = new Promise((resolve, reject) => (this.settle = { resolve, reject }));
  }

  submit(connection: { query(text: string): void }): void {
    connection.query(this.text);
  }

  handleCopyData(msg: { chunk: Buffer }): void {
    // The parser may reuse the buffer the chunk is a view of: it is copied (with `copy`, a
    // memcpy: `Buffer.from(buffer)` copies byte by byte).
    const copy = Buffer.allocUnsafe(msg.chunk.length);
    msg.chunk.copy(copy);
    this.chunks.push(copy);
  }

  handleError(e: unknown): void {
    this.failed = true;
    this.settle.reject(e);
  }

  handleReadyForQuery(): void {
    if (!this.failed) this.settle.resolve(this.chunks);
  }

  handleCopyInResponse(connection: { sendCopyFail(msg: string): void }): void {
    connection.sendCopyFail('not a COPY FROM');
  }

  handleRowDescription(): void {}
  handleDataRow(): void {}
  handleCommandComplete(): void {}
  handleEmptyQuery(): void {}
  handlePortalSuspended(): void {}
}

const COPY_SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');

/** The rows of a binary COPY's output (header, tuples, trailer; PostgreSQL's documented format). */
export function parseBinaryCopy(chunks: Buffer[]): (Buffer | null)[][] {
  // The server sends the header with the first row and the trailer (-1) on its own: a lone
  // trailer is dropped before joining, so one row of one MiB is not copied a second time.
  const parts = chunks.filter((c) => !(c.length === 2 && c.readInt16BE(0) === -1));
  const buf = parts.length === 1 ? parts[0] : Buffer.concat(parts);
  const bad = (): never => {
    throw new Error('malformed binary COPY output');
  };
  if (buf.length < 19 || !buf.subarray(0, 11).equals(COPY_SIGNATURE)) bad();
  let at = 15 + 4 + buf.readUInt32BE(15);
  const rows: (Buffer | null)[][] = [];
  while (at < buf.length) {
    if (at + 2 > buf.length) bad();
    const fields = buf.readInt16BE(at);
    at += 2;
    if (fields === -1) break;
    const row: (Buffer | null)[] = [];
    for (let i = 0; i < fields; i++) {
      if (at + 4 > buf.length) bad();
      const len = buf.readInt32BE(at);
      at += 4;
      if (len === -1) {
        row.push(null);
        continue;
      }
      if (len < 0 || at + len > buf.length) bad();
      row.push(buf.subarray(at, at + len));
      at += len;
    }
    rows.push(row);
  }
  return rows;
}

/**
 * Lends `run` a connection of `pool` for one statement `text`: a failure is told to the data
 * source's logger and thrown as TypeORM throws it (`QueryFailedError`), and the connection goes
 * back to the pool, dropped when it broke meanwhile.
 */
async function onPooledClient<T>(
  ds: DataSource,
  pool: Pool,
  text: string,
  values: unknown[],
  run: (client: PoolClient) => Promise<T>,
): Promise<T> {
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
    return await run(client);
  } catch (e) {
    ds.logger.logQueryError(e as Error, text, values);
    throw new QueryFailedError(text, values, e as Error);
  } finally {
    client.removeListener('error', onError);
    client.release(broken);
  }
}
