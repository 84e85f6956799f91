import { Injectable, Logger, Inject } from '@nestjs/common';
import { BytesReadable } from '../common/streams';
import { AuditService } from '../audit/audit.service';
import { changeEvent } from '../audit/events';
import type { Principal } from '../common/principal';
import { decodeCursor, encodeCursor } from '../common/cursor';
import { DomainError } from '../common/errors';
import { assertUnitName } from '../common/names';
import { AuthorizationService } from '../rbac/authorization.service';
import { BLOB_STORE, BlobNotFoundError, BlobStore, ByteRange } from '../storage/blob-store';
import { outputsOnlyState, visibleOutputs } from './outputs-only';
import { StateAccess } from './state-access';
import { stateNotFound, unitNotFound, versionNotFound } from './state-errors';
import type { OpenedState, StateAddress } from './state-types';
import { StateRepository, StateRow } from './state.repository';
import { OutputsView, VersionPageView, versionView, VersionView } from './state.views';

/**
 * Reading states: the current version, its outputs, the history, one version, and the
 * outputs-only states served to readers who may read only outputs. Every read is audited (off
 * the request path).
 */
@Injectable()
export class StateReader {
  private readonly logger = new Logger(StateReader.name);

  constructor(
    private readonly repo: StateRepository,
    @Inject(BLOB_STORE) private readonly blobs: BlobStore,
    private readonly authz: AuthorizationService,
    private readonly audit: AuditService,
    private readonly access: StateAccess,
  ) {}

  /** Metadata of the current version, for HEAD-like answers; `state_not_found` when none. */
  async current(principal: Principal, addr: StateAddress): Promise<VersionView> {
    assertUnitName(addr.unit);
    await this.authz.authorize(principal, 'unit.read', addr);
    const version = await this.repo.findServed(addr.unit, addr.workspace);
    if (!version) throw stateNotFound(addr.unit, addr.workspace);
    return versionView(version);
  }

  /**
   * Opens the current state for reading. A blob that cannot be read is a 5xx, never "no
   * state": to Terraform a 404 means "create everything again".
   */
  async openCurrent(
    principal: Principal,
    addr: StateAddress,
    /** The byte range to read, decided once the size is known (undefined: all of it). */
    range?: (size: number) => ByteRange | undefined,
  ): Promise<OpenedState & { range?: ByteRange }> {
    assertUnitName(addr.unit);
    await this.authz.authorize(principal, 'unit.read', addr);
    for (let attempt = 0; ; attempt++) {
      const version = await this.repo.findServed(addr.unit, addr.workspace);
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

  async outputs(principal: Principal, addr: StateAddress): Promise<OutputsView> {
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
    principal: Principal,
    addr: StateAddress,
    range?: (size: number) => ByteRange | undefined,
  ): Promise<OpenedState & { range?: ByteRange; synthesized: boolean }> {
    const mode = await this.access.readMode(principal, addr);
    if (mode === 'full')
      return { ...(await this.openCurrent(principal, addr, range)), synthesized: false };
    const { view, bytes } = await this.synthesized(addr, mode === 'outputs-sensitive');
    const bounds = range?.(bytes.length);
    this.recordRead(principal, addr, view.version, true);
    return {
      version: view,
      body: new BytesReadable(bounds ? bytes.subarray(bounds.start, bounds.end + 1) : bytes),
      range: bounds,
      synthesized: true,
    };
  }

  /** HEAD: the size and hashes of exactly what `openForRead` would serve. */
  async describeForRead(principal: Principal, addr: StateAddress): Promise<VersionView> {
    const mode = await this.access.readMode(principal, addr);
    if (mode === 'full') return this.current(principal, addr);
    return (await this.synthesized(addr, mode === 'outputs-sensitive')).view;
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
      const mode = await this.access.readModeOrNone(principal, addr);
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

  /** The metadata of version `n` (`version.read` and `unit.read`): no bytes read, no audit. */
  async describeVersion(principal: Principal, addr: StateAddress, n: number): Promise<VersionView> {
    assertUnitName(addr.unit);
    await this.authz.authorize(principal, 'version.read', addr);
    await this.authz.authorize(principal, 'unit.read', addr);
    const state = await this.anyState(addr);
    const row = await this.repo.findVersion(this.repo.manager, state.id, n);
    if (!row) throw versionNotFound(addr, n);
    return versionView(row);
  }

  async listVersions(
    principal: Principal,
    addr: StateAddress,
    limit: number,
    cursor: string | undefined,
  ): Promise<VersionPageView> {
    assertUnitName(addr.unit);
    await this.authz.authorize(principal, 'version.read', addr);
    // The history of a state the caller may not even see would say that it exists.
    await this.access.readMode(principal, addr);
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
    principal: Principal,
    addr: StateAddress,
    n: number,
  ): Promise<OpenedState & { synthesized: boolean }> {
    assertUnitName(addr.unit);
    await this.authz.authorize(principal, 'version.read', addr);
    const mode = await this.access.readMode(principal, addr);
    const state = await this.anyState(addr);
    const row = await this.repo.findVersion(this.repo.manager, state.id, n);
    if (!row) throw versionNotFound(addr, n);
    if (mode !== 'full') {
      const { view, bytes } = outputsOnlyState(row, mode === 'outputs-sensitive');
      this.recordRead(principal, addr, n, true);
      return { version: view, body: new BytesReadable(bytes), synthesized: true };
    }
    try {
      const body = await this.blobs.get(row.blob_key);
      this.recordRead(principal, addr, n, false);
      return { version: versionView(row), body, synthesized: false };
    } catch (e) {
      throw this.unreadable(e, addr, n);
    }
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
}
