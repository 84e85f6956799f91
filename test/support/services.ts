import { Logger } from '@nestjs/common';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { DataSource } from 'typeorm';
import { AuditService, StatementRecord } from '../../src/audit/audit.service';
import { SecurityEvent } from '../../src/audit/security-event';
import { Principal } from '../../src/common/principal';
import { DomainError } from '../../src/common/errors';
import { afterCommit } from '../../src/database/transaction';
import { AppConfig, loadConfig } from '../../src/config/config';
import { LockRepository } from '../../src/state/locks/lock.repository';
import { LocksService } from '../../src/state/locks/locks.service';
import { AuthorizationService } from '../../src/rbac/authorization.service';
import { RbacCache } from '../../src/rbac/rbac-cache';
import { RbacRepository } from '../../src/rbac/rbac.repository';
import { RbacService } from '../../src/rbac/rbac.service';
import { StateRepository } from '../../src/state/state.repository';
import { StateAccess } from '../../src/state/state-access';
import { StateReader } from '../../src/state/state-reader';
import { StateWriter } from '../../src/state/state-writer';
import { UnitsService } from '../../src/state/units.service';
import { InspectionBudget } from '../../src/state/inspection-budget';
import { OutputDigester } from '../../src/state/output-digests';
import { StateWriteHooks } from '../../src/state/write-hooks';
import { BlobStore } from '../../src/storage/blob-store';
import { tfStateText } from './tf-state';

Logger.overrideLogger(false);

/** An AuditService that also keeps what it recorded, so tests can assert on events. */
export class RecordingAudit extends AuditService {
  readonly events: SecurityEvent[] = [];
  override record(input: Parameters<AuditService['record']>[0]): SecurityEvent {
    const e = super.record(input);
    this.events.push(e);
    return e;
  }

  override async recordIn(
    m: Parameters<AuditService['recordIn']>[0],
    input: Parameters<AuditService['recordIn']>[1],
  ): Promise<SecurityEvent> {
    const e = await super.recordIn(m, input);
    // Kept when the change commits, like the log line: a rolled-back attempt recorded nothing.
    afterCommit(m, () => this.events.push(e));
    return e;
  }

  override inStatement(input: Parameters<AuditService['inStatement']>[0]): StatementRecord {
    const record = super.inStatement(input);
    // Kept when the statement stored it, like the log line.
    return {
      ...record,
      stored: () => {
        record.stored();
        this.events.push(record.event);
      },
    };
  }
}

export const ADMIN: Principal = {
  subject: 'bootstrap-admin',
  kind: 'bootstrap',
  via: 'bootstrap-token',
};
export const ALICE: Principal = { subject: 'user:alice', kind: 'user', via: 'access-token' };
export const BOB: Principal = { subject: 'user:bob', kind: 'user', via: 'access-token' };

export interface Services {
  config: AppConfig;
  repo: StateRepository;
  units: UnitsService;
  writer: StateWriter;
  reader: StateReader;
  access: StateAccess;
  locks: LocksService;
  audit: RecordingAudit;
  blobs: BlobStore;
  authz: AuthorizationService;
  /** Rules for the tests that need them (sharing the decisions' cache, as in the app). */
  rbac: RbacService;
}

/** The state and lock services wired by hand over a real database, for db-tier tests. */
export function buildServices(
  ds: DataSource,
  blobs: BlobStore,
  env: Record<string, string> = {},
): Services {
  const config = loadConfig({
    NODE_ENV: 'test',
    STATEHOUSE_DATA_DIR: mkdtempSync(join(tmpdir(), 'statehouse-svc-')),
    STATEHOUSE_STORAGE: 'memory',
    ...env,
  });
  const repo = new StateRepository(ds);
  const lockRepo = new LockRepository(ds);
  const audit = new RecordingAudit();
  const rbacRepo = new RbacRepository(ds);
  const cache = new RbacCache(config);
  const authz = new AuthorizationService(rbacRepo, cache, audit);
  const digester = OutputDigester.withKey(Buffer.alloc(32, 7));
  const access = new StateAccess(repo, authz);
  const hooks = new StateWriteHooks();
  const units = new UnitsService(repo, blobs, authz, audit, access, hooks, lockRepo);
  const writer = new StateWriter(
    repo,
    blobs,
    config,
    audit,
    access,
    digester,
    hooks,
    new InspectionBudget(config),
    lockRepo,
  );
  const reader = new StateReader(repo, blobs, authz, audit, access);
  const locks = new LocksService(lockRepo, repo, access, authz, audit);
  const rbac = new RbacService(rbacRepo, authz, cache, audit);
  return { config, repo, units, writer, reader, access, locks, audit, blobs, authz, rbac };
}

/** A Terraform v4 state body (pretty-printed like Terraform writes it). */
export function tfState(
  serial: number,
  lineage = 'lineage-1',
  outputs: Record<string, unknown> = {},
): string {
  return tfStateText({ serial, lineage, outputs });
}

export function body(text: string | Buffer): Readable {
  return Readable.from([Buffer.isBuffer(text) ? text : Buffer.from(text)]);
}

/** The DomainError a promise rejects with; fails the test when it resolves. */
export async function failure(p: Promise<unknown>): Promise<DomainError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof DomainError) return e;
    throw e;
  }
  throw new Error('expected a DomainError, got success');
}

/** The DomainError `fn` throws; fails the test when it returns. */
export function thrown(fn: () => unknown): DomainError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(DomainError);
    return e as DomainError;
  }
  throw new Error('expected a DomainError');
}

export async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}
