import { Inject, Injectable, Logger } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { AuditService } from '../audit/audit.service';
import { changeEvent } from '../audit/events';
import type { Principal } from '../common/principal';
import { decodeCursor, encodeCursor } from '../common/cursor';
import { DomainError } from '../common/errors';
import { assertUnitName } from '../common/names';
import { AuthorizationService, Decider } from '../rbac/authorization.service';
import { BLOB_STORE, BlobStore } from '../storage/blob-store';
import { deleteBlobs } from '../storage/delete-blobs';
import { auditedChange } from './audited-change';
import { LockRepository } from './locks/lock.repository';
import { StateAccess } from './state-access';
import { stateNotFound, unitNotFound } from './state-errors';
import { StateRepository, StateRow, UnitRow } from './state.repository';
import {
  Door,
  UnitDetailView,
  UnitPageView,
  unitView,
  UnitView,
  workspaceView,
} from './state.views';
import { StateWriteHooks } from './write-hooks';

/**
 * The life of units and their workspaces: create, list, show, soft delete, undelete and purge
 * (with the purge hooks, inside the purge's transaction).
 */
@Injectable()
export class UnitsService {
  private readonly logger = new Logger(UnitsService.name);

  constructor(
    private readonly repo: StateRepository,
    @Inject(BLOB_STORE) private readonly blobs: BlobStore,
    private readonly authz: AuthorizationService,
    private readonly audit: AuditService,
    private readonly access: StateAccess,
    private readonly hooks: StateWriteHooks,
    private readonly locks: LockRepository,
  ) {}

  async createUnit(principal: Principal, name: string): Promise<UnitView> {
    assertUnitName(name);
    await this.authz.authorize(principal, 'unit.create', { unit: name });
    const row = await this.repo.transaction(async (m) => {
      const inserted = await this.repo.insertUnit(m, name, principal.subject);
      if (inserted) {
        await this.repo.ensureState(m, inserted.id, 'default');
        return inserted;
      }
      const existing = await this.repo.findUnit(m, name);
      if (existing?.deleted_at) {
        throw new DomainError(
          'unit_deleted',
          `unit ${name} was deleted; undelete it (POST /v1/units/{name}/undelete) or purge it first`,
        );
      }
      throw new DomainError('unit_exists', `unit ${name} already exists`);
    });
    return unitView(row);
  }

  async listUnits(
    principal: Principal,
    prefix: string,
    limit: number,
    cursor: string | undefined,
  ): Promise<UnitPageView> {
    const after = decodeCursor(cursor);
    const items: UnitView[] = [];
    let last = after;
    // Filter by read access, page by page, until the page is full or the names run out.
    for (;;) {
      const rows = await this.repo.listUnits(prefix, last, limit + 1);
      for (const row of rows.slice(0, limit)) {
        last = row.name;
        if (await this.access.canSeeUnit(principal, row)) {
          items.push(unitView(row));
          if (items.length === limit) break;
        }
      }
      if (items.length === limit || rows.length <= limit) {
        const more = items.length === limit && (rows.length > limit || last !== rows.at(-1)?.name);
        return { items, nextCursor: more && last !== undefined ? encodeCursor(last) : null };
      }
    }
  }

  /**
   * A unit with the workspaces the caller may read: a workspace's details (serial, size, times,
   * lock) are shown only with `unit.read` in that workspace, so a deny scoped to one workspace
   * hides it even from a reader of the unit. A reader whose rules name only some workspaces sees
   * the unit with just those; anyone else gets the 403 (whether or not the unit exists).
   */
  async getUnit(principal: Principal, name: string): Promise<UnitDetailView> {
    assertUnitName(name);
    const may = await this.authz.decider(principal);
    const whole = may.explain('unit.read', { unit: name });
    const unit = await this.repo.findUnit(this.repo.manager, name);
    const live = unit && !unit.deleted_at ? unit : undefined;
    const readable = (live ? await this.repo.listStates(live.id) : []).filter(
      (s) => may.explain('unit.read', { unit: name, workspace: s.workspace }).allowed,
    );
    if (!whole.allowed && readable.length === 0) {
      throw this.authz.refusal(principal, 'unit.read', { unit: name }, whole);
    }
    if (!live) throw unitNotFound(name);
    return { ...unitView(live), workspaces: readable.map(workspaceView) };
  }

  async listWorkspaces(principal: Principal, name: string): Promise<UnitDetailView['workspaces']> {
    return (await this.getUnit(principal, name)).workspaces;
  }

