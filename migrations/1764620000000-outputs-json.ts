import { QueryRunner } from 'typeorm';
import type { LeveledMigration } from '../src/database/schema-compat';

/**
 * A version's outputs as `json`, not `jsonb`: Terraform can write a NUL inside an output value
 * (`base64decode("AA==")`), which `jsonb` refuses (`\u0000`) and `json` keeps as written. Nothing
 * queries inside the column; it is read back whole.
 */
export class OutputsJson1764620000000 implements LeveledMigration {
  name = 'OutputsJson1764620000000';
  /** Contract: a retyped column (code before this migration declares `jsonb`). */
  readonly contractFloor = 1764620000000;

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "versions" ALTER COLUMN "outputs" TYPE json USING "outputs"::json`);
  }

  /** Fails when a stored value holds a NUL (jsonb cannot hold it): such a state needs `json`. */
  async down(q: QueryRunner): Promise<void> {
    await q.query(
      `ALTER TABLE "versions" ALTER COLUMN "outputs" TYPE jsonb USING "outputs"::jsonb`,
    );
  }
}
