import { MigrationInterface, QueryRunner } from 'typeorm';

/** RBAC (permissions of rules, roles, assignments) and the append-only audit log. */
export class RbacAudit1764540000000 implements MigrationInterface {
  name = 'RbacAudit1764540000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      `CREATE TABLE "audit_events" ("id" BIGSERIAL NOT NULL, "at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), "type" text NOT NULL, "actor" text NOT NULL, "action" text, "unit" text, "workspace" text, "outcome" text NOT NULL, "door" text, "request_id" text, "client_ip" text, "details" jsonb, "count" integer NOT NULL DEFAULT '1', CONSTRAINT "pk_audit_events" PRIMARY KEY ("id"))`,
    );
    await q.query(`CREATE INDEX "ix_audit_events_at" ON "audit_events"("at") `);
    await q.query(`CREATE INDEX "ix_audit_events_unit_at" ON "audit_events"("unit", "at") `);
    await q.query(`CREATE INDEX "ix_audit_events_actor_at" ON "audit_events"("actor", "at") `);
    await q.query(
      `CREATE TABLE "rbac_permissions" ("id" uuid NOT NULL DEFAULT gen_random_uuid(), "name" text NOT NULL, "description" text NOT NULL DEFAULT '', "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "pk_rbac_permissions" PRIMARY KEY ("id"))`,
    );
    await q.query(`CREATE UNIQUE INDEX "uq_rbac_permissions_name" ON "rbac_permissions"("name") `);
    await q.query(
      `CREATE TABLE "rbac_rules" ("id" uuid NOT NULL DEFAULT gen_random_uuid(), "permission_id" uuid NOT NULL, "position" integer NOT NULL DEFAULT 0, "effect" text NOT NULL, "actions" text array NOT NULL, "resources" text array NOT NULL, "workspaces" text array, CONSTRAINT "pk_rbac_rules" PRIMARY KEY ("id"))`,
    );
    await q.query(`CREATE INDEX "ix_rbac_rules_permission" ON "rbac_rules"("permission_id") `);
    await q.query(
      `CREATE TABLE "rbac_roles" ("id" uuid NOT NULL DEFAULT gen_random_uuid(), "name" text NOT NULL, "description" text NOT NULL DEFAULT '', "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "pk_rbac_roles" PRIMARY KEY ("id"))`,
    );
    await q.query(`CREATE UNIQUE INDEX "uq_rbac_roles_name" ON "rbac_roles"("name") `);
    await q.query(
      `CREATE TABLE "rbac_role_permissions" ("role_id" uuid NOT NULL, "permission_id" uuid NOT NULL, CONSTRAINT "pk_rbac_role_permissions" PRIMARY KEY ("role_id", "permission_id"))`,
    );
    await q.query(
      `CREATE TABLE "rbac_assignments" ("id" uuid NOT NULL DEFAULT gen_random_uuid(), "role_id" uuid NOT NULL, "subject_type" text NOT NULL, "subject_value" text NOT NULL, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), "created_by" text NOT NULL, CONSTRAINT "pk_rbac_assignments" PRIMARY KEY ("id"))`,
    );
    await q.query(
      `CREATE INDEX "ix_rbac_assignments_subject" ON "rbac_assignments"("subject_type", "subject_value") `,
    );
    await q.query(
      `CREATE UNIQUE INDEX "uq_rbac_assignments" ON "rbac_assignments"("role_id", "subject_type", "subject_value") `,
    );
    await q.query(
      `ALTER TABLE "rbac_rules" ADD CONSTRAINT "fk_rbac_rules_permission" FOREIGN KEY ("permission_id") REFERENCES "rbac_permissions"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
    await q.query(
      `ALTER TABLE "rbac_role_permissions" ADD CONSTRAINT "fk_rbac_role_permissions_role" FOREIGN KEY ("role_id") REFERENCES "rbac_roles"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
    await q.query(
      `ALTER TABLE "rbac_role_permissions" ADD CONSTRAINT "fk_rbac_role_permissions_permission" FOREIGN KEY ("permission_id") REFERENCES "rbac_permissions"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
    await q.query(
      `ALTER TABLE "rbac_assignments" ADD CONSTRAINT "fk_rbac_assignments_role" FOREIGN KEY ("role_id") REFERENCES "rbac_roles"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    for (const table of [
      'rbac_assignments',
      'rbac_role_permissions',
      'rbac_rules',
      'rbac_roles',
      'rbac_permissions',
      'audit_events',
    ]) {
      await q.query(`DROP TABLE "${table}"`);
    }
  }
}
