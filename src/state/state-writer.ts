import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { EntityManager } from 'typeorm';
import { AuditService, StatementRecord } from '../audit/audit.service';
import { changeEvent } from '../audit/events';
import type { Principal } from '../common/principal';
import { DomainError } from '../common/errors';
import { assertUnitName } from '../common/names';
import { feed } from '../common/streams';
import { APP_CONFIG, AppConfig, Failpoint } from '../config/config';
import type { TransactionStep } from '../database/sql';
import { afterCommit } from '../database/transaction';
import { MetricsService } from '../metrics/metrics.service';
import { BLOB_STORE, BlobStore } from '../storage/blob-store';
import { deleteBlobs } from '../storage/delete-blobs';
import { auditedChange } from './audited-change';
import { InspectionBudget, InspectionLease } from './inspection-budget';
import { assertMayWrite, assertNotLockedByOther } from './locks/lock-authority';
import { LockRepository } from './locks/lock.repository';
import { OutputDigester, OutputFacts } from './output-digests';
import { guardWrite } from './serial-guard';
import { StateAccess } from './state-access';
import { stateNotFound, unitNotFound, versionNotFound } from './state-errors';
import { StateIngest, tooLarge } from './state-ingest';
import { InspectedState, StateInspector } from './state-inspector';
import type { StateAddress, WriteRequest } from './state-types';
import { NewVersion, StateRepository, StateRow, UnitRow, VersionRow } from './state.repository';
import { Door, versionView, WriteResultView } from './state.views';
import { StateWriteHooks, WriteContext } from './write-hooks';

/** Written once, by `put`, under a key nothing else uses. */
function newBlobKey(): string {
  const id = randomUUID();
  return `states/${id.slice(0, 2)}/${id}`;
}

/**
 * Everything that changes a state's bytes, through every door: a write (with its serial guard
 * and the lock authority, checked inside its transaction), a delete, and a restore. A write and a
 * restore both end in `commitVersion`.
 */
@Injectable()
export class StateWriter {
  private readonly logger = new Logger(StateWriter.name);

  constructor(
    private readonly repo: StateRepository,
    @Inject(BLOB_STORE) private readonly blobs: BlobStore,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly audit: AuditService,
    private readonly access: StateAccess,
    private readonly digester: OutputDigester,
    private readonly hooks: StateWriteHooks,
    private readonly budget: InspectionBudget,
    private readonly locks: LockRepository,
    @Optional() private readonly metrics?: MetricsService,
  ) {}

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
    await this.access.authorizeWrite(req.principal, resource);
    await this.access.assertMayCreateOnUse(req.principal, req.unit);
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
      verify: req.verify,
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
      if (!outcome.created) await deleteBlobs(this.blobs, [key], this.logger);
      await deleteBlobs(this.blobs, outcome.pruned, this.logger);
      return { created: outcome.created, version: versionView(outcome.version) };
    } catch (e) {
      if (stored) await deleteBlobs(this.blobs, [key], this.logger);
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
    const state = await this.repo.ensureLockedWriteTarget(m, req, req.principal.subject);
    // The lock and the current version in one statement, once the row is ours.
    const { holder, version: current } = await this.repo.heldLockAndVersion(
      m,
      state.id,
      state.deleted_at ? null : state.current_version_id,
    );
    assertMayWrite(holder, req.principal.subject, req.lockId, req.door);
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
    // The audit row goes into the version's own statement: it commits with it, or neither.
    const record = this.audit.inStatement(
      changeEvent(req.principal, 'state.write', {
        action: 'unit.write',
        unit: req.unit,
        workspace: req.workspace,
        door: req.door,
        details: {
          version: state.next_version,
          serial: serial,
          lineage_changed: decision.lineageChanged,
        },
      }),
    );
    const { version, pruned } = await this.commitVersion(
      m,
      state,
      {
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
      },
      record.insert,
    );
    // Logged once the change has committed (the transaction may run again after a deadlock).
    afterCommit(m, record.stored);
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
    alongside?: StatementRecord['insert'],
  ): Promise<{ version: VersionRow; pruned: string[] }> {
    const version = await this.repo.insertCurrentVersion(m, state, v, alongside);
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

  async deleteState(
    principal: Principal,
    addr: StateAddress,
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
    await this.access.authorizeWrite(principal, addr);
    await auditedChange(
      this.repo,
      this.audit,
      changeEvent(principal, 'state.delete', {
        action: 'unit.write',
        unit: addr.unit,
        workspace: addr.workspace,
        door,
      }),
      async (m) => {
        const unit = await this.liveUnit(m, addr.unit);
        const state = await this.lockUnlockedState(m, principal, unit, addr, lockId);
        if (state.deleted_at || !state.current_version_id)
          throw stateNotFound(addr.unit, addr.workspace);
        options.precondition?.(await this.currentOf(m, state));
        await options.inTransaction?.(m);
        await this.repo.softDeleteState(m, state.id);
      },
    );
  }

  /**
   * Makes version `n` current again as a new version with the same bytes (and the same blob,
   * reference-counted). Terraform's next apply (serial + 1 of the restored one) then passes the
   * serial guard. Refused while another principal holds the lock.
   */
  async restore(
    principal: Principal,
    addr: StateAddress,
    n: number,
    lockId?: string,
  ): Promise<WriteResultView> {
    assertUnitName(addr.unit);
    await this.access.authorizeRestore(principal, addr);
    // The restored version's consequences (its remote states, for the graph) as for a write.
    const stored = await this.inspectStored(addr, n);
    const ctx: WriteContext | undefined = stored && {
      principal,
      unit: addr.unit,
      workspace: addr.workspace,
      inspected: stored.inspected,
    };
    const prepared = ctx ? await this.hooks.prepareAll(ctx) : [];
    const result = await auditedChange(
      this.repo,
      this.audit,
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
        const state = await this.lockUnlockedState(m, principal, unit, addr, lockId);
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
    await deleteBlobs(this.blobs, result.pruned, this.logger);
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

  private async liveUnit(m: EntityManager, name: string): Promise<UnitRow> {
    const unit = await this.repo.findUnit(m, name);
    if (!unit || unit.deleted_at) throw unitNotFound(name);
    return unit;
  }

  /**
   * The state a delete or restore changes, its row locked; refused (`locked`) while another
   * principal holds its lock, or when `lockId` is not the lock's.
   */
  private async lockUnlockedState(
    m: EntityManager,
    principal: Principal,
    unit: UnitRow,
    addr: StateAddress,
    lockId: string | undefined,
  ): Promise<StateRow> {
    const found = await this.repo.findState(m, unit.id, addr.workspace);
    if (!found) throw stateNotFound(addr.unit, addr.workspace);
    const state = await this.repo.lockStateRow(m, found.id);
    assertNotLockedByOther(await this.locks.holderOf(m, state.id), principal.subject, lockId);
    return state;
  }
}
