import { Injectable } from '@nestjs/common';
import { DataSource, EntityManager } from 'typeorm';
import { sqlRows } from '../database/sql';

/** SQL for the signatures of accepted S3 writes (replay protection). */
@Injectable()
export class UsedSignatureRepository {
  constructor(private readonly db: DataSource) {}

  /**
   * Claims a signature for the caller's transaction: true when it was not used before. Safe
   * across replicas: a concurrent claim of the same signature waits on the primary key until
   * this transaction ends, then sees the row (refused) or, after a rollback, inserts it.
   */
  async claim(m: EntityManager, signatureSha256: string, expiresAt: Date): Promise<boolean> {
    const rows = await sqlRows<{ signature_sha256: string }>(
      m,
      `INSERT INTO s3_used_signatures (signature_sha256, expires_at) VALUES ($1, $2)
       ON CONFLICT (signature_sha256) DO NOTHING RETURNING signature_sha256`,
      [signatureSha256, expiresAt],
    );
    return rows.length === 1;
  }

  /** The same claim in a statement of its own (after a refused request). */
  claimAlone(signatureSha256: string, expiresAt: Date): Promise<boolean> {
    return this.claim(this.db.manager, signatureSha256, expiresAt);
  }

  /** Removes records of signatures that expired before `before`; answers how many. */
  async sweep(before: Date): Promise<number> {
    const rows = await sqlRows<{ signature_sha256: string }>(
      this.db.manager,
      'DELETE FROM s3_used_signatures WHERE expires_at < $1 RETURNING signature_sha256',
      [before],
    );
    return rows.length;
  }
}
