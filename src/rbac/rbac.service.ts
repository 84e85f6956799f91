import { Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { AuditService } from '../audit/audit.service';
import type { Principal } from '../common/principal';
import { DomainError } from '../common/errors';
import { MAX_RBAC_NAME_LENGTH, MAX_WORKSPACE_LENGTH } from '../common/names';
import { ACTIONS, Action, Resource } from './actions';
import { AuthorizationService, Explained, Subject } from './authorization.service';
import { globProblem } from './policy';
import { RbacCache } from './rbac-cache';
import { AssignmentRow, NewRule, RbacRepository, SubjectType } from './rbac.repository';

export interface RuleInput {
  effect: string;
  actions: string[];
  resources: string[];
  workspaces?: string[] | null;
}

export interface SubjectRef {
  subject?: string;
  email?: string;
  group?: string;
}

const NAME = new RegExp(`^[A-Za-z0-9][A-Za-z0-9._-]{0,${MAX_RBAC_NAME_LENGTH - 1}}$`);
const WORKSPACE_GLOB = new RegExp(`^[A-Za-z0-9._*-]{1,${MAX_WORKSPACE_LENGTH}}$`);
const GLOBAL_ACTIONS: ReadonlySet<string> = new Set(['rbac.manage', 'token.manage', 'audit.read']);

/** Roles, permissions, assignments and the one-time init. Every change is audited in its transaction. */
@Injectable()
export class RbacService implements OnApplicationBootstrap {
  private readonly logger = new Logger('rbac');

  constructor(
    private readonly repo: RbacRepository,
    private readonly authz: AuthorizationService,
    private readonly cache: RbacCache,
    private readonly audit: AuditService,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    if (!(await this.repo.isInitialised())) {
      this.logger.warn(
        'RBAC is not initialised: every authenticated principal may use units; run POST /v1/rbac/init (statehouse rbac init)',
      );
    }
  }

  /**
   * Creates `admin` (every action on `**`) and `reader` (unit.read, version.read, graph.read on
   * `**`), assigns `admin` to the named subject, and records the durable "initialised" flag —
   * once (409 afterwards). Only the break-glass bootstrap-admin may do this.
   */
  async init(
    principal: Principal,
    admin: SubjectRef,
  ): Promise<{ initialised: true; admin: AssignmentRow }> {
    if (principal.kind !== 'bootstrap') {
      throw new DomainError(
        'forbidden',
        `${principal.subject} may not initialise RBAC (bootstrap-admin only)`,
      );
    }
    const target = subjectOf(admin);
    const assignment = await this.change<AssignmentRow>(
      principal,
      { op: 'init', admin: `${target.type}:${target.value}` },
      async (m) => {
        if (!(await this.repo.markInitialised(m, principal.subject))) {
          throw new DomainError('conflict', 'RBAC is already initialised');
        }
        const adminPerm = await this.upsertPermission(
          m,
          'admin-all',
          'every action on every unit',
          [{ effect: 'allow', actions: [...ACTIONS], resources: ['**'], workspaces: null }],
        );
        const readerPerm = await this.upsertPermission(
          m,
          'reader-all',
          'read every unit, version and the graph',
          [
            {
              effect: 'allow',
              actions: ['unit.read', 'version.read', 'graph.read'],
              resources: ['**'],
              workspaces: null,
            },
          ],
        );
        const adminRole = await this.upsertRole(m, 'admin', 'every action on every unit', [
          adminPerm,
        ]);
        await this.upsertRole(m, 'reader', 'read every unit, version and the graph', [readerPerm]);
        return (await this.repo.insertAssignment(
          m,
          adminRole,
          target.type,
          target.value,
          principal.subject,
        )) as AssignmentRow;
      },
    );
    return { initialised: true, admin: assignment };
  }

  async status(): Promise<{ initialised: boolean; mode: string }> {
    const initialised = await this.authz.initialised();
    return {
      initialised,
      mode: initialised
        ? 'every action is decided by the RBAC rules (bootstrap-admin keeps every right)'
        : 'not initialised: authenticated principals may use units; only bootstrap-admin may manage RBAC, create service-principal tokens, force-unlock or purge',
    };
  }

  async me(principal: Principal) {
    const refs = subjectsOf(principal);
    const assignments = await this.repo.listAssignments(refs);
    const roles = [...new Set(assignments.map((a) => a.role))].sort();
    const rules = (
      await this.repo.rulesFor(principal.subject, principal.email, principal.groups ?? [])
    ).map((r) => ({
      role: r.role,
      permission: r.permission,
      effect: r.effect,
      actions: r.actions,
      resources: r.resources,
      workspaces: r.workspaces,
    }));
    return {
      subject: principal.subject,
      email: principal.email ?? null,
      groups: principal.groups ?? [],
      initialised: await this.authz.initialised(),
      breakGlass: principal.kind === 'bootstrap',
      roles,
      rules,
    };
  }

  async test(
    principal: Principal,
    who: { subject?: string; email?: string; groups?: string[] },
    action: string,
    resource: Resource,
  ): Promise<Explained> {
    await this.authz.authorize(principal, 'rbac.manage', { unit: '*' });
    if (!(ACTIONS as readonly string[]).includes(action))
      throw new DomainError('invalid_request', `unknown action ${action}`);
    const subject: Subject = {
      subject: who.subject ?? `test:${who.email ?? (who.groups ?? []).join(',')}`,
      kind: who.subject === 'bootstrap-admin' ? 'bootstrap' : 'user',
      email: who.email,
      groups: who.groups ?? [],
    };
    return this.authz.explain(subject, action as Action, resource);
  }

  // ------------------------------------------------------------ permissions

  listPermissions() {
    return this.repo.listPermissions();
  }

  async createPermission(
    principal: Principal,
    name: string,
    description: string,
    rules: RuleInput[],
  ) {
    const valid = validateRules(rules);
    checkName(name, 'permission');
    await this.change(principal, { op: 'permission.create', name }, async (m) => {
      const p = await this.repo.insertPermission(m, name, description);
      if (!p) throw new DomainError('conflict', `permission ${name} already exists`);
      await this.repo.replaceRules(m, p.id, valid);
    });
    return this.permissionView(name);
  }

  async updatePermission(
    principal: Principal,
    name: string,
    description: string | undefined,
    rules: RuleInput[] | undefined,
  ) {
    const valid = rules ? validateRules(rules) : undefined;
    await this.change(principal, { op: 'permission.update', name }, async (m) => {
      const p = await this.repo.findPermission(m, name);
      if (!p) throw new DomainError('not_found', `permission ${name} does not exist`);
      if (description !== undefined) await this.repo.updatePermission(m, p.id, description);
      if (valid) await this.repo.replaceRules(m, p.id, valid);
    });
    return this.permissionView(name);
  }

  async deletePermission(principal: Principal, name: string): Promise<void> {
    await this.change(principal, { op: 'permission.delete', name }, async (m) => {
      if (!(await this.repo.deletePermission(m, name)))
        throw new DomainError('not_found', `permission ${name} does not exist`);
    });
  }

  private async permissionView(name: string) {
    return (await this.repo.listPermissions()).find((p) => p.name === name);
  }

  // ------------------------------------------------------------ roles

  listRoles() {
    return this.repo.listRoles();
  }

  async createRole(principal: Principal, name: string, description: string, permissions: string[]) {
    checkName(name, 'role');
    await this.change(
      principal,
      { op: 'role.create', name, permissions: permissions.join(',') },
      async (m) => {
        const ids = await this.permissionIds(m, permissions);
        const role = await this.repo.insertRole(m, name, description);
        if (!role) throw new DomainError('conflict', `role ${name} already exists`);
        await this.repo.setRolePermissions(m, role.id, ids);
      },
    );
    return (await this.repo.listRoles()).find((r) => r.name === name);
  }

  async updateRole(
    principal: Principal,
    name: string,
    description: string | undefined,
    permissions: string[] | undefined,
  ) {
    await this.change(
      principal,
      { op: 'role.update', name, permissions: permissions?.join(',') ?? null },
      async (m) => {
        const role = await this.repo.findRole(m, name);
        if (!role) throw new DomainError('not_found', `role ${name} does not exist`);
        if (description !== undefined) await this.repo.updateRole(m, role.id, description);
        if (permissions)
          await this.repo.setRolePermissions(m, role.id, await this.permissionIds(m, permissions));
      },
    );
    return (await this.repo.listRoles()).find((r) => r.name === name);
  }

  async deleteRole(principal: Principal, name: string): Promise<void> {
    await this.change(principal, { op: 'role.delete', name }, async (m) => {
      if (!(await this.repo.deleteRole(m, name)))
        throw new DomainError('not_found', `role ${name} does not exist`);
    });
  }

  // ------------------------------------------------------------ assignments

  listAssignments(ref?: SubjectRef) {
    return this.repo.listAssignments(
      ref && (ref.subject || ref.email || ref.group) ? [subjectOf(ref)] : undefined,
    );
  }

  async assign(principal: Principal, role: string, ref: SubjectRef): Promise<AssignmentRow> {
    const target = subjectOf(ref);
    return this.change(
      principal,
      { op: 'assign', role, [target.type]: target.value },
      async (m) => {
        const r = await this.repo.findRole(m, role);
        if (!r) throw new DomainError('not_found', `role ${role} does not exist`);
        const a = await this.repo.insertAssignment(
          m,
          r.id,
          target.type,
          target.value,
          principal.subject,
        );
        if (!a)
          throw new DomainError(
            'conflict',
            `${target.type} ${target.value} already has role ${role}`,
          );
        return { ...a, role };
      },
    );
  }

  async unassign(principal: Principal, id: string): Promise<void> {
    if (!/^[0-9a-f-]{36}$/i.test(id))
      throw new DomainError('not_found', `assignment ${id} does not exist`);
    await this.change(principal, { op: 'unassign', id }, async (m) => {
      if (!(await this.repo.deleteAssignment(m, id)))
        throw new DomainError('not_found', `assignment ${id} does not exist`);
    });
  }

  // ------------------------------------------------------------ helpers

  /** One RBAC change: authorised, in a transaction with its audit record and a NOTIFY. */
  private async change<T>(
    principal: Principal,
    details: Record<string, string | null>,
    work: (m: EntityManager) => Promise<T>,
  ): Promise<T> {
    if (details.op !== 'init') await this.authz.authorize(principal, 'rbac.manage', { unit: '*' });
    try {
      return await this.repo.transaction(async (m) => {
        const result = await work(m);
        await this.audit.recordIn(m, {
          type: details.op === 'init' ? 'rbac.init' : 'rbac.change',
          actor: principal.subject,
          outcome: 'success',
          action: 'rbac.manage',
          details,
        });
        return result;
      });
    } finally {
      this.cache.invalidate(); // this replica at once; the others on the NOTIFY
    }
  }

  private async permissionIds(m: EntityManager, names: string[]): Promise<string[]> {
    const ids: string[] = [];
    for (const n of new Set(names)) {
      const p = await this.repo.findPermission(m, n);
      if (!p) throw new DomainError('invalid_request', `permission ${n} does not exist`);
      ids.push(p.id);
    }
    return ids;
  }

  private async upsertPermission(
    m: EntityManager,
    name: string,
    description: string,
    rules: NewRule[],
  ): Promise<string> {
    const p =
      (await this.repo.insertPermission(m, name, description)) ??
      (await this.repo.findPermission(m, name));
    await this.repo.replaceRules(m, p!.id, rules);
    return p!.id;
  }

  private async upsertRole(
    m: EntityManager,
    name: string,
    description: string,
    permissionIds: string[],
  ): Promise<string> {
    const r =
      (await this.repo.insertRole(m, name, description)) ?? (await this.repo.findRole(m, name));
    await this.repo.setRolePermissions(m, r!.id, permissionIds);
    return r!.id;
  }
}

function checkName(name: string, what: string): void {
  if (!NAME.test(name))
    throw new DomainError(
      'invalid_request',
      `${what} names are 1 to ${MAX_RBAC_NAME_LENGTH} letters, digits, . _ - (starting with a letter or digit)`,
    );
}

/** Exactly one of subject, email or group. */
export function subjectOf(ref: SubjectRef): { type: SubjectType; value: string } {
  const given = (['subject', 'email', 'group'] as const).filter(
    (k) => ref[k] !== undefined && ref[k] !== '',
  );
  if (given.length !== 1)
    throw new DomainError('invalid_request', 'name exactly one of subject, email or group');
  const type = given[0];
  const value = ref[type] as string;
  if (value.length > 320) throw new DomainError('invalid_request', `${type} is too long`);
  if (type === 'email' && !/^[^@\s]+@[^@\s]+$/.test(value))
    throw new DomainError('invalid_request', 'email is not an email address');
  return { type, value };
}

function subjectsOf(p: Principal): { type: SubjectType; value: string }[] {
  return [
    { type: 'subject', value: p.subject },
    ...(p.email ? [{ type: 'email' as const, value: p.email }] : []),
    ...(p.groups ?? []).map((g) => ({ type: 'group' as const, value: g })),
  ];
}

export function validateRules(rules: RuleInput[]): NewRule[] {
  if (!Array.isArray(rules) || rules.length === 0)
    throw new DomainError('invalid_request', 'a permission needs at least one rule');
  if (rules.length > 200)
    throw new DomainError('invalid_request', 'a permission has at most 200 rules');
  return rules.map((r, i) => {
    const where = `rule ${i + 1}`;
    if (r.effect !== 'allow' && r.effect !== 'deny')
      throw new DomainError('invalid_request', `${where}: effect must be allow or deny`);
    if (!Array.isArray(r.actions) || r.actions.length === 0)
      throw new DomainError('invalid_request', `${where}: actions must list at least one action`);
    for (const a of r.actions) {
      if (!(ACTIONS as readonly string[]).includes(a)) {
        throw new DomainError(
          'invalid_request',
          `${where}: unknown action ${JSON.stringify(a)} (one of ${ACTIONS.join(', ')})`,
        );
      }
    }
    if (!Array.isArray(r.resources) || r.resources.length === 0)
      throw new DomainError(
        'invalid_request',
        `${where}: resources must list at least one pattern`,
      );
    for (const p of r.resources) {
      const problem = typeof p === 'string' ? globProblem(p) : 'not a string';
      if (problem)
        throw new DomainError(
          'invalid_request',
          `${where}: resource pattern ${JSON.stringify(p)}: ${problem}`,
        );
    }
    const global = r.actions.filter((a) => GLOBAL_ACTIONS.has(a));
    if (global.length > 0 && !r.resources.every((p) => p === '*' || p === '**')) {
      throw new DomainError(
        'invalid_request',
        `${where}: ${global.join(', ')} take the resource "*"`,
      );
    }
    let workspaces: string[] | null = null;
    if (r.workspaces !== undefined && r.workspaces !== null) {
      if (!Array.isArray(r.workspaces) || r.workspaces.length === 0)
        throw new DomainError(
          'invalid_request',
          `${where}: workspaces, when given, lists at least one`,
        );
      for (const w of r.workspaces) {
        if (typeof w !== 'string' || !WORKSPACE_GLOB.test(w))
          throw new DomainError(
            'invalid_request',
            `${where}: workspace pattern ${JSON.stringify(w)} is not valid`,
          );
      }
      workspaces = r.workspaces;
    }
    return {
      effect: r.effect,
      actions: [...new Set(r.actions)],
      resources: r.resources,
      workspaces,
    };
  });
}
