import { Injectable } from '@nestjs/common';
import { DataSource, EntityManager } from 'typeorm';
import { sqlRows } from '../database/sql';
import { insertSettingIfAbsent, readSetting } from '../database/settings.repository';
import { transaction } from '../database/transaction';

export const RBAC_CHANNEL = 'statehouse_rbac';
export const RBAC_INITIALISED = 'rbac_initialised';

export type SubjectType = 'subject' | 'email' | 'group';

export interface RuleRow {
  id: string;
  effect: 'allow' | 'deny';
  actions: string[];
  resources: string[];
  workspaces: string[] | null;
  permission: string;
  role: string;
}

export interface PermissionRow {
  id: string;
  name: string;
  description: string;
  created_at: Date;
}

export interface RoleRow {
  id: string;
  name: string;
  description: string;
  created_at: Date;
}

export interface AssignmentRow {
  id: string;
  role_id: string;
  role: string;
  subject_type: SubjectType;
  subject_value: string;
  created_at: Date;
  created_by: string;
}

export interface NewRule {
  effect: 'allow' | 'deny';
  actions: string[];
  resources: string[];
  workspaces: string[] | null;
}

/**
 * SQL for roles, permissions, rules and assignments. Every change also sends a NOTIFY on
 * `statehouse_rbac` inside its transaction, delivered to every replica when it commits, so
 * cached decisions are dropped everywhere.
 */
@Injectable()
export class RbacRepository {
  constructor(private readonly db: DataSource) {}

  get manager(): EntityManager {
    return this.db.manager;
  }

  transaction<T>(work: (m: EntityManager) => Promise<T>): Promise<T> {
    return transaction(this.db, async (m) => {
      const result = await work(m);
      await m.query(`SELECT pg_notify('${RBAC_CHANNEL}', '')`);
      return result;
    });
  }

  async isInitialised(m: EntityManager = this.db.manager): Promise<boolean> {
    return (await readSetting(m, RBAC_INITIALISED)) !== undefined;
  }

  /** Records the initialised flag; false when it was already set (another init won). */
  async markInitialised(m: EntityManager, by: string): Promise<boolean> {
    return insertSettingIfAbsent(
      m,
      RBAC_INITIALISED,
      JSON.stringify({ by, at: new Date().toISOString() }),
    );
  }

  /**
   * The permission lookup: every rule of every role assigned to this subject, its verified
   * email or one of its groups. One indexed query; the result is cached per principal.
   */
  async rulesFor(
    subject: string,
    email: string | undefined,
    groups: readonly string[],
  ): Promise<RuleRow[]> {
    return sqlRows<RuleRow>(
      this.db.manager,
      `SELECT DISTINCT ru.id, ru.effect, ru.actions, ru.resources, ru.workspaces,
              p.name AS permission, r.name AS role
         FROM rbac_assignments a
         JOIN rbac_roles r ON r.id = a.role_id
         JOIN rbac_role_permissions rp ON rp.role_id = r.id
         JOIN rbac_permissions p ON p.id = rp.permission_id
         JOIN rbac_rules ru ON ru.permission_id = p.id
        WHERE (a.subject_type = 'subject' AND a.subject_value = $1)
           OR (a.subject_type = 'email' AND a.subject_value = $2)
           OR (a.subject_type = 'group' AND a.subject_value = ANY($3::text[]))`,
      [subject, email ?? null, [...groups]],
    );
  }

  // -------------------------------------------------------------- permissions

  async listPermissions(): Promise<(PermissionRow & { rules: NewRule[] })[]> {
    const perms = await sqlRows<PermissionRow>(
      this.db.manager,
      'SELECT * FROM rbac_permissions ORDER BY name',
    );
    const rules = await sqlRows<NewRule & { permission_id: string }>(
      this.db.manager,
      'SELECT permission_id, effect, actions, resources, workspaces FROM rbac_rules ORDER BY permission_id, position',
    );
    return perms.map((p) => ({
      ...p,
      rules: rules
        .filter((r) => r.permission_id === p.id)
        .map(({ effect, actions, resources, workspaces }) => ({
          effect,
          actions,
          resources,
          workspaces,
        })),
    }));
  }

  async findPermission(m: EntityManager, name: string): Promise<PermissionRow | undefined> {
    return (
      await sqlRows<PermissionRow>(m, 'SELECT * FROM rbac_permissions WHERE name = $1', [name])
    )[0];
  }

  async insertPermission(
    m: EntityManager,
    name: string,
    description: string,
  ): Promise<PermissionRow | undefined> {
    return (
      await sqlRows<PermissionRow>(
        m,
        'INSERT INTO rbac_permissions (name, description) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING RETURNING *',
        [name, description],
      )
    )[0];
  }

