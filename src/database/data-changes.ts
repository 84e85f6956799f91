import { WatchedTables } from './statement-changes';

/** A count that moves at every statement queued that may change the tables it was asked for. */
export interface ChangeCount {
  /** Undefined on PostgreSQL: nothing may be kept on its strength there. */
  count(): number | undefined;
}

/**
 * On the embedded database: a count of the statements run so far that may have changed data of
 * the watched tables. This process is the only client of that database (the data-dir lock sees
 * to it), so a value read outside a transaction from those tables stays true for as long as the
 * count has not moved. Undefined on PostgreSQL, where other replicas write too: nothing may be
 * kept there on its strength.
 *
 * A reader gets the count only by naming the tables it reads (`watch`): a statement that names
 * none of the watched tables (an audit insert, a replay-guard row, a token's last use) does not
 * move it (`mayChangeWatched`, src/database/statement-changes.ts).
 */
export class DataChanges {
  constructor(
    private readonly read: () => number | undefined,
    private readonly watched: WatchedTables,
  ) {}

  /**
   * The count for a reader that keeps what it read of `tables` (every table its kept queries
   * read). Call it before the first read: the statements queued before it were not judged
   * against these tables, but they run before any query the reader queues after it.
   */
  watch(tables: readonly string[]): ChangeCount {
    this.watched.add(tables);
    return { count: this.read };
  }
}
