import { QueryRunner } from 'typeorm';
import type { LeveledMigration } from '../src/database/schema-compat';

/**
 * Credential lineage: the revocation list of parent credentials (API tokens, login sessions)
 * whose derived access tokens and S3 credentials must stop working, and each person's latest
 * login (groups and verified email), which API tokens acting as that person carry instead of
 * a copy taken when the token was made.
 */
export class CredentialLineage1764640000000 implements LeveledMigration {
  name = 'CredentialLineage1764640000000';
  /** Contract: drops api_tokens.email and .groups, which code before this migration reads. */
  readonly contractFloor = 1764640000000;

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      `CREATE TABLE "credential_revocations" ("parent_kind" text NOT NULL, "parent_id" uuid NOT NULL, "revoked_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), "keep_until" TIMESTAMP WITH TIME ZONE NOT NULL, CONSTRAINT "pk_credential_revocations" PRIMARY KEY ("parent_kind", "parent_id"))`,
    );
    await q.query(
      `CREATE TABLE "login_identities" ("subject" text NOT NULL, "email" text, "groups" jsonb NOT NULL DEFAULT '[]', "logged_in_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), "expires_at" TIMESTAMP WITH TIME ZONE NOT NULL, CONSTRAINT "pk_login_identities" PRIMARY KEY ("subject"))`,
    );
    // Each person's newest live login session is their latest login: their API tokens keep
    // its groups until that session's absolute end, as if it had been recorded then.
    await q.query(
      `INSERT INTO "login_identities" ("subject", "email", "groups", "logged_in_at", "expires_at")
       SELECT DISTINCT ON (r.subject) r.subject, r.email, r.groups,
              (SELECT min(f.created_at) FROM "refresh_tokens" f WHERE f.family_id = r.family_id),
              r.family_expires_at
         FROM "refresh_tokens" r
        WHERE r.family_expires_at > now()
        ORDER BY r.subject, r.family_expires_at DESC, r.created_at DESC`,
    );
    await q.query(`ALTER TABLE "api_tokens" DROP COLUMN "email"`);
    await q.query(`ALTER TABLE "api_tokens" DROP COLUMN "groups"`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "api_tokens" ADD "groups" jsonb NOT NULL DEFAULT '[]'`);
    await q.query(`ALTER TABLE "api_tokens" ADD "email" text`);
    await q.query(`DROP TABLE "login_identities"`);
    await q.query(`DROP TABLE "credential_revocations"`);
  }
}
