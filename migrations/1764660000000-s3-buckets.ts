import { MigrationInterface, QueryRunner } from 'typeorm';

/** When the S3 door first served each bucket name (ListBuckets' CreationDate). */
export class S3Buckets1764660000000 implements MigrationInterface {
  name = 'S3Buckets1764660000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      `CREATE TABLE "s3_buckets" ("name" text NOT NULL, "first_served_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "pk_s3_buckets" PRIMARY KEY ("name"))`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE "s3_buckets"`);
  }
}