  /**
   * Soft-deletes a unit with every workspace: a unit-wide action (`decideUnitWide`), decided on
   * the unit's workspaces as they are once its row is locked. Refused while any workspace is
   * locked; the refusal names the workspace and its holder only to a caller who may read it.
   */
  async deleteUnit(principal: Principal, name: string, door: Door): Promise<void> {
    assertUnitName(name);
    const may = await this.access.mayActOn(principal, 'unit.delete', name, undefined);
    await auditedChange(
      this.repo,
      this.audit,
      changeEvent(principal, 'unit.delete', {
        action: 'unit.delete',
        unit: name,
        door,
      }),
      async (m) => {
        const unit = await this.repo.lockUnit(m, name);
        if (!unit || unit.deleted_at) throw unitNotFound(name);
        const workspaces = await this.repo.workspacesOf(m, unit.id);
        this.authz.authorizeUnitWide(principal, may, 'unit.delete', name, workspaces);
        const holder = await this.locks.anyHolderInUnit(m, unit.id);
        if (!holder) return this.repo.softDeleteUnit(m, unit.id, principal.subject);
        if (may.explain('unit.read', { unit: name, workspace: holder.workspace }).allowed) {
          throw new DomainError(
            'locked',
            `unit ${name} cannot be deleted while workspace ${holder.workspace} is locked by ${holder.principal}`,
            holder,
          );
        }
        throw new DomainError(
          'locked',
          `unit ${name} cannot be deleted while one of its workspaces is locked`,
        );
      },
    );
  }

  /** Undeletes a unit (with the workspaces its delete took), or one workspace's state. */
  async undelete(principal: Principal, name: string, workspace: string | undefined): Promise<void> {
    assertUnitName(name);
    const may = await this.access.mayActOn(principal, 'unit.delete', name, workspace);
    await auditedChange(
      this.repo,
      this.audit,
      changeEvent(principal, workspace === undefined ? 'unit.undelete' : 'state.undelete', {
        action: 'unit.delete',
        unit: name,
        workspace,
        door: 'api',
      }),
      async (m) => {
        const unit = await this.lockUnitFor(m, principal, may, 'unit.delete', name, workspace);
        if (workspace === undefined) {
          if (!unit.deleted_at) throw new DomainError('not_deleted', `unit ${name} is not deleted`);
          await this.repo.undeleteUnit(m, unit.id);
          return;
        }
        if (unit.deleted_at) {
          throw new DomainError('unit_deleted', `unit ${name} is deleted; undelete the unit first`);
        }
        const state = await this.lockStateOf(m, unit, workspace);
        if (!state.deleted_at || !state.current_version_id) {
          throw new DomainError(
            'not_deleted',
            `the state of ${name} (workspace ${workspace}) is not deleted`,
          );
        }
        await this.repo.undeleteState(m, state.id);
      },
    );
  }

  /**
   * Irreversibly removes a soft-deleted unit (or one soft-deleted workspace state) and its
   * versions. Blobs go after the commit, and only those no remaining version refers to.
   */
  async purge(principal: Principal, name: string, workspace: string | undefined): Promise<void> {
    assertUnitName(name);
    const may = await this.access.mayActOn(principal, 'unit.purge', name, workspace);
    const keys = await auditedChange(
      this.repo,
      this.audit,
      (blobs: string[]) =>
        changeEvent(principal, workspace === undefined ? 'unit.purge' : 'state.purge', {
          action: 'unit.purge',
          unit: name,
          workspace,
          door: 'api',
          details: { blobs: blobs.length },
        }),
      async (m) => {
        const unit = await this.lockUnitFor(m, principal, may, 'unit.purge', name, workspace);
        if (workspace === undefined) {
          if (!unit.deleted_at) {
            throw new DomainError(
              'not_deleted',
              `unit ${name} must be deleted before it is purged`,
            );
          }
          await this.hooks.purgeAll(m, { unit: name });
          return this.repo.purgeUnit(m, unit.id);
        }
        const state = await this.lockStateOf(m, unit, workspace);
        if (!state.deleted_at) {
          throw new DomainError(
            'not_deleted',
            `the state of ${name} (workspace ${workspace}) must be deleted before it is purged`,
          );
        }
        if ((await this.locks.holderOf(m, state.id)) !== null) {
          throw new DomainError(
            'locked',
            `the state of ${name} (workspace ${workspace}) is locked`,
          );
        }
        await this.hooks.purgeAll(m, { unit: name, workspace });
        return this.repo.purgeState(m, state.id);
      },
    );
    await deleteBlobs(this.blobs, keys, this.logger);
  }

  /**
   * The unit an undelete or purge works on, its row locked; for the whole unit, the rest of the
   * unit-wide decision (`decideUnitWide`) on its workspaces as they are now.
   */
  private async lockUnitFor(
    m: EntityManager,
    principal: Principal,
    may: Decider,
    action: 'unit.delete' | 'unit.purge',
    name: string,
    workspace: string | undefined,
  ): Promise<UnitRow> {
    const unit = await this.repo.lockUnit(m, name);
    if (!unit) throw unitNotFound(name);
    if (workspace === undefined) {
      const workspaces = await this.repo.workspacesOf(m, unit.id);
      this.authz.authorizeUnitWide(principal, may, action, name, workspaces);
    }
    return unit;
  }

  /** A workspace's state (as found, before its row was locked), its row locked. */
  private async lockStateOf(m: EntityManager, unit: UnitRow, workspace: string): Promise<StateRow> {
    const state = await this.repo.findState(m, unit.id, workspace);
    if (!state) throw stateNotFound(unit.name, workspace);
    await this.repo.lockStateRow(m, state.id);
    return state;
  }
}
