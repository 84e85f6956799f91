import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `terraform login` (login.v1): the logins in flight — an authorization request waiting for the
 * OpenID provider's answer, then a single-use code waiting for Terraform's token request. Keyed
 * by the SHA-256 of the secret that names them; short-lived. Expand only.
 */
export class TerraformLogin1764720000000 implements MigrationInterface {
  name = 'TerraformLogin1764720000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      `CREATE TABLE "terraform_logins" ("key_sha256" character(64) NOT NULL, "stage" text NOT NULL, "data" jsonb NOT NULL, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), "expires_at" TIMESTAMP WITH TIME ZONE NOT NULL, CONSTRAINT "pk_terraform_logins" PRIMARY KEY ("key_sha256"))`,
    );
    await q.query(
      `CREATE INDEX "ix_terraform_logins_expires" ON "terraform_logins" ("expires_at")`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE "terraform_logins"`);
  }
}
