import { Injectable } from '@nestjs/common';
import { DataSource, EntityManager } from 'typeorm';
import { sqlRows } from '../../database/sql';
import type { CredentialParent } from '../../common/principal';

/** Every replica drops its cached revocation answers on a NOTIFY on this channel. */
export const REVOCATIONS_CHANNEL = 'statehouse_revocations';

/** SQL for the revocation list of parent credentials (`credential_revocations`). */
@Injectable()
export class RevocationRepository {
  constructor(private readonly db: DataSource) {}

  /** Whether `parent` is on the list. One primary-key lookup. */
  async isRevoked(parent: CredentialParent): Promise<boolean> {
    const rows = await sqlRows<{ one: number }>(
      this.db.manager,
      'SELECT 1 AS one FROM credential_revocations WHERE parent_kind = $1 AND parent_id = $2',
      [parent.kind, parent.id],
    );
    return rows.length > 0;
  }

  /**
   * Puts `parent` on the list in the caller's transaction, kept until `keepSeconds` from now or
   * `toleranceSeconds` after the parent's own expiry, whichever is sooner (nothing derived from
   * it is valid later; LEAST ignores the NULL of a parent that never expires). Rows past their
   * time are removed here, so the list stays as short as the revocations of the last lifetime.
   * The NOTIFY reaches every replica when the transaction commits.
   */
  async revoke(
    m: EntityManager,
    parent: CredentialParent,
    keepSeconds: number,
    parentExpiresAt: Date | null,
    toleranceSeconds: number,
  ): Promise<void> {
    await m.query(
      `INSERT INTO credential_revocations (parent_kind, parent_id, keep_until)
       VALUES ($1, $2, LEAST(now() + make_interval(secs => $3::float8),
                             $4::timestamptz + make_interval(secs => $5::float8)))
       ON CONFLICT (parent_kind, parent_id)
         DO UPDATE SET keep_until = GREATEST(credential_revocations.keep_until, EXCLUDED.keep_until)`,
      [parent.kind, parent.id, keepSeconds, parentExpiresAt, toleranceSeconds],
    );
    await m.query('DELETE FROM credential_revocations WHERE keep_until < now()');
    await m.query(`SELECT pg_notify('${REVOCATIONS_CHANNEL}', '')`);
  }
}
