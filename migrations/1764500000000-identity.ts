import { MigrationInterface, QueryRunner } from 'typeorm';

/** Identity: access-token signing keys, refresh-token families and API tokens. */
export class Identity1764500000000 implements MigrationInterface {
  name = 'Identity1764500000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      `CREATE TABLE "api_tokens" ("id" uuid NOT NULL DEFAULT gen_random_uuid(), "name" text NOT NULL, "token_hash" character(64) NOT NULL, "subject" text NOT NULL, "email" text, "groups" jsonb NOT NULL DEFAULT '[]', "created_by" text NOT NULL, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), "expires_at" TIMESTAMP WITH TIME ZONE, "last_used_at" TIMESTAMP WITH TIME ZONE, "revoked_at" TIMESTAMP WITH TIME ZONE, CONSTRAINT "pk_api_tokens" PRIMARY KEY ("id"))`,
    );
    await q.query(`CREATE UNIQUE INDEX "uq_api_tokens_hash" ON "api_tokens"("token_hash") `);
    await q.query(`CREATE INDEX "ix_api_tokens_subject" ON "api_tokens"("subject") `);
    await q.query(
      `CREATE TABLE "refresh_tokens" ("id" uuid NOT NULL DEFAULT gen_random_uuid(), "family_id" uuid NOT NULL, "token_hash" character(64) NOT NULL, "subject" text NOT NULL, "email" text, "groups" jsonb NOT NULL DEFAULT '[]', "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), "family_expires_at" TIMESTAMP WITH TIME ZONE NOT NULL, "used_at" TIMESTAMP WITH TIME ZONE, "revoked_at" TIMESTAMP WITH TIME ZONE, CONSTRAINT "pk_refresh_tokens" PRIMARY KEY ("id"))`,
    );
    await q.query(`CREATE INDEX "ix_refresh_tokens_family" ON "refresh_tokens"("family_id") `);
    await q.query(
      `CREATE UNIQUE INDEX "uq_refresh_tokens_hash" ON "refresh_tokens"("token_hash") `,
    );
    await q.query(
      `CREATE TABLE "signing_keys" ("kid" text NOT NULL, "private_pem" text, "public_jwk" jsonb NOT NULL, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), "retired_at" TIMESTAMP WITH TIME ZONE, CONSTRAINT "pk_signing_keys" PRIMARY KEY ("kid"))`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    for (const table of ['api_tokens', 'refresh_tokens', 'signing_keys']) {
      await q.query(`DROP TABLE "${table}"`);
    }
  }
}
