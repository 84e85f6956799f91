import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { insertSettingIfAbsent, readSetting, readSettingsWithPrefix } from './settings.repository';
import { ADVISORY_LOCK, withAdvisoryLock } from './transaction';

/**
 * Server-wide generated secrets (STS HMAC keys, …) that every replica must share: kept in the
 * `settings` table and created once, under their own advisory lock, by whichever replica
 * needs them first.
 */
@Injectable()
export class SharedSecrets {
  constructor(private readonly db: DataSource) {}

  async getOrCreate(name: string, generate: () => string): Promise<string> {
    const existing = await this.get(name);
    if (existing !== undefined) return existing;
    await withAdvisoryLock(this.db, ADVISORY_LOCK.sharedSecrets, (runner) =>
      insertSettingIfAbsent(runner, name, generate()),
    );
    return (await this.get(name)) as string;
  }

  async get(name: string): Promise<string | undefined> {
    return readSetting(this.db, name);
  }

  /** Every stored secret whose name starts with `prefix`. */
  async list(prefix: string): Promise<Map<string, string>> {
    return readSettingsWithPrefix(this.db, prefix);
  }
}
