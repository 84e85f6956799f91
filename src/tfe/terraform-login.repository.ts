import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { sqlRows } from '../database/sql';

export type LoginStage = 'authorize' | 'code';

/**
 * At most this many logins in flight at once at each stage: unauthenticated callers start them,
 * but only a person back from the provider makes a code, so one stage filling up does not stop
 * the other (a sign-in the provider has answered finishes however many others wait).
 */
export const MAX_LOGINS_IN_FLIGHT = 10_000;

/** The `terraform_logins` rows: logins in flight, each used once. */
@Injectable()
export class TerraformLoginRepository {
  constructor(private readonly db: DataSource) {}

  /**
   * Adds a login in flight, unless `MAX_LOGINS_IN_FLIGHT` unexpired ones of its stage already
   * exist (false); expired rows are dropped on the way.
   */
  async add(
    keySha256: string,
    stage: LoginStage,
    data: Record<string, unknown>,
    ttlSeconds: number,
  ): Promise<boolean> {
    return this.db.transaction(async (m) => {
      await m.query('DELETE FROM terraform_logins WHERE expires_at < now()');
      const rows = await sqlRows<{ key_sha256: string }>(
        m,
        `INSERT INTO terraform_logins (key_sha256, stage, data, expires_at)
         SELECT $1, $2, $3::jsonb, now() + make_interval(secs => $4)
         WHERE (SELECT count(*) FROM terraform_logins WHERE stage = $2) < $5
         RETURNING key_sha256`,
        [keySha256, stage, JSON.stringify(data), ttlSeconds, MAX_LOGINS_IN_FLIGHT],
      );
      return rows.length === 1;
    });
  }

  /**
   * Takes a login in flight out, in one statement: of two callers presenting the same secret,
   * one gets the row and the other nothing. An expired row is taken out too, and reported.
   */
  async take(
    keySha256: string,
    stage: LoginStage,
  ): Promise<{ data: Record<string, unknown>; expired: boolean } | undefined> {
    const rows = await sqlRows<{ data: Record<string, unknown>; expired: boolean }>(
      this.db.manager,
      `DELETE FROM terraform_logins WHERE key_sha256 = $1 AND stage = $2
       RETURNING data, expires_at <= now() AS expired`,
      [keySha256, stage],
    );
    return rows[0];
  }
}
