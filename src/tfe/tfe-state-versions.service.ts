import { Inject, Injectable } from '@nestjs/common';
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Readable } from 'node:stream';
import { CredentialRevocations } from '../auth/revocation/credential-revocations.service';
import { DomainError } from '../common/errors';
import { DEFAULT_WORKSPACE } from '../common/names';
import type { Principal } from '../common/principal';
import { APP_CONFIG, AppConfig } from '../config/config';
import { StateAccess } from '../state/state-access';
import { StateReader } from '../state/state-reader';
import type { OpenedState } from '../state/state-types';
import { StateRepository } from '../state/state.repository';
import type { VersionView } from '../state/state.views';
import { StateWriter } from '../state/state-writer';
import { workspaceOfUnit } from './tfe-names';
import { TfeRepository, TfeUploadRow } from './tfe.repository';
import type { TfeWorkspace } from './tfe-workspaces.service';

/** How long the upload URLs of an announced state version work. */
export const UPLOAD_TTL_SECONDS = 10 * 60;

export interface AnnouncedVersion {
  id: string;
  serial: number;
  lineage: string | null;
  md5: string;
  createdAt: Date;
  /** The secret of the two upload URLs. */
  capability: string;
}

/** A state version as this door shows it: announced (pending) or stored (finalized). */
export type TfeStateVersion =
  | { kind: 'pending'; upload: TfeUploadRow; capability?: string }
  | { kind: 'finalized'; unitId: string; unit: string; view: VersionView; current: boolean };

const sha256 = (s: string): Buffer => createHash('sha256').update(s).digest();

/**
 * State versions through the TFE door. Terraform announces a version (serial, md5, lineage)
 * with its credentials, then PUTs the bytes without any to the URL it was given: that URL is a
 * capability bound to the one announced version, for ten minutes. The announcement is checked
 * the way the write will be (RBAC, the caller's own lock, the serial), so a refusal reaches
 * Terraform before it uploads; the upload is then written through `StateWriter` as the
 * announcing principal under the lock it held — the same path as every door.
 */
