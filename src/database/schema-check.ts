import { DataSource } from 'typeorm';

/**
 * The SQL TypeORM would run to make the database match the entities. After all migrations
 * have run this must be empty: a non-empty answer means entities and migrations disagree.
 */
export async function schemaDrift(dataSource: DataSource): Promise<string[]> {
  const sql = await dataSource.driver.createSchemaBuilder().log();
  return sql.upQueries.map((q) => q.query);
}
