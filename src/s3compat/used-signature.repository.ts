import { Injectable } from '@nestjs/common';
import { DataSource, EntityManager } from 'typeorm';
import { SqlParams, sqlRows } from '../database/sql';

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

  /**
   * The claim as a CTE body of another repository's statement (`StatementStep`), inserting the
   * record only when `when` holds. It has no `ON CONFLICT`: a signature used before fails the
   * whole statement on the primary key (`isUsedBefore`), so the change it guards is not made —
   * and a concurrent claim of the same signature waits for this statement, as in `claim`.
   */
  claimFragment(params: SqlParams, signatureSha256: string, expiresAt: Date, when: string): string {
    return `INSERT INTO s3_used_signatures (signature_sha256, expires_at)
            SELECT ${params.add(signatureSha256, 'text')}, ${params.add(expiresAt, 'timestamptz')}
             WHERE ${when}`;
  }

  /** Whether `e` is the failure of a `claimFragment` whose signature was used before. */
  isUsedBefore(e: unknown): boolean {
    const err = e as {
      code?: unknown;
      constraint?: unknown;
      driverError?: { code?: unknown; constraint?: unknown };
    };
    const code = err?.driverError?.code ?? err?.code;
    const constraint = err?.driverError?.constraint ?? err?.constraint;
    return code === '23505' && constraint === 'pk_s3_used_signatures';
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
