import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { createHash, randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { EntityManager } from 'typeorm';
import type { TransactionStep } from '../database/sql';
import { AuditService, SecurityEventInput } from '../audit/audit.service';
import { changeEvent } from '../audit/events';
import { decodeCursor, encodeCursor } from '../common/cursor';
import { Principal } from '../common/principal';
import { APP_CONFIG, AppConfig, Failpoint } from '../config/config';
import { DomainError } from '../common/errors';
import { assertUnitName } from '../common/names';
import { feed } from '../common/streams';
import { assertMayWrite, assertNotLockedByOther } from './locks/lock-authority';
import { MetricsService } from '../metrics/metrics.service';
import { AuthorizationService, Decider } from '../rbac/authorization.service';
import { deleteBlobs } from '../storage/delete-blobs';
import { BLOB_STORE, BlobNotFoundError, BlobStore, ByteRange } from '../storage/blob-store';
import { InspectionBudget, InspectionLease } from './inspection-budget';
import { LockRepository } from './locks/lock.repository';
import { OutputDigester, OutputFacts } from './output-digests';
import { guardWrite } from './serial-guard';
import { StateWriteHooks, WriteContext } from './write-hooks';
import { StateIngest, tooLarge } from './state-ingest';
import { InspectedState, StateInspector } from './state-inspector';
import { NewVersion, StateRepository, StateRow, UnitRow, VersionRow } from './state.repository';
import {
  Door,
  OutputsView,
  UnitDetailView,
  UnitPageView,
  unitView,
  UnitView,
  VersionPageView,
  versionView,
  VersionView,
  workspaceView,
  WriteResultView,
} from './state.views';

export interface StateAddress {
  unit: string;
  workspace: string;
}

export interface WriteRequest extends StateAddress {
  principal: Principal;
  door: Door;
  body: Readable;
  /** The lock the writer says it holds (HTTP `?ID=`, API `lock_id`). */
  lockId?: string;
  /** Declared `Content-Length`, checked before reading. */
  contentLength?: number;
  /** `Content-MD5` (base64) to verify. */
  contentMd5?: string;
  /**
   * A condition on the current version, checked inside the write's transaction (S3's
   * `If-None-Match: *` / `If-Match`); throw to refuse.
   */
  precondition?: (current: { md5: string } | null) => void;
  /** Extra checks on the finished body (the S3 door's checksums); throw to refuse. */
  verify?: (digest: { sha256: string; md5: string; size: number }) => void;
  /** Work that commits with the write (the S3 door's replay record); throw to refuse. */
  inTransaction?: TransactionStep;
}

export interface OpenedState {
  version: VersionView;
  body: Readable;
}

/** Written once, by `put`, under a key nothing else uses. */
function newBlobKey(): string {
  const id = randomUUID();
  return `states/${id.slice(0, 2)}/${id}`;
}

/**
 * Units, workspaces and versions: the write path with its serial guard, reads, history,
 * restore, soft delete, undelete, purge and retention. Every door calls this service.
 */
@Injectable()
export class StateService {
  private readonly logger = new Logger(StateService.name);

  constructor(
    private readonly repo: StateRepository,
    @Inject(BLOB_STORE) private readonly blobs: BlobStore,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly authz: AuthorizationService,
    private readonly audit: AuditService,
    private readonly digester: OutputDigester,
    private readonly hooks: StateWriteHooks,
    private readonly budget: InspectionBudget,
    private readonly locks: LockRepository,
    @Optional() private readonly metrics?: MetricsService,
  ) {}

  // ---------------------------------------------------------------- units

  async createUnit(name: string, principal: Principal): Promise<UnitView> {
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
        if (await this.canSeeUnit(principal, row)) {
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
  async getUnit(name: string, principal: Principal): Promise<UnitDetailView> {
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

  async listWorkspaces(name: string, principal: Principal): Promise<UnitDetailView['workspaces']> {
    return (await this.getUnit(name, principal)).workspaces;
  }

  /**
   * Soft-deletes a unit with every workspace: a unit-wide action (`decideUnitWide`), decided on
   * the unit's workspaces as they are once its row is locked. Refused while any workspace is
   * locked; the refusal names the workspace and its holder only to a caller who may read it.
   */
  async deleteUnit(name: string, principal: Principal, door: Door): Promise<void> {
    assertUnitName(name);
    const may = await this.mayActOn(principal, 'unit.delete', name, undefined);
    await this.audited(
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
  async undelete(name: string, workspace: string | undefined, principal: Principal): Promise<void> {
    assertUnitName(name);
    const may = await this.mayActOn(principal, 'unit.delete', name, workspace);
    await this.audited(
      changeEvent(principal, workspace === undefined ? 'unit.undelete' : 'state.undelete', {
        action: 'unit.delete',
        unit: name,
        workspace,
        door: 'api',
      }),
      async (m) => {
        const unit = await this.repo.lockUnit(m, name);
        if (!unit) throw unitNotFound(name);
        if (workspace === undefined) {
          const workspaces = await this.repo.workspacesOf(m, unit.id);
          this.authz.authorizeUnitWide(principal, may, 'unit.delete', name, workspaces);
          if (!unit.deleted_at) throw new DomainError('not_deleted', `unit ${name} is not deleted`);
          await this.repo.undeleteUnit(m, unit.id);
          return;
        }
        if (unit.deleted_at) {
          throw new DomainError('unit_deleted', `unit ${name} is deleted; undelete the unit first`);
        }
        const state = await this.repo.findState(m, unit.id, workspace);
        if (!state) throw stateNotFound(name, workspace);
        await this.repo.lockStateRow(m, state.id);
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
  async purge(name: string, workspace: string | undefined, principal: Principal): Promise<void> {
    assertUnitName(name);
    const may = await this.mayActOn(principal, 'unit.purge', name, workspace);
    const keys = await this.audited(
      (blobs: string[]) =>
        changeEvent(principal, workspace === undefined ? 'unit.purge' : 'state.purge', {
          action: 'unit.purge',
          unit: name,
          workspace,
          door: 'api',
          details: { blobs: blobs.length },
        }),
      async (m) => {
        const unit = await this.repo.lockUnit(m, name);
        if (!unit) throw unitNotFound(name);
        if (workspace === undefined) {
          const workspaces = await this.repo.workspacesOf(m, unit.id);
          this.authz.authorizeUnitWide(principal, may, 'unit.purge', name, workspaces);
          if (!unit.deleted_at) {
            throw new DomainError(
              'not_deleted',
              `unit ${name} must be deleted before it is purged`,
            );
          }
          await this.hooks.purgeAll(m, { unit: name });
          return this.repo.purgeUnit(m, unit.id);
        }
        const state = await this.repo.findState(m, unit.id, workspace);
        if (!state) throw stateNotFound(name, workspace);
        await this.repo.lockStateRow(m, state.id);
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
    await this.deleteBlobs(keys);
  }

  // ---------------------------------------------------------------- state

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
   * The write path. 1) stream the body into a new blob while hashing and inspecting it; the
   * blob is durable before step 2 and nothing points at it yet. 2) one transaction: lock the
   * state row, check the lock authority and the serial guard against the current version,
   * insert the version and swap the pointer. A failure anywhere leaves the previous version
   * current; a blob that no version refers to is deleted.
   */
  async write(req: WriteRequest): Promise<WriteResultView> {
    assertUnitName(req.unit);
    const resource = { unit: req.unit, workspace: req.workspace };
    await this.authorizeWrite(req.principal, resource);
    await this.assertMayCreateOnUse(req.principal, req.unit);
    if (req.contentLength !== undefined && req.contentLength > this.config.maxStateBytes) {
      req.body.resume();
      throw tooLarge(this.config.maxStateBytes);
    }
    // Room in the server's inspection budget before the body is read (waits, or 503).
    let lease: InspectionLease;
    try {
      lease = await this.budget.acquire(req.contentLength ?? 0);
    } catch (e) {
      req.body.resume(); // drained, so the connection can still carry the answer
      throw e;
    }

    const key = newBlobKey();
    const ingest = new StateIngest(this.config.maxStateBytes, {
      digestKey: this.digester.keys,
      onBytes: (n) => lease.use(n),
    });
    let stored = false;
    try {
      await this.blobs.put(key, feed(req.body, ingest));
      stored = true;
      const digest = ingest.result();
      if (req.contentMd5 !== undefined) {
        const expected = Buffer.from(req.contentMd5, 'base64').toString('hex');
        if (expected !== digest.md5) {
          throw new DomainError('checksum_mismatch', 'Content-MD5 does not match the body');
        }
      }
      req.verify?.(digest);
      // Digesting and serialising the outputs is CPU work: done before the transaction, which on
      // the embedded database holds its only connection.
      const facts =
        digest.inspected.kind === 'terraform'
          ? {
              ...this.digester.describeOutputs(digest.inspected.outputs),
              outputsJson: JSON.stringify(digest.inspected.outputs),
            }
          : null;
      const ctx: WriteContext = {
        principal: req.principal,
        unit: req.unit,
        workspace: req.workspace,
        inspected: digest.inspected,
      };
      const prepared = await this.hooks.prepareAll(ctx);
      const outcome = await this.repo.transaction(async (m) => {
        await req.inTransaction?.(m);
        const result = await this.commitWrite(m, req, key, digest.inspected, digest, facts);
        if (result.created) {
          this.failpoint('write.before-graph');
          await this.hooks.applyAll(m, { ...ctx, version: result.version }, prepared);
        }
        return result;
      });
      if (outcome.created) this.failpoint('write.after-commit');
      this.metrics?.stateWritten(req.door, digest.size, outcome.created);
      if (!outcome.created) await this.deleteBlobs([key]);
      await this.deleteBlobs(outcome.pruned);
      return { created: outcome.created, version: versionView(outcome.version) };
    } catch (e) {
      if (stored) await this.deleteBlobs([key]);
      throw e;
    } finally {
      lease.release();
    }
  }

  private async commitWrite(
    m: EntityManager,
    req: WriteRequest,
    key: string,
    inspected: InspectedState,
    digest: { sha256: string; md5: string; size: number },
    facts: (OutputFacts & { outputsJson: string }) | null,
  ): Promise<{ created: boolean; version: VersionRow; pruned: string[] }> {
    const { unit } = await this.repo.ensureUnit(m, req.unit, req.principal.subject);
    const ensured = await this.repo.ensureState(m, unit.id, req.workspace);
    const state = await this.repo.lockStateRow(m, ensured.id);
    assertMayWrite(
      await this.locks.holderOf(m, state.id),
      req.principal.subject,
      req.lockId,
      req.door,
    );

    const current = await this.currentOf(m, state);
    req.precondition?.(current);
    const encrypted = inspected.kind === 'encrypted';
    const serial = inspected.kind === 'terraform' ? inspected.serial : null;
    const lineage = inspected.kind === 'terraform' ? inspected.lineage : null;
    const decision = guardWrite(
      current && {
        encrypted: current.encrypted,
        serial: current.serial === null ? null : Number(current.serial),
        lineage: current.lineage,
        sha256: current.sha256,
      },
      { encrypted, serial, lineage, sha256: digest.sha256 },
    );
    switch (decision.kind) {
      case 'identical':
        return { created: false, version: current as VersionRow, pruned: [] };
      case 'reject':
        throw new DomainError('serial_conflict', `write refused: ${decision.reason}`);
      case 'accept':
        break;
    }
    const { version, pruned } = await this.commitVersion(m, state, {
      state_id: state.id,
      serial: serial === null ? null : String(serial),
      lineage,
      terraform_version: inspected.kind === 'terraform' ? inspected.terraformVersion : null,
      encrypted,
      sha256: digest.sha256,
      md5: digest.md5,
      size: String(digest.size),
      blob_key: key,
      outputs: facts?.outputsJson ?? null,
      output_digests: facts?.output_digests ?? null,
      sensitive_outputs: facts?.sensitive_outputs ?? null,
      output_set_digest: facts?.output_set_digest ?? null,
      public_output_set_digest: facts?.public_output_set_digest ?? null,
      created_by: req.principal.subject,
      door: req.door,
      restored_from: null,
    });
    await this.audit.recordIn(
      m,
      changeEvent(req.principal, 'state.write', {
        action: 'unit.write',
        unit: req.unit,
        workspace: req.workspace,
        door: req.door,
        details: {
          version: version.version,
          serial: serial,
          lineage_changed: decision.lineageChanged,
        },
      }),
    );
    return { created: true, version, pruned };
  }

  /**
   * A new version becomes the state's current one, in the caller's transaction (a write and a
   * restore alike): inserted, pointed at, and the oldest beyond STATEHOUSE_MAX_VERSIONS pruned.
   * Returns the blob keys no version refers to any more, to delete after the commit.
   */
  private async commitVersion(
    m: EntityManager,
    state: StateRow,
    v: NewVersion,
  ): Promise<{ version: VersionRow; pruned: string[] }> {
    const version = await this.repo.insertVersion(m, state, v);
    await this.repo.setCurrent(m, state.id, version.id);
    const pruned =
      this.config.maxVersions > 0
        ? await this.repo.pruneVersions(m, state.id, version.version, this.config.maxVersions)
        : [];
    return { version, pruned };
  }

  /** The current version of a live state, or null (no state, or the state is deleted). */
  private async currentOf(m: EntityManager, state: StateRow): Promise<VersionRow | null> {
    if (state.deleted_at || !state.current_version_id) return null;
    return (await this.repo.findVersionById(m, state.current_version_id)) ?? null;
  }

  /** Metadata of the current version, for HEAD-like answers; `state_not_found` when none. */
  async current(addr: StateAddress, principal: Principal): Promise<VersionView> {
    assertUnitName(addr.unit);
    await this.authz.authorize(principal, 'unit.read', addr);
    const { version } = await this.repo.findCurrent(this.repo.manager, addr.unit, addr.workspace);
    if (!version) throw stateNotFound(addr.unit, addr.workspace);
    return versionView(version);
  }

  /**
   * Opens the current state for reading. A blob that cannot be read is a 5xx, never "no
   * state": to Terraform a 404 means "create everything again".
   */
  async openCurrent(
    addr: StateAddress,
    principal: Principal,
    /** The byte range to read, decided once the size is known (undefined: all of it). */
    range?: (size: number) => ByteRange | undefined,
  ): Promise<OpenedState & { range?: ByteRange }> {
    assertUnitName(addr.unit);
    await this.authz.authorize(principal, 'unit.read', addr);
    for (let attempt = 0; ; attempt++) {
      const { version } = await this.repo.findCurrent(this.repo.manager, addr.unit, addr.workspace);
      if (!version) throw stateNotFound(addr.unit, addr.workspace);
      const bytes = range?.(Number(version.size));
      try {
        const body = await this.blobs.get(version.blob_key, bytes);
        this.recordRead(principal, addr, version.version, false);
        return { version: versionView(version), body, range: bytes };
      } catch (e) {
        // A write may have replaced (and retention pruned) the version we just read: look again.
        if (e instanceof BlobNotFoundError && attempt === 0) continue;
        throw this.unreadable(e, addr, version.version);
      }
    }
  }

  async deleteState(
    addr: StateAddress,
    principal: Principal,
    door: Door,
    lockId?: string,
    options: {
      /** A condition on the current version (S3's `If-Match`); throw to refuse. */
      precondition?: (current: { md5: string } | null) => void;
      /** Work that commits with the delete (the S3 door's replay record). */
      inTransaction?: TransactionStep;
    } = {},
  ): Promise<void> {
    assertUnitName(addr.unit);
    await this.authorizeWrite(principal, addr);
    await this.audited(
      changeEvent(principal, 'state.delete', {
        action: 'unit.write',
        unit: addr.unit,
        workspace: addr.workspace,
        door,
      }),
      async (m) => {
        const unit = await this.liveUnit(m, addr.unit);
        const found = await this.repo.findState(m, unit.id, addr.workspace);
        if (!found) throw stateNotFound(addr.unit, addr.workspace);
        const state = await this.repo.lockStateRow(m, found.id);
        const holder = await this.locks.holderOf(m, state.id);
        assertNotLockedByOther(holder, principal.subject, lockId);
        if (state.deleted_at || !state.current_version_id)
          throw stateNotFound(addr.unit, addr.workspace);
        options.precondition?.(await this.currentOf(m, state));
        await options.inTransaction?.(m);
        await this.repo.softDeleteState(m, state.id);
      },
    );
  }

  async outputs(addr: StateAddress, principal: Principal): Promise<OutputsView> {
    assertUnitName(addr.unit);
    await this.authz.authorize(principal, 'outputs.read', addr);
    const sensitive = await this.authz.can(principal, 'outputs.read-sensitive', addr);
    const { version } = await this.repo.findCurrent(this.repo.manager, addr.unit, addr.workspace);
    if (!version) throw stateNotFound(addr.unit, addr.workspace);
    if (version.encrypted) {
      throw new DomainError(
        'state_encrypted',
        'the current state is client-side encrypted; its outputs cannot be read by the server',
      );
    }
    return {
      version: version.version,
      serial: version.serial === null ? null : Number(version.serial),
      outputs: visibleOutputs(version.outputs, sensitive),
    };
  }

  /**
   * What a door serves to a reader: the state itself with `unit.read`; with only `outputs.read`,
   * a state made of the current version's outputs (no resources; sensitive outputs only with
   * `outputs.read-sensitive`), so `terraform_remote_state` consumers keep working while the
   * rest stays private. The view's size and hashes describe exactly the bytes served.
   */
  async openForRead(
    addr: StateAddress,
    principal: Principal,
    range?: (size: number) => ByteRange | undefined,
  ): Promise<OpenedState & { range?: ByteRange; synthesized: boolean }> {
    const mode = await this.readMode(addr, principal);
    if (mode === 'full')
      return { ...(await this.openCurrent(addr, principal, range)), synthesized: false };
    const { view, bytes } = await this.synthesized(addr, mode === 'outputs-sensitive');
    const bounds = range?.(bytes.length);
    this.recordRead(principal, addr, view.version, true);
    return {
      version: view,
      body: Readable.from([bounds ? bytes.subarray(bounds.start, bounds.end + 1) : bytes]),
      range: bounds,
      synthesized: true,
    };
  }

  /** HEAD: the size and hashes of exactly what `openForRead` would serve. */
  async describeForRead(addr: StateAddress, principal: Principal): Promise<VersionView> {
    const mode = await this.readMode(addr, principal);
    if (mode === 'full') return this.current(addr, principal);
    return (await this.synthesized(addr, mode === 'outputs-sensitive')).view;
  }

  /**
   * May the caller see that this unit exists (listings)? When no rule grants the whole unit,
   * any workspace of it the caller may see will do (rules restricted to workspaces).
   */
  private async canSeeUnit(principal: Principal, unit: UnitRow): Promise<boolean> {
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

  private async readModeOrNone(
    addr: StateAddress,
    principal: Principal,
  ): Promise<'full' | 'outputs' | 'outputs-sensitive' | 'none'> {
    if (await this.authz.can(principal, 'unit.read', addr)) return 'full';
    if (await this.authz.can(principal, 'outputs.read', addr)) {
      return (await this.authz.can(principal, 'outputs.read-sensitive', addr))
        ? 'outputs-sensitive'
        : 'outputs';
    }
    return 'none';
  }

  private async readMode(
    addr: StateAddress,
    principal: Principal,
  ): Promise<'full' | 'outputs' | 'outputs-sensitive'> {
    assertUnitName(addr.unit);
    const mode = await this.readModeOrNone(addr, principal);
    if (mode !== 'none') return mode;
    await this.authz.authorize(principal, 'unit.read', addr); // throws: the 403 names unit.read
    throw new DomainError('forbidden', `${principal.subject} may not unit.read on ${addr.unit}`);
  }

  private async synthesized(
    addr: StateAddress,
    sensitive: boolean,
  ): Promise<{ view: VersionView; bytes: Buffer }> {
    const { version } = await this.repo.findCurrent(this.repo.manager, addr.unit, addr.workspace);
    if (!version) throw stateNotFound(addr.unit, addr.workspace);
    return outputsOnlyState(version, sensitive);
  }

  /** State reads are audited off the request path (batched). */
  private recordRead(
    principal: Principal,
    addr: StateAddress,
    version: number,
    synthesized: boolean,
  ): void {
    this.audit.record(
      changeEvent(principal, 'state.read', {
        action: synthesized ? 'outputs.read' : 'unit.read',
        unit: addr.unit,
        workspace: addr.workspace,
        details: { version, synthesized },
      }),
    );
  }

  /** Live states with a current version that the caller may read (S3 listings). */
  async listReadableStates(
    principal: Principal,
  ): Promise<{ unit: string; workspace: string; size: number; md5: string; modified: Date }[]> {
    const out = [];
    for (const row of await this.repo.listLiveStates()) {
      const addr = { unit: row.unit, workspace: row.workspace };
      const mode = await this.readModeOrNone(addr, principal);
      if (mode === 'none') continue;
      let { size, md5 } = { size: Number(row.size), md5: row.md5 };
      if (mode !== 'full') {
        // An outputs-only reader is listed the size and ETag of the state it will be served;
        // a client-side encrypted state has nothing to serve it, so it is not listed.
        if (row.encrypted) continue;
        ({ size, md5 } = (await this.synthesized(addr, mode === 'outputs-sensitive')).view);
      }
      out.push({ ...addr, size, md5, modified: new Date(row.created_at) });
    }
    return out;
  }

  // ---------------------------------------------------------------- versions

  async listVersions(
    addr: StateAddress,
    principal: Principal,
    limit: number,
    cursor: string | undefined,
  ): Promise<VersionPageView> {
    assertUnitName(addr.unit);
    await this.authz.authorize(principal, 'version.read', addr);
    // The history of a state the caller may not even see would say that it exists.
    await this.readMode(addr, principal);
    const raw = decodeCursor(cursor);
    const before = raw === undefined ? undefined : Number(raw);
    if (before !== undefined && !Number.isInteger(before)) {
      throw new DomainError('invalid_request', 'cursor is not one this server returned');
    }
    const state = await this.anyState(addr);
    const rows = await this.repo.listVersions(state.id, before, limit + 1);
    const items = rows.slice(0, limit).map(versionView);
    return {
      items,
      nextCursor:
        rows.length > limit ? encodeCursor(String(items[items.length - 1].version)) : null,
    };
  }

  /**
   * The content of version `n`. Besides `version.read` it needs exactly what reading the current
   * state needs: `unit.read` for its bytes; with only `outputs.read`, a state made of that
   * version's outputs (as `openForRead` serves the current one). Audited like a state read.
   */
  async openVersion(
    addr: StateAddress,
    n: number,
    principal: Principal,
  ): Promise<OpenedState & { synthesized: boolean }> {
    assertUnitName(addr.unit);
    await this.authz.authorize(principal, 'version.read', addr);
    const mode = await this.readMode(addr, principal);
    const state = await this.anyState(addr);
    const row = await this.repo.findVersion(this.repo.manager, state.id, n);
    if (!row) throw versionNotFound(addr, n);
    if (mode !== 'full') {
      const { view, bytes } = outputsOnlyState(row, mode === 'outputs-sensitive');
      this.recordRead(principal, addr, n, true);
      return { version: view, body: Readable.from([bytes]), synthesized: true };
    }
    try {
      const body = await this.blobs.get(row.blob_key);
      this.recordRead(principal, addr, n, false);
      return { version: versionView(row), body, synthesized: false };
    } catch (e) {
      throw this.unreadable(e, addr, n);
    }
  }

  /**
   * Makes version `n` current again as a new version with the same bytes (and the same blob,
   * reference-counted). Terraform's next apply (serial + 1 of the restored one) then passes the
   * serial guard. Refused while another principal holds the lock.
   */
  async restore(
    addr: StateAddress,
    n: number,
    principal: Principal,
    lockId?: string,
  ): Promise<WriteResultView> {
    assertUnitName(addr.unit);
    await this.authz.authorize(principal, 'version.restore', addr);
    // A restore writes the state: what a write needs, so that no deny of either is bypassed.
    await this.authorizeWrite(principal, addr);
    // The restored version's consequences (its remote states, for the graph) as for a write.
    const stored = await this.inspectStored(addr, n);
    const ctx: WriteContext | undefined = stored && {
      principal,
      unit: addr.unit,
      workspace: addr.workspace,
      inspected: stored.inspected,
    };
    const prepared = ctx ? await this.hooks.prepareAll(ctx) : [];
    const result = await this.audited(
      (r: { created: boolean; version: VersionRow }) =>
        changeEvent(principal, 'state.restore', {
          action: 'version.restore',
          unit: addr.unit,
          workspace: addr.workspace,
          door: 'api',
          details: { from_version: n, new_version: r.version.version, created: r.created },
        }),
      async (m) => {
        // Share-locked like a write's: a unit delete waits for us, or we see it deleted (making
        // the state current again must not leave a live state under a deleted unit).
        const unit = await this.repo.shareUnit(m, addr.unit);
        if (!unit) throw unitNotFound(addr.unit);
        if (unit.deleted_at) {
          throw new DomainError('unit_deleted', `unit ${addr.unit} is deleted; undelete it first`);
        }
        const found = await this.repo.findState(m, unit.id, addr.workspace);
        if (!found) throw stateNotFound(addr.unit, addr.workspace);
        const state = await this.repo.lockStateRow(m, found.id);
        const holder = await this.locks.holderOf(m, state.id);
        assertNotLockedByOther(holder, principal.subject, lockId);
        const source = await this.repo.findVersion(m, state.id, n);
        if (!source) throw versionNotFound(addr, n);
        const current = await this.currentOf(m, state);
        if (current && current.sha256 === source.sha256) {
          return { created: false, version: current, pruned: [] as string[] };
        }
        const { version, pruned } = await this.commitVersion(m, state, {
          ...source,
          created_by: principal.subject,
          door: 'api',
          restored_from: source.version,
        });
        if (ctx && stored?.sha256 === source.sha256) {
          await this.hooks.applyAll(m, { ...ctx, version }, prepared);
        }
        return { created: true, version, pruned };
      },
    );
    await this.deleteBlobs(result.pruned);
    if (result.created) this.metrics?.versionRestored();
    return { created: result.created, version: versionView(result.version) };
  }

  /** Testing only (STATEHOUSE_TEST_FAILPOINTS): a crash right here, as a power cut would be. */
  private failpoint(name: Failpoint): void {
    if (this.config.failpoints.has(name)) process.kill(process.pid, 'SIGKILL');
  }

  /**
   * A stored version read back and inspected (for the write hooks of a restore); undefined when
   * there are no hooks, or it cannot be read (the restore goes on; the graph keeps what it had).
   */
  private async inspectStored(
    addr: StateAddress,
    n: number,
  ): Promise<{ inspected: InspectedState; sha256: string } | undefined> {
    if (!this.hooks.any) return undefined;
    const m = this.repo.manager;
    const unit = await this.repo.findUnit(m, addr.unit);
    const state = unit && (await this.repo.findState(m, unit.id, addr.workspace));
    const version = state && (await this.repo.findVersion(m, state.id, n));
    if (!version) return undefined;
    // Inspecting it counts against the server's inspection budget like a write (503 when full).
    const lease = await this.budget.acquire(Number(version.size));
    try {
      const inspector = new StateInspector({ digestKey: this.digester.keys });
      for await (const chunk of await this.blobs.get(version.blob_key)) {
        inspector.write(chunk as Buffer);
      }
      return { inspected: inspector.end(), sha256: version.sha256 };
    } catch (e) {
      this.logger.warn({ err: e }, 'could not read back a version being restored');
      return undefined;
    } finally {
      lease.release();
    }
  }

  /**
   * A change and its audit record in one transaction: both commit, or neither. `event` may be
   * computed from the change's result.
   */
  private audited<T>(
    event: SecurityEventInput | ((result: T) => SecurityEventInput),
    work: (m: EntityManager) => Promise<T>,
  ): Promise<T> {
    return this.repo.transaction(async (m) => {
      const result = await work(m);
      await this.audit.recordIn(m, typeof event === 'function' ? event(result) : event);
      return result;
    });
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

  // ---------------------------------------------------------------- helpers

  /**
   * Authorizes a delete, undelete or purge before its transaction: of one workspace, as any
   * action; of the whole unit, the unit-level part of `decideUnitWide` — the rest is decided
   * inside the transaction with the returned decider, once the unit's workspaces are known.
   */
  private async mayActOn(
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

  private async liveUnit(m: EntityManager, name: string): Promise<UnitRow> {
    const unit = await this.repo.findUnit(m, name);
    if (!unit || unit.deleted_at) throw unitNotFound(name);
    return unit;
  }

  /** The state of (unit, workspace) even when deleted: history stays listed until a purge. */
  private async anyState(addr: StateAddress): Promise<StateRow> {
    const m = this.repo.manager;
    const unit = await this.repo.findUnit(m, addr.unit);
    if (!unit) throw unitNotFound(addr.unit);
    const state = await this.repo.findState(m, unit.id, addr.workspace);
    if (!state) throw stateNotFound(addr.unit, addr.workspace);
    return state;
  }

  private unreadable(e: unknown, addr: StateAddress, version: number): DomainError {
    this.logger.error(
      { err: e, unit: addr.unit, workspace: addr.workspace, version },
      'stored state cannot be read',
    );
    return new DomainError(
      'blob_unreadable',
      `version ${version} of ${addr.unit} (workspace ${addr.workspace}) exists but its content cannot be read from blob storage`,
    );
  }

  /** Best effort after commit: a blob left behind is garbage, never a dangling version. */
  private deleteBlobs(keys: string[]): Promise<void> {
    return deleteBlobs(this.blobs, keys, this.logger);
  }
}

export function unitNotFound(name: string): DomainError {
  return new DomainError('unit_not_found', `unit ${name} does not exist`);
}

export function stateNotFound(unit: string, workspace: string): DomainError {
  return new DomainError('state_not_found', `${unit} (workspace ${workspace}) has no state`);
}

function versionNotFound(addr: StateAddress, n: number): DomainError {
  return new DomainError(
    'version_not_found',
    `${addr.unit} (workspace ${addr.workspace}) has no version ${n}`,
  );
}

/**
 * What an outputs-only reader is served of a version: a v4 state of its outputs and no
 * resources; the view's size and hashes describe exactly these bytes.
 */
function outputsOnlyState(
  version: VersionRow,
  sensitive: boolean,
): { view: VersionView; bytes: Buffer } {
  if (version.encrypted) {
    throw new DomainError(
      'forbidden',
      'this state is client-side encrypted: its outputs cannot be served to an outputs-only reader',
    );
  }
  const bytes = Buffer.from(
    JSON.stringify(
      {
        version: 4,
        terraform_version: version.terraform_version ?? '1.0.0',
        serial: Number(version.serial),
        lineage: version.lineage,
        outputs: visibleOutputs(version.outputs, sensitive),
        resources: [],
        check_results: null,
      },
      null,
      2,
    ) + '\n',
  );
  return {
    bytes,
    view: {
      ...versionView(version),
      size: bytes.length,
      md5: createHash('md5').update(bytes).digest('hex'),
      sha256: createHash('sha256').update(bytes).digest('hex'),
    },
  };
}

/** The outputs a reader may see: sensitive ones only with `outputs.read-sensitive`. */
function visibleOutputs(
  outputs: Record<string, unknown> | null,
  sensitive: boolean,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(outputs ?? {})) {
    if (!sensitive && (value as { sensitive?: unknown } | null)?.sensitive === true) continue;
    out[name] = value;
  }
  return out;
}
