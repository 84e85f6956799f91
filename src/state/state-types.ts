import type { Readable } from 'node:stream';
import type { Principal } from '../common/principal';
import type { TransactionStep } from '../database/sql';
import type { Door, VersionView } from './state.views';

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
  /**
   * Extra checks on the finished body's digests (the S3 door's payload hash and checksums), run
   * as the body ends, before its inspection ends; throw to refuse. The body is hashed once.
   */
  verify?: (digest: { sha256: string; md5: string; size: number }) => void;
  /** Work that commits with the write (the S3 door's replay record); throw to refuse. */
  inTransaction?: TransactionStep;
}

export interface OpenedState {
  version: VersionView;
  body: Readable;
}
