import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { sqlRows } from '../database/sql';

/** SQL for the buckets the S3 door serves (when each was first served). */
@Injectable()
export class BucketRepository {
  constructor(private readonly db: DataSource) {}

  /**
   * Records that these buckets are served from now on, keeping the time of any already
   * recorded. One statement, safe when replicas start together: the primary key lets the first
   * insert of a name win and the others do nothing.
   */
  async recordServed(names: readonly string[]): Promise<void> {
    await sqlRows(
      this.db.manager,
      `INSERT INTO s3_buckets (name) SELECT unnest($1::text[])
       ON CONFLICT (name) DO NOTHING`,
      [names],
    );
  }

  /** When each of these buckets was first served (names never recorded are absent). */
  async firstServed(names: readonly string[]): Promise<Map<string, Date>> {
    const rows = await sqlRows<{ name: string; first_served_at: Date }>(
      this.db.manager,
      'SELECT name, first_served_at FROM s3_buckets WHERE name = ANY($1::text[])',
      [names],
    );
    return new Map(rows.map((r) => [r.name, new Date(r.first_served_at)]));
  }
}
