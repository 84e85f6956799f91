import { Injectable } from '@nestjs/common';
import { randomBytes, randomUUID } from 'node:crypto';
import { AuditService } from '../audit/audit.service';
import { changeEvent } from '../audit/events';
import { DomainError, HeldLock } from '../common/errors';
import { DEFAULT_WORKSPACE } from '../common/names';
import type { Principal } from '../common/principal';
import { AuthorizationService, Decider } from '../rbac/authorization.service';
import { LocksService } from '../state/locks/locks.service';
import { StateAccess } from '../state/state-access';
import { StateReader } from '../state/state-reader';
import type { StateAddress } from '../state/state-types';
import { StateRepository, UnitRow } from '../state/state.repository';
import type { VersionView } from '../state/state.views';
import { UnitsService } from '../state/units.service';
import {
  assertOrganization,
  assertTagName,
  MAX_TAGS,
  tagSet,
  unitIdOfWorkspaceId,
  unitOfWorkspace,
  workspaceOfUnit,
} from './tfe-names';
import { TfeProjectRow, TfeRepository, TfeWorkspaceRow } from './tfe.repository';

/** A unit served as a TFE workspace, with what its answer shows. */
export interface TfeWorkspace {
  unit: UnitRow;
  organization: string;
  name: string;
  addr: StateAddress;
  attrs: TfeWorkspaceRow | undefined;
  lock: HeldLock | null;
  current: VersionView | undefined;
  may: Decider;
}

/** Units scanned at most for one listing of an organization's workspaces. */
export const MAX_LISTED_UNITS = 10_000;
const MAX_TERRAFORM_VERSION_LENGTH = 64;
/** The largest state a safe-delete reads to see whether it still manages resources. */
const MAX_SAFE_DELETE_BYTES = 64 * 1024 * 1024;

/**
 * Workspaces of the TFE door over units: show, create, update, list, delete, lock. Every
 * decision is the state module's (RBAC, the lock authority, unit lifecycle); this adds the
 * mapping, the door's own attributes (tags, project, Terraform version) and its lock rule —
 * a TFE lock request names no lock ID, so it is refused whenever the lock is held, even by
 * the same principal.
 */
@Injectable()
export class TfeWorkspacesService {
  constructor(
    private readonly repo: TfeRepository,
    private readonly states: StateRepository,
    private readonly units: UnitsService,
    private readonly access: StateAccess,
    private readonly reader: StateReader,
    private readonly locks: LocksService,
    private readonly authz: AuthorizationService,
    private readonly audit: AuditService,
  ) {}

  /**
   * An organization exists for a caller who may create a unit under it or see one there. A
   * name that names no such thing is a 404 (Terraform: "organization not found").
   */
  async assertOrganization(principal: Principal, organization: string): Promise<void> {
    assertOrganization(organization);
    const may = await this.authz.decider(principal);
    const probe = { unit: `${organization}/*`, workspace: DEFAULT_WORKSPACE };
    if (
      may.explain('unit.create', probe).allowed ||
      may.explain('unit.read', probe).allowed ||
      may.explain('outputs.read', probe).allowed
    ) {
      return;
    }
    const rows = await this.states.listUnits(`${organization}/`, undefined, 200);
    for (const row of rows) {
      if (workspaceOfUnit(row.name) && (await this.access.canSeeUnit(principal, row))) return;
    }
    throw new DomainError('not_found', `organization ${organization} not found`);
  }

  async byName(principal: Principal, organization: string, name: string): Promise<TfeWorkspace> {
    const unit = unitOfWorkspace(organization, name);
    await this.assertVisible(principal, unit);
    const row = await this.states.findUnit(this.states.manager, unit);
    if (!row || row.deleted_at) {
      throw new DomainError(
        'not_found',
        `workspace ${name} not found in organization ${organization}`,
      );
    }
    return this.describe(principal, row);
  }

  async byId(principal: Principal, id: string): Promise<TfeWorkspace> {
    const unitId = unitIdOfWorkspaceId(id);
    const row = unitId === undefined ? undefined : await this.states.findUnitById(unitId);
    if (!row || !workspaceOfUnit(row.name)) {
      throw new DomainError('not_found', `workspace ${id.slice(0, 100)} not found`);
    }
    await this.assertVisible(principal, row.name);
    if (row.deleted_at) throw new DomainError('not_found', `workspace ${id} not found`);
    return this.describe(principal, row);
  }

