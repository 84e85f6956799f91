/**
 * On the embedded database: a count of the statements run so far that may have changed data.
 * This process is the only client of that database (the data-dir lock sees to it), so a value
 * read outside a transaction stays true for as long as the count has not moved. Undefined on
 * PostgreSQL, where other replicas write too: nothing may be kept there on its strength.
 */
export class DataChanges {
  constructor(private readonly read: () => number | undefined) {}

  count(): number | undefined {
    return this.read();
  }
}
