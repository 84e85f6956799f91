import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The schema's compatibility record (src/database/schema-compat.ts): one row saying which schema
 * level the database is at, the oldest code level that may still run against it (raised by
 * contract steps), and which release migrated it. Written by the migrator, in the transaction
 * that applies the migrations.
 */
export class SchemaCompatibility1764680000000 implements MigrationInterface {
  name = 'SchemaCompatibility1764680000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      `CREATE TABLE "schema_compatibility" ("id" smallint NOT NULL DEFAULT 1, "schema_level" bigint NOT NULL, "oldest_code_level" bigint NOT NULL, "migrated_by" text NOT NULL, "migrated_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "ck_schema_compatibility_one_row" CHECK ("id" = 1), CONSTRAINT "pk_schema_compatibility" PRIMARY KEY ("id"))`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE "schema_compatibility"`);
  }
}
