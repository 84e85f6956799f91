import { Injectable } from '@nestjs/common';
import type { Principal } from '../common/principal';
import { AuthorizationService, Decider } from '../rbac/authorization.service';
import { DomainError } from '../common/errors';
import { assertUnitName } from '../common/names';
import { StateRepository, UnitRow } from './state.repository';
import type { StateAddress } from './state-types';

/** How a state may be read: the whole state, or a state made of its outputs (with or without the sensitive ones). */
export type ReadMode = 'full' | 'outputs' | 'outputs-sensitive';

/**
 * Who may do what to units and states, decided once for every door: what changing a state's
 * bytes needs, what creating a unit on first use needs, how a state may be read, and whether a
 * unit or state may be seen at all (listings). The lock authority (who may write under a lock)
 * is `locks/lock-authority.ts`, checked inside the write's transaction.
 */
@Injectable()
export class StateAccess {
  constructor(
    private readonly repo: StateRepository,
    private readonly authz: AuthorizationService,
  ) {}

  /**
   * What changing a state's bytes needs, through every door (write, restore, delete, an S3
   * multipart upload): `unit.write`, and `unit.read` too — a writer that only saw a synthesized
   * state must not write. Throws the refusal (403) naming the first action missing.
   */
  async authorizeWrite(principal: Principal, addr: StateAddress): Promise<void> {
    await this.authz.authorize(principal, 'unit.read', addr);
    await this.authz.authorize(principal, 'unit.write', addr);
  }

  /**
   * What a restore needs: `version.restore`, and what a write needs — a restore writes the
   * state, so no deny of either is bypassed.
   */
  async authorizeRestore(principal: Principal, addr: StateAddress): Promise<void> {
    await this.authz.authorize(principal, 'version.restore', addr);
    await this.authorizeWrite(principal, addr);
  }

  /**
   * A door that locks or writes a unit that does not exist (or was deleted) creates it, which
   * needs `unit.create`. Checked before the transaction: authorization reads the database, and
   * on the embedded database a transaction holds the only connection.
   */
  async assertMayCreateOnUse(principal: Principal, unit: string): Promise<void> {
    const existing = await this.repo.findUnit(this.repo.manager, unit);
    if (!existing || existing.deleted_at) {
      await this.authz.authorize(principal, 'unit.create', { unit });
    }
  }

  /**
   * May the caller see that this unit exists (listings)? When no rule grants the whole unit,
   * any workspace of it the caller may see will do (rules restricted to workspaces).
   */
  async canSeeUnit(principal: Principal, unit: UnitRow): Promise<boolean> {
    if (await this.canSee(principal, { unit: unit.name })) return true;
    for (const s of await this.repo.listStates(unit.id)) {
      if (await this.canSee(principal, { unit: unit.name, workspace: s.workspace })) return true;
    }
    return false;
  }

  /** May the caller see that this state exists (listings)? `unit.read` or `outputs.read`. */
  private async canSee(
    principal: Principal,
    addr: { unit: string; workspace?: string },
  ): Promise<boolean> {
    return (
      (await this.authz.can(principal, 'unit.read', addr)) ||
      (await this.authz.can(principal, 'outputs.read', addr))
    );
  }

  async readModeOrNone(principal: Principal, addr: StateAddress): Promise<ReadMode | 'none'> {
    if (await this.authz.can(principal, 'unit.read', addr)) return 'full';
    if (await this.authz.can(principal, 'outputs.read', addr)) {
      return (await this.authz.can(principal, 'outputs.read-sensitive', addr))
        ? 'outputs-sensitive'
        : 'outputs';
    }
    return 'none';
  }

  async readMode(principal: Principal, addr: StateAddress): Promise<ReadMode> {
    assertUnitName(addr.unit);
    const mode = await this.readModeOrNone(principal, addr);
    if (mode !== 'none') return mode;
    await this.authz.authorize(principal, 'unit.read', addr); // throws: the 403 names unit.read
    throw new DomainError('forbidden', `${principal.subject} may not unit.read on ${addr.unit}`);
  }

  /**
   * Authorizes a delete, undelete or purge before its transaction: of one workspace, as any
   * action; of the whole unit, the unit-level part of `decideUnitWide` — the rest is decided
   * inside the transaction with the returned decider, once the unit's workspaces are known.
   */
  async mayActOn(
    principal: Principal,
    action: 'unit.delete' | 'unit.purge',
    unit: string,
    workspace: string | undefined,
  ): Promise<Decider> {
    if (workspace !== undefined) await this.authz.authorize(principal, action, { unit, workspace });
    const may = await this.authz.decider(principal);
    if (workspace === undefined) this.authz.authorizeUnitWide(principal, may, action, unit, []);
    return may;
  }
}
