import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { sqlRows } from './sql';
import { MIGRATION_LOCK_KEY } from './migrator';

/**
 * Server-wide generated secrets (STS HMAC keys, …) that every replica must share: kept in the
 * `settings` table and created once, under the migration advisory lock, by whichever replica
 * needs them first.
 */
@Injectable()
export class SharedSecrets {
  constructor(private readonly db: DataSource) {}

  async getOrCreate(name: string, generate: () => string): Promise<string> {
    const existing = await this.get(name);
    if (existing !== undefined) return existing;
    const runner = this.db.createQueryRunner();
    await runner.connect();
    try {
      await runner.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
      try {
        await runner.query(
          'INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING',
          [name, generate()],
        );
      } finally {
        await runner.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]);
      }
    } finally {
      await runner.release();
    }
    return (await this.get(name)) as string;
  }

  async get(name: string): Promise<string | undefined> {
    const rows = await sqlRows<{ value: string }>(
      this.db.manager,
      'SELECT value FROM settings WHERE key = $1',
      [name],
    );
    return rows[0]?.value;
  }

  /** Every stored secret whose name starts with `prefix`. */
  async list(prefix: string): Promise<Map<string, string>> {
    const rows = await sqlRows<{ key: string; value: string }>(
      this.db.manager,
      'SELECT key, value FROM settings WHERE left(key, length($1)) = $1',
      [prefix],
    );
    return new Map(rows.map((r) => [r.key.slice(prefix.length), r.value]));
  }
}