  /** A workspace is shown to whoever may read its state or only its outputs; others get 403. */
  private async assertVisible(principal: Principal, unit: string): Promise<void> {
    await this.access.readMode(principal, { unit, workspace: DEFAULT_WORKSPACE });
  }

  private async describe(principal: Principal, unit: UnitRow): Promise<TfeWorkspace> {
    const where = workspaceOfUnit(unit.name) as { organization: string; name: string };
    const addr = { unit: unit.name, workspace: DEFAULT_WORKSPACE };
    const [attrs, may] = await Promise.all([
      this.repo.attributesOf([unit.id]),
      this.authz.decider(principal),
    ]);
    const lock = await this.locks.heldLockOf(addr);
    const current = await this.states.findServed(unit.name, DEFAULT_WORKSPACE);
    return {
      unit,
      ...where,
      addr,
      attrs: attrs.get(unit.id),
      lock,
      current: current && {
        version: current.version,
        serial: current.serial === null ? null : Number(current.serial),
        lineage: current.lineage,
        terraformVersion: current.terraform_version,
        encrypted: current.encrypted,
        sha256: current.sha256,
        md5: current.md5,
        size: Number(current.size),
        createdAt: new Date(current.created_at).toISOString(),
        createdBy: current.created_by,
        door: current.door,
        restoredFrom: current.restored_from,
      },
      may,
    };
  }

  async create(
    principal: Principal,
    organization: string,
    input: WorkspaceInput & { name: string },
  ): Promise<TfeWorkspace> {
    const unit = unitOfWorkspace(organization, input.name);
    const checked = this.checkInput(input);
    const projectId = await this.projectFor(organization, input.projectId);
    try {
      await this.units.createUnit(principal, unit);
    } catch (e) {
      if (e instanceof DomainError && (e.code === 'unit_exists' || e.code === 'unit_deleted')) {
        throw new DomainError(
          'invalid_name',
          e.code === 'unit_exists'
            ? `workspace ${input.name} already exists in organization ${organization}`
            : `${e.message} (it was a workspace of organization ${organization})`,
        );
      }
      throw e;
    }
    const row = (await this.states.findUnit(this.states.manager, unit)) as UnitRow;
    if (checked.tagNames || checked.terraformVersion !== undefined || projectId !== undefined) {
      await this.repo.updateAttributes(row.id, { ...checked, projectId });
      this.audited(principal, unit, { ...checked, projectId });
    }
    return this.describe(principal, row);
  }

  async update(
    principal: Principal,
    ws: TfeWorkspace,
    input: WorkspaceInput,
  ): Promise<TfeWorkspace> {
    if (input.name !== undefined && input.name !== ws.name) {
      throw new DomainError('invalid_name', 'a workspace cannot be renamed through this door');
    }
    const checked = this.checkInput(input);
    const projectId = await this.projectFor(ws.organization, input.projectId);
    const patch = { ...checked, projectId };
    if (Object.values(patch).every((v) => v === undefined)) return ws;
    await this.authz.authorize(principal, 'unit.write', ws.addr);
    await this.repo.updateAttributes(ws.unit.id, patch);
    this.audited(principal, ws.unit.name, patch);
    return this.describe(principal, ws.unit);
  }

  /** Adds key-only tags (`POST workspaces/:id/relationships/tags`); needs `unit.write`. */
  async addTags(principal: Principal, ws: TfeWorkspace, tags: unknown[]): Promise<void> {
    const names = tags.map(assertTagName);
    await this.authz.authorize(principal, 'unit.write', ws.addr);
    const merged = tagSet([...(ws.attrs?.tag_names ?? []), ...names]);
    await this.repo.updateAttributes(ws.unit.id, { tagNames: merged });
    this.audited(principal, ws.unit.name, { tagNames: merged });
  }

  async removeTags(principal: Principal, ws: TfeWorkspace, tags: unknown[]): Promise<void> {
    const names = new Set(tags.map(assertTagName));
    await this.authz.authorize(principal, 'unit.write', ws.addr);
    const kept = (ws.attrs?.tag_names ?? []).filter((t) => !names.has(t));
    await this.repo.updateAttributes(ws.unit.id, { tagNames: kept });
    this.audited(principal, ws.unit.name, { tagNames: kept });
  }

  private audited(
    principal: Principal,
    unit: string,
    patch: Record<string, string | string[] | null | undefined>,
  ): void {
    const details: Record<string, string | number | boolean | null> = {};
    for (const [k, v] of Object.entries(patch)) {
      if (v !== undefined) details[k] = Array.isArray(v) ? v.join(',') : v;
    }
    this.audit.record(
      changeEvent(principal, 'unit.update', {
        action: 'unit.write',
        unit,
        workspace: DEFAULT_WORKSPACE,
        door: 'tfe',
        details,
      }),
    );
  }

