import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Signatures of signed S3 writes already accepted (their SHA-256), kept until the request could
 * no longer verify: a signed PUT, POST or DELETE is accepted once (replay protection).
 */
export class S3UsedSignatures1764580000000 implements MigrationInterface {
  name = 'S3UsedSignatures1764580000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      `CREATE TABLE "s3_used_signatures" ("signature_sha256" character(64) NOT NULL, "expires_at" TIMESTAMP WITH TIME ZONE NOT NULL, CONSTRAINT "pk_s3_used_signatures" PRIMARY KEY ("signature_sha256"))`,
    );
    await q.query(
      `CREATE INDEX "ix_s3_used_signatures_expires_at" ON "s3_used_signatures" ("expires_at") `,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX "ix_s3_used_signatures_expires_at"`);
    await q.query(`DROP TABLE "s3_used_signatures"`);
  }
}