@Injectable()
export class TfeStateVersionsService {
  constructor(
    private readonly repo: TfeRepository,
    private readonly states: StateRepository,
    private readonly writer: StateWriter,
    private readonly reader: StateReader,
    private readonly access: StateAccess,
    private readonly revocations: CredentialRevocations,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async announce(
    principal: Principal,
    ws: TfeWorkspace,
    input: { serial: number; md5: string; lineage: string | undefined },
  ): Promise<AnnouncedVersion> {
    await this.access.authorizeWrite(principal, ws.addr);
    if (!ws.lock) {
      throw new DomainError(
        'lock_not_held',
        `workspace ${ws.name} must be locked by you to create a state version (lock it first)`,
      );
    }
    if (ws.lock.principal !== principal.subject) {
      throw new DomainError(
        'locked',
        `workspace ${ws.name} is locked by ${ws.lock.principal}`,
        ws.lock,
      );
    }
    const current = ws.current;
    if (
      current &&
      !current.encrypted &&
      current.serial !== null &&
      (input.lineage === undefined || input.lineage === current.lineage)
    ) {
      if (input.serial < current.serial) {
        throw new DomainError(
          'serial_conflict',
          `serial ${input.serial} is older than the current serial ${current.serial} of lineage ${current.lineage}`,
        );
      }
      if (input.serial === current.serial && input.md5 !== current.md5) {
        throw new DomainError(
          'serial_conflict',
          `serial ${input.serial} is already stored with different content (lineage ${current.lineage})`,
        );
      }
    }
    await this.repo.sweepUploads();
    const id = `svu-${randomBytes(16).toString('hex')}`;
    const capability = randomBytes(32).toString('base64url');
    const createdAt = new Date();
    await this.repo.insertUpload({
      id,
      unit_id: ws.unit.id,
      serial: String(input.serial),
      lineage: input.lineage ?? null,
      md5: input.md5,
      lock_id: ws.lock.id,
      principal: { ...principal },
      capability_sha256: sha256(capability).toString('hex'),
      expires_at: new Date(createdAt.getTime() + UPLOAD_TTL_SECONDS * 1000),
    });
    return {
      id,
      serial: input.serial,
      lineage: input.lineage ?? null,
      md5: input.md5,
      createdAt,
      capability,
    };
  }

  /**
   * The raw upload. Checked: the capability (constant time), its expiry, that the announcing
   * credential was not revoked since, and the bytes against the announced md5. The same bytes
   * again (a retry) answer as the first time did.
   */
  async upload(
    id: string,
    capability: string,
    body: Readable,
    contentLength?: number,
  ): Promise<void> {
    const row = await this.uploadFor(id, capability, body);
    const unit = await this.states.findUnitById(row.unit_id);
    if (!unit || unit.deleted_at) {
      body.resume();
      throw new DomainError('not_found', 'the workspace of this state version no longer exists');
    }
    const principal = row.principal as unknown as Principal;
    await this.assertStillValid(principal, body);
    const result = await this.writer.write({
      unit: unit.name,
      workspace: DEFAULT_WORKSPACE,
      principal,
      door: 'tfe',
      body,
      lockId: row.lock_id,
      contentLength,
      contentMd5: Buffer.from(row.md5, 'hex').toString('base64'),
    });
    await this.repo.finishUpload(row.id, result.version.version);
  }

  private async uploadFor(id: string, capability: string, body: Readable): Promise<TfeUploadRow> {
    const row = /^svu-[0-9a-f]{32}$/.test(id) ? await this.repo.findUpload(id) : undefined;
    const given = sha256(capability);
    const expected = row ? Buffer.from(row.capability_sha256, 'hex') : randomBytes(32);
    if (!row || !timingSafeEqual(given, expected)) {
      body.resume();
      throw new DomainError('not_found', 'no state version is waiting for an upload at this URL');
    }
    if (new Date(row.expires_at).getTime() < Date.now()) {
      body.resume();
      throw new DomainError(
        'forbidden',
        'this upload URL has expired; run the command again to announce a new state version',
      );
    }
    return row;
  }

  private async assertStillValid(principal: Principal, body: Readable): Promise<void> {
    const credential = principal.credential;
    const expired = credential?.notAfter !== undefined && credential.notAfter * 1000 < Date.now();
    if (expired || (credential && (await this.revocations.isRevoked(credential.parent)))) {
      body.resume();
      throw new DomainError(
        'unauthenticated',
        'the credential that announced this state version has been revoked or has expired',
      );
    }
  }

  /** A state version by id: an announced one, or a stored version of a workspace's unit. */
  async find(
    principal: Principal,
    ref: { kind: 'upload'; id: string } | { kind: 'version'; unitId: string; version: number },
  ): Promise<TfeStateVersion> {
    if (ref.kind === 'upload') {
      const row = await this.repo.findUpload(ref.id);
      if (!row) throw new DomainError('not_found', `state version ${ref.id} not found`);
      const unit = await this.states.findUnitById(row.unit_id);
      if (!unit) throw new DomainError('not_found', `state version ${ref.id} not found`);
      const addr = { unit: unit.name, workspace: DEFAULT_WORKSPACE };
      // Only its announcer, or a reader of the workspace, sees an announced version.
      if ((row.principal as { subject?: string }).subject !== principal.subject) {
        await this.access.readMode(principal, addr);
      }
      if (row.version === null) return { kind: 'pending', upload: row };
      return this.find(principal, { kind: 'version', unitId: unit.id, version: row.version });
    }
    const unit = await this.states.findUnitById(ref.unitId);
    if (!unit || !workspaceOfUnit(unit.name)) {
      throw new DomainError('not_found', 'state version not found');
    }
    const addr = { unit: unit.name, workspace: DEFAULT_WORKSPACE };
    await this.access.readMode(principal, addr);
    const current = await this.states.findServed(unit.name, DEFAULT_WORKSPACE);
    if (current && current.version === ref.version) {
      const view = await this.reader.describeForRead(principal, addr);
      return { kind: 'finalized', unitId: unit.id, unit: unit.name, view, current: true };
    }
    const view = await this.reader.describeVersion(principal, addr, ref.version);
    return { kind: 'finalized', unitId: unit.id, unit: unit.name, view, current: false };
  }

  /** The bytes of a stored version: the current one as every door serves it (outputs only for an outputs reader). */
  async open(
    principal: Principal,
    version: Extract<TfeStateVersion, { kind: 'finalized' }>,
  ): Promise<OpenedState> {
    const addr = { unit: version.unit, workspace: DEFAULT_WORKSPACE };
    if (version.current) return this.reader.openForRead(principal, addr);
    return this.reader.openVersion(principal, addr, version.view.version);
  }

  publicUrl(path: string): string {
    const base = this.config.publicUrl;
    return `${base.endsWith('/') ? base.slice(0, -1) : base}${path}`;
  }
}