  private checkInput(input: WorkspaceInput): {
    tagNames?: string[];
    terraformVersion?: string;
  } {
    if (input.executionMode !== undefined && input.executionMode !== 'local') {
      throw new DomainError(
        'invalid_name',
        `execution-mode ${JSON.stringify(input.executionMode.slice(0, 40))} is not available: this server runs nothing, every workspace is "local"`,
      );
    }
    const version = input.terraformVersion;
    if (
      version !== undefined &&
      (version.length > MAX_TERRAFORM_VERSION_LENGTH || !/^[A-Za-z0-9.+~<>=!, -]+$/.test(version))
    ) {
      throw new DomainError(
        'invalid_name',
        `terraform-version must be at most ${MAX_TERRAFORM_VERSION_LENGTH} characters of a version or constraint`,
      );
    }
    return {
      ...(input.tagNames ? { tagNames: tagSet(input.tagNames) } : {}),
      ...(version !== undefined ? { terraformVersion: version } : {}),
    };
  }

  private async projectFor(
    organization: string,
    projectId: string | undefined,
  ): Promise<string | undefined> {
    if (projectId === undefined) return undefined;
    const project = await this.repo.findProject(projectId);
    if (!project || project.organization !== organization) {
      throw new DomainError(
        'not_found',
        `project ${projectId.slice(0, 100)} not found in organization ${organization}`,
      );
    }
    return project.id;
  }

  /**
   * The organization's workspaces the caller may see: `search[name]` (a substring),
   * `search[tags]` (all of these key-only tags), `filter[project][id]`.
   */
  async list(
    principal: Principal,
    organization: string,
    filter: { name?: string; tags?: string[]; projectId?: string },
  ): Promise<UnitRow[]> {
    assertOrganization(organization);
    // No workspace holds more than MAX_TAGS tags; each unit's check is then at most that long.
    const wanted = filter.tags === undefined ? undefined : [...new Set(filter.tags)];
    if (wanted && wanted.length > MAX_TAGS) return [];
    const prefix = `${organization}/`;
    const out: UnitRow[] = [];
    let after: string | undefined;
    for (let scanned = 0; scanned < MAX_LISTED_UNITS;) {
      const rows = await this.states.listUnits(prefix, after, 500);
      if (rows.length === 0) break;
      scanned += rows.length;
      after = rows[rows.length - 1].name;
      const candidates = rows.filter((r) => {
        const w = workspaceOfUnit(r.name);
        return w !== undefined && (filter.name === undefined || w.name.includes(filter.name));
      });
      const attrs = await this.repo.attributesOf(candidates.map((r) => r.id));
      for (const row of candidates) {
        const a = attrs.get(row.id);
        if (wanted && !hasAll(a?.tag_names ?? [], wanted)) continue;
        if (filter.projectId !== undefined && a?.project_id !== filter.projectId) continue;
        if (!(await this.access.canSeeUnit(principal, row))) continue;
        out.push(row);
      }
      if (rows.length < 500) break;
    }
    return out;
  }

  /** The workspaces of one listed page, as they are shown (each read once, the page only). */
  async describeAll(principal: Principal, rows: readonly UnitRow[]): Promise<TfeWorkspace[]> {
    const out: TfeWorkspace[] = [];
    for (const row of rows) out.push(await this.describe(principal, row));
    return out;
  }

  /** Deletes the workspace's unit (soft: its versions stay restorable through the API). */
  async delete(principal: Principal, ws: TfeWorkspace, safe: boolean): Promise<void> {
    if (safe) await this.assertManagesNothing(principal, ws);
    await this.units.deleteUnit(principal, ws.unit.name, 'tfe');
  }

