import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The TFE door (`cloud {}`, `backend "remote"`): what it keeps about a unit served as a
 * workspace (tags, project, the Terraform version a client set), the projects Terraform
 * creates, and the state versions announced and awaiting their upload. Expand only.
 */
export class Tfe1764700000000 implements MigrationInterface {
  name = 'Tfe1764700000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      `CREATE TABLE "tfe_workspaces" ("unit_id" uuid NOT NULL, "tag_names" text array NOT NULL DEFAULT '{}', "project_id" text, "terraform_version" text, "updated_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "pk_tfe_workspaces" PRIMARY KEY ("unit_id"))`,
    );
    await q.query(
      `ALTER TABLE "tfe_workspaces" ADD CONSTRAINT "fk_tfe_workspaces_unit" FOREIGN KEY ("unit_id") REFERENCES "units"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
    await q.query(
      `CREATE TABLE "tfe_projects" ("id" text NOT NULL, "organization" text COLLATE "C" NOT NULL, "name" text COLLATE "C" NOT NULL, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), "created_by" text NOT NULL, CONSTRAINT "pk_tfe_projects" PRIMARY KEY ("id"))`,
    );
    await q.query(
      `CREATE UNIQUE INDEX "uq_tfe_projects_name" ON "tfe_projects" ("organization", "name")`,
    );
    await q.query(
      `CREATE TABLE "tfe_state_uploads" ("id" text NOT NULL, "unit_id" uuid NOT NULL, "serial" bigint NOT NULL, "lineage" text, "md5" character(32) NOT NULL, "lock_id" text NOT NULL, "principal" jsonb NOT NULL, "capability_sha256" character(64) NOT NULL, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), "expires_at" TIMESTAMP WITH TIME ZONE NOT NULL, "version" integer, CONSTRAINT "pk_tfe_state_uploads" PRIMARY KEY ("id"))`,
    );
    await q.query(
      `CREATE INDEX "ix_tfe_state_uploads_expires" ON "tfe_state_uploads" ("expires_at")`,
    );
    await q.query(
      `ALTER TABLE "tfe_state_uploads" ADD CONSTRAINT "fk_tfe_state_uploads_unit" FOREIGN KEY ("unit_id") REFERENCES "units"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE "tfe_state_uploads"`);
    await q.query(`DROP TABLE "tfe_projects"`);
    await q.query(`DROP TABLE "tfe_workspaces"`);
  }
}
