import { MigrationInterface, QueryRunner } from 'typeorm';

/** Units, states (workspaces), versions, locks, settings and the postgres blob driver's chunks. */
export class CoreSchema1764480000000 implements MigrationInterface {
  name = 'CoreSchema1764480000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      `CREATE TABLE "units" ("id" uuid NOT NULL DEFAULT gen_random_uuid(), "name" text COLLATE "C" NOT NULL, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), "created_by" text NOT NULL, "deleted_at" TIMESTAMP WITH TIME ZONE, "deleted_by" text, CONSTRAINT "pk_units" PRIMARY KEY ("id"))`,
    );
    await q.query(`CREATE UNIQUE INDEX "uq_units_name" ON "units"("name") `);
    await q.query(
      `CREATE TABLE "versions" ("id" uuid NOT NULL DEFAULT gen_random_uuid(), "state_id" uuid NOT NULL, "version" integer NOT NULL, "serial" bigint, "lineage" text, "terraform_version" text, "encrypted" boolean NOT NULL DEFAULT false, "sha256" character(64) NOT NULL, "md5" character(32) NOT NULL, "size" bigint NOT NULL, "blob_key" text NOT NULL, "outputs" jsonb, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), "created_by" text NOT NULL, "door" text NOT NULL, "restored_from" integer, CONSTRAINT "pk_versions" PRIMARY KEY ("id"))`,
    );
    await q.query(`CREATE INDEX "ix_versions_blob_key" ON "versions"("blob_key") `);
    await q.query(
      `CREATE UNIQUE INDEX "uq_versions_state_version" ON "versions"("state_id", "version") `,
    );
    await q.query(
      `CREATE TABLE "states" ("id" uuid NOT NULL DEFAULT gen_random_uuid(), "unit_id" uuid NOT NULL, "workspace" text COLLATE "C" NOT NULL, "current_version_id" uuid, "next_version" integer NOT NULL DEFAULT '1', "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), "deleted_at" TIMESTAMP WITH TIME ZONE, "deleted_with_unit" boolean NOT NULL DEFAULT false, "last_lock_id" text, "last_lock_principal" text, CONSTRAINT "pk_states" PRIMARY KEY ("id"))`,
    );
    await q.query(
      `CREATE UNIQUE INDEX "uq_states_unit_workspace" ON "states"("unit_id", "workspace") `,
    );
    await q.query(
      `CREATE TABLE "locks" ("state_id" uuid NOT NULL, "lock_id" text NOT NULL, "info" text NOT NULL, "principal" text NOT NULL, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "pk_locks" PRIMARY KEY ("state_id"))`,
    );
    await q.query(
      `CREATE TABLE "blob_chunks" ("blob_key" text COLLATE "C" NOT NULL, "seq" integer NOT NULL, "data" bytea NOT NULL, CONSTRAINT "pk_blob_chunks" PRIMARY KEY ("blob_key", "seq"))`,
    );
    await q.query(
      `CREATE TABLE "settings" ("key" text NOT NULL, "value" text NOT NULL, "updated_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "pk_settings" PRIMARY KEY ("key"))`,
    );
    await q.query(
      `ALTER TABLE "versions" ADD CONSTRAINT "fk_versions_state" FOREIGN KEY ("state_id") REFERENCES "states"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
    await q.query(
      `ALTER TABLE "states" ADD CONSTRAINT "fk_states_unit" FOREIGN KEY ("unit_id") REFERENCES "units"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
    await q.query(
      `ALTER TABLE "states" ADD CONSTRAINT "fk_states_current_version" FOREIGN KEY ("current_version_id") REFERENCES "versions"("id") ON DELETE SET NULL ON UPDATE NO ACTION`,
    );
    await q.query(
      `ALTER TABLE "locks" ADD CONSTRAINT "fk_locks_state" FOREIGN KEY ("state_id") REFERENCES "states"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    for (const table of ['locks', 'blob_chunks', 'settings']) {
      await q.query(`DROP TABLE "${table}"`);
    }
    await q.query(`ALTER TABLE "states" DROP CONSTRAINT "fk_states_current_version"`);
    for (const table of ['versions', 'states', 'units']) {
      await q.query(`DROP TABLE "${table}"`);
    }
  }
}