  /** Safe-delete: refused while the current state still has resource instances. */
  private async assertManagesNothing(principal: Principal, ws: TfeWorkspace): Promise<void> {
    if (!ws.current) return;
    if (ws.current.encrypted) {
      throw new DomainError(
        'conflict',
        'the state is client-side encrypted, so the server cannot tell whether it manages resources; delete it without safe-delete (terraform workspace delete -force)',
      );
    }
    if (ws.current.size > MAX_SAFE_DELETE_BYTES) {
      throw new DomainError(
        'conflict',
        `the state is larger than ${MAX_SAFE_DELETE_BYTES} bytes; delete it without safe-delete (terraform workspace delete -force)`,
      );
    }
    const opened = await this.reader.openCurrent(principal, ws.addr);
    const chunks: Buffer[] = [];
    for await (const chunk of opened.body) chunks.push(chunk as Buffer);
    const parsed = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { resources?: unknown };
    const resources = Array.isArray(parsed.resources) ? parsed.resources : [];
    const managed = resources.filter(
      (r) =>
        typeof r === 'object' &&
        r !== null &&
        (r as { mode?: unknown }).mode === 'managed' &&
        Array.isArray((r as { instances?: unknown }).instances) &&
        (r as { instances: unknown[] }).instances.length > 0,
    );
    if (managed.length > 0) {
      throw new DomainError(
        'conflict',
        `workspace ${ws.name} still manages ${managed.length} resource(s); destroy them first, or delete with -force`,
      );
    }
  }

  /**
   * A TFE lock: a new lock ID every time, so a second lock request is refused even from the
   * holder (two runs sharing one token must not both hold it). `Who` is the principal.
   */
  async lock(principal: Principal, ws: TfeWorkspace, reason: string | undefined): Promise<void> {
    const info = {
      ID: randomUUID(),
      Operation: 'OperationTypeTfeLock',
      Info: reason ?? '',
      Who: principal.subject,
      Version: '',
      Created: new Date().toISOString(),
      Path: `${ws.organization}/${ws.name}`,
    };
    await this.locks.acquire(principal, ws.addr, Buffer.from(JSON.stringify(info)), {
      generateId: false,
      door: 'tfe',
    });
  }

  /** The holder's own unlock; 409 when unlocked or held by someone else. */
  async unlock(principal: Principal, ws: TfeWorkspace): Promise<void> {
    await this.authz.authorize(principal, 'unit.lock', ws.addr);
    const held = await this.locks.heldLockOf(ws.addr);
    if (!held) throw new DomainError('conflict', `workspace ${ws.name} is already unlocked`);
    if (held.principal !== principal.subject) {
      throw new DomainError(
        'locked',
        `workspace ${ws.name} is locked by ${held.principal}; only they can unlock it (or use force-unlock)`,
      );
    }
    await this.locks.release(principal, ws.addr, held.id, 'tfe');
  }

  async forceUnlock(principal: Principal, ws: TfeWorkspace): Promise<void> {
    const removed = await this.locks.forceUnlock(principal, ws.addr, 'tfe');
    if (!removed) throw new DomainError('conflict', `workspace ${ws.name} is already unlocked`);
  }

  async listProjects(
    principal: Principal,
    organization: string,
    names: string[] | undefined,
  ): Promise<TfeProjectRow[]> {
    await this.assertOrganization(principal, organization);
    const all = await this.repo.listProjects(organization);
    return names ? all.filter((p) => names.includes(p.name)) : all;
  }

  /** Creating a project needs `unit.create` under the organization (what its workspaces need). */
  async createProject(
    principal: Principal,
    organization: string,
    name: string,
  ): Promise<TfeProjectRow> {
    assertOrganization(organization);
    if (!/^[A-Za-z0-9 _-]{3,40}$/.test(name)) {
      throw new DomainError(
        'invalid_name',
        'a project name is 3-40 letters, digits, spaces, "-" and "_"',
      );
    }
    await this.authz.authorize(principal, 'unit.create', { unit: `${organization}/*` });
    const id = `prj-${randomBytes(12).toString('hex')}`;
    const { row, created } = await this.repo.createProject(
      id,
      organization,
      name,
      principal.subject,
    );
    if (created) {
      this.audit.record(
        changeEvent(principal, 'project.create', {
          action: 'unit.create',
          door: 'tfe',
          details: { organization, project: name, id: row.id },
        }),
      );
    }
    return row;
  }

  async project(principal: Principal, id: string): Promise<TfeProjectRow> {
    const row = await this.repo.findProject(id);
    if (!row) throw new DomainError('not_found', `project ${id.slice(0, 100)} not found`);
    await this.assertOrganization(principal, row.organization);
    return row;
  }
}

export interface WorkspaceInput {
  name?: string;
  terraformVersion?: string;
  executionMode?: string;
  tagNames?: string[];
  projectId?: string;
}

/** Whether `held` (a workspace's tags, at most MAX_TAGS) includes every one of `wanted`. */
function hasAll(held: readonly string[], wanted: readonly string[]): boolean {
  if (wanted.length > held.length) return false;
  const set = new Set(held);
  return wanted.every((t) => set.has(t));
}
