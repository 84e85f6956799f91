import { MigrationInterface, QueryRunner } from 'typeorm';

/** The S3 door's multipart uploads in progress, and their parts. */
export class S3Multipart1764520000000 implements MigrationInterface {
  name = 'S3Multipart1764520000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      `CREATE TABLE "s3_uploads" ("upload_id" text NOT NULL, "bucket" text NOT NULL, "object_key" text NOT NULL, "unit" text NOT NULL, "workspace" text NOT NULL, "principal" text NOT NULL, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "pk_s3_uploads" PRIMARY KEY ("upload_id"))`,
    );
    await q.query(
      `CREATE TABLE "s3_upload_parts" ("upload_id" text NOT NULL, "part_number" integer NOT NULL, "blob_key" text NOT NULL, "size" bigint NOT NULL, "md5" character(32) NOT NULL, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "pk_s3_upload_parts" PRIMARY KEY ("upload_id", "part_number"))`,
    );
    await q.query(
      `ALTER TABLE "s3_upload_parts" ADD CONSTRAINT "fk_s3_upload_parts_upload" FOREIGN KEY ("upload_id") REFERENCES "s3_uploads"("upload_id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE "s3_upload_parts"`);
    await q.query(`DROP TABLE "s3_uploads"`);
  }
}