  async replaceRules(m: EntityManager, permissionId: string, rules: NewRule[]): Promise<void> {
    await m.query('DELETE FROM rbac_rules WHERE permission_id = $1', [permissionId]);
    // Rules keep the order they were given in (answers and `permission show` list them so).
    for (const [position, r] of rules.entries()) {
      await m.query(
        'INSERT INTO rbac_rules (permission_id, position, effect, actions, resources, workspaces) VALUES ($1, $2, $3, $4, $5, $6)',
        [permissionId, position, r.effect, r.actions, r.resources, r.workspaces],
      );
    }
  }

  async updatePermission(m: EntityManager, id: string, description: string): Promise<void> {
    await m.query('UPDATE rbac_permissions SET description = $2 WHERE id = $1', [id, description]);
  }

  async deletePermission(m: EntityManager, name: string): Promise<boolean> {
    return (
      (await sqlRows(m, 'DELETE FROM rbac_permissions WHERE name = $1 RETURNING id', [name]))
        .length > 0
    );
  }

  // -------------------------------------------------------------- roles

  async listRoles(): Promise<(RoleRow & { permissions: string[] })[]> {
    return sqlRows<RoleRow & { permissions: string[] }>(
      this.db.manager,
      `SELECT r.*, coalesce(array_agg(p.name ORDER BY p.name) FILTER (WHERE p.name IS NOT NULL), '{}') AS permissions
         FROM rbac_roles r
         LEFT JOIN rbac_role_permissions rp ON rp.role_id = r.id
         LEFT JOIN rbac_permissions p ON p.id = rp.permission_id
        GROUP BY r.id ORDER BY r.name`,
    );
  }

  async findRole(m: EntityManager, name: string): Promise<RoleRow | undefined> {
    return (await sqlRows<RoleRow>(m, 'SELECT * FROM rbac_roles WHERE name = $1', [name]))[0];
  }

  async insertRole(
    m: EntityManager,
    name: string,
    description: string,
  ): Promise<RoleRow | undefined> {
    return (
      await sqlRows<RoleRow>(
        m,
        'INSERT INTO rbac_roles (name, description) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING RETURNING *',
        [name, description],
      )
    )[0];
  }

  async setRolePermissions(
    m: EntityManager,
    roleId: string,
    permissionIds: string[],
  ): Promise<void> {
    await m.query('DELETE FROM rbac_role_permissions WHERE role_id = $1', [roleId]);
    for (const pid of permissionIds) {
      await m.query('INSERT INTO rbac_role_permissions (role_id, permission_id) VALUES ($1, $2)', [
        roleId,
        pid,
      ]);
    }
  }

  async updateRole(m: EntityManager, id: string, description: string): Promise<void> {
    await m.query('UPDATE rbac_roles SET description = $2 WHERE id = $1', [id, description]);
  }

  async deleteRole(m: EntityManager, name: string): Promise<boolean> {
    return (
      (await sqlRows(m, 'DELETE FROM rbac_roles WHERE name = $1 RETURNING id', [name])).length > 0
    );
  }

  // -------------------------------------------------------------- assignments

  async listAssignments(filter?: { type: SubjectType; value: string }[]): Promise<AssignmentRow[]> {
    const rows = await sqlRows<AssignmentRow>(
      this.db.manager,
      `SELECT a.*, r.name AS role FROM rbac_assignments a JOIN rbac_roles r ON r.id = a.role_id
        ORDER BY a.created_at`,
    );
    return filter
      ? rows.filter((a) =>
          filter.some((f) => f.type === a.subject_type && f.value === a.subject_value),
        )
      : rows;
  }

  async insertAssignment(
    m: EntityManager,
    roleId: string,
    type: SubjectType,
    value: string,
    by: string,
  ): Promise<AssignmentRow | undefined> {
    return (
      await sqlRows<AssignmentRow>(
        m,
        `INSERT INTO rbac_assignments (role_id, subject_type, subject_value, created_by) VALUES ($1, $2, $3, $4)
         ON CONFLICT (role_id, subject_type, subject_value) DO NOTHING RETURNING *`,
        [roleId, type, value, by],
      )
    )[0];
  }

  async deleteAssignment(m: EntityManager, id: string): Promise<AssignmentRow | undefined> {
    return (
      await sqlRows<AssignmentRow>(m, 'DELETE FROM rbac_assignments WHERE id = $1 RETURNING *', [
        id,
      ])
    )[0];
  }
}
