import { Injectable } from '@nestjs/common';
import { DataSource, EntityManager } from 'typeorm';
import { sqlRows } from '../database/sql';
import { transaction } from '../database/transaction';

export interface RefreshTokenRow {
  id: string;
  family_id: string;
  token_hash: string;
  subject: string;
  email: string | null;
  groups: string[];
  created_at: Date;
  family_expires_at: Date;
  used_at: Date | null;
  revoked_at: Date | null;
}

export interface ApiTokenRow {
  id: string;
  name: string;
  token_hash: string;
  subject: string;
  created_by: string;
  created_at: Date;
  expires_at: Date | null;
  last_used_at: Date | null;
  revoked_at: Date | null;
}

/** A person's latest login: what their API tokens carry, until `expires_at`. */
export interface LoginIdentityRow {
  subject: string;
  email: string | null;
  groups: string[];
  logged_in_at: Date;
  expires_at: Date;
}

/** An API token with the live latest login of the subject it acts as (null when none). */
export interface ApiTokenWithLogin extends ApiTokenRow {
  login_email: string | null;
  login_groups: string[] | null;
  login_expires_at: Date | null;
}

/**
 * SQL for refresh-token families, API tokens (only hashes of the secrets are stored) and each
 * person's latest login.
 */
@Injectable()
export class IdentityRepository {
  constructor(private readonly db: DataSource) {}

  transaction<T>(work: (m: EntityManager) => Promise<T>): Promise<T> {
    return transaction(this.db, work);
  }

  async insertRefreshToken(
    m: EntityManager,
    row: Pick<
      RefreshTokenRow,
      'family_id' | 'token_hash' | 'subject' | 'email' | 'groups' | 'family_expires_at'
    >,
  ): Promise<void> {
    await m.query(
      `INSERT INTO refresh_tokens (family_id, token_hash, subject, email, groups, family_expires_at)
       VALUES ($1, $2, $3, $4, $5, $6)`,
      [
        row.family_id,
        row.token_hash,
        row.subject,
        row.email,
        JSON.stringify(row.groups),
        row.family_expires_at,
      ],
    );
  }

  /** The token row, locked: two concurrent uses of one refresh token are serialised. */
  async lockRefreshToken(m: EntityManager, hash: string): Promise<RefreshTokenRow | undefined> {
    const rows = await sqlRows<RefreshTokenRow>(
      m,
      'SELECT * FROM refresh_tokens WHERE token_hash = $1 FOR UPDATE',
      [hash],
    );
    return rows[0];
  }

  async markRefreshTokenUsed(m: EntityManager, id: string): Promise<void> {
    await m.query('UPDATE refresh_tokens SET used_at = now() WHERE id = $1', [id]);
  }

  async familyRevoked(m: EntityManager, familyId: string): Promise<boolean> {
    const rows = await sqlRows<{ n: number }>(
      m,
      'SELECT count(*)::int AS n FROM refresh_tokens WHERE family_id = $1 AND revoked_at IS NOT NULL',
      [familyId],
    );
    return rows[0].n > 0;
  }

  async revokeFamily(m: EntityManager, familyId: string): Promise<void> {
    await m.query(
      'UPDATE refresh_tokens SET revoked_at = now() WHERE family_id = $1 AND revoked_at IS NULL',
      [familyId],
    );
  }

  /**
   * Records a login as the subject's latest: its email and groups, until `expires_at`. Of two
   * logins racing, the later one stays.
   */
  async recordLogin(
    m: EntityManager,
    row: Pick<LoginIdentityRow, 'subject' | 'email' | 'groups' | 'expires_at'>,
  ): Promise<void> {
    await m.query(
      `INSERT INTO login_identities (subject, email, groups, logged_in_at, expires_at)
       VALUES ($1, $2, $3, now(), $4)
       ON CONFLICT (subject) DO UPDATE
         SET email = EXCLUDED.email, groups = EXCLUDED.groups,
             logged_in_at = EXCLUDED.logged_in_at, expires_at = EXCLUDED.expires_at
       WHERE login_identities.logged_in_at <= EXCLUDED.logged_in_at`,
      [row.subject, row.email, JSON.stringify(row.groups), row.expires_at],
    );
  }

  async findLogin(subject: string): Promise<LoginIdentityRow | undefined> {
    const rows = await sqlRows<LoginIdentityRow>(
      this.db.manager,
      'SELECT * FROM login_identities WHERE subject = $1',
      [subject],
    );
    return rows[0];
  }

  async insertApiToken(
    m: EntityManager,
    row: Pick<ApiTokenRow, 'name' | 'token_hash' | 'subject' | 'created_by' | 'expires_at'>,
  ): Promise<ApiTokenRow> {
    const rows = await sqlRows<ApiTokenRow>(
      m,
      `INSERT INTO api_tokens (name, token_hash, subject, created_by, expires_at)
       VALUES ($1, $2, $3, $4, $5) RETURNING *`,
      [row.name, row.token_hash, row.subject, row.created_by, row.expires_at],
    );
    return rows[0];
  }

  /**
   * The token, with the latest login of the subject it acts as while that login still counts
   * (a `svc:` subject never logs in, so it has none). One indexed read per authentication.
   */
  async findApiTokenByHash(hash: string): Promise<ApiTokenWithLogin | undefined> {
    const rows = await sqlRows<ApiTokenWithLogin>(
      this.db.manager,
      `SELECT t.*, l.email AS login_email, l.groups AS login_groups,
              l.expires_at AS login_expires_at
         FROM api_tokens t
         LEFT JOIN login_identities l ON l.subject = t.subject AND l.expires_at > now()
        WHERE t.token_hash = $1`,
      [hash],
    );
    return rows[0];
  }

  /** Records use at most once a minute per token, so authentication stays a read. */
  async touchApiToken(id: string): Promise<void> {
    await this.db.query(
      `UPDATE api_tokens SET last_used_at = now()
        WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < now() - interval '60 seconds')`,
      [id],
    );
  }

  /** Tokens acting as or created by `subject`; all tokens when `subject` is undefined. */
  async listApiTokens(subject: string | undefined): Promise<ApiTokenRow[]> {
    return sqlRows<ApiTokenRow>(
      this.db.manager,
      `SELECT * FROM api_tokens WHERE $1::text IS NULL OR subject = $1 OR created_by = $1
        ORDER BY created_at DESC`,
      [subject ?? null],
    );
  }

  async findApiToken(id: string): Promise<ApiTokenRow | undefined> {
    const rows = await sqlRows<ApiTokenRow>(
      this.db.manager,
      'SELECT * FROM api_tokens WHERE id = $1',
      [id],
    );
    return rows[0];
  }

  async revokeApiToken(m: EntityManager, id: string): Promise<void> {
    await m.query('UPDATE api_tokens SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL', [
      id,
    ]);
  }
}
