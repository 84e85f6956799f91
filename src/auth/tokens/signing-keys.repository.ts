import type { JWK } from 'jose';
import type { Queryable } from '../../database/sql';

/** SQL for `signing_keys`: the only code that writes or reads it. */

export interface KeyRow {
  kid: string;
  /** Null for a key configured from a file: only its public half is stored. */
  private_pem: string | null;
  public_jwk: JWK;
  created_at: Date;
  retired_at: Date | null;
}

/** A configured key's public half (so other replicas verify its tokens), active again. */
export async function putPublicKey(q: Queryable, kid: string, jwk: JWK): Promise<void> {
  await q.query(
    `INSERT INTO signing_keys (kid, private_pem, public_jwk) VALUES ($1, NULL, $2)
     ON CONFLICT (kid) DO UPDATE SET retired_at = NULL`,
    [kid, JSON.stringify(jwk)],
  );
}

export async function insertGeneratedKey(
  q: Queryable,
  kid: string,
  privatePem: string,
  jwk: JWK,
): Promise<void> {
  await q.query('INSERT INTO signing_keys (kid, private_pem, public_jwk) VALUES ($1, $2, $3)', [
    kid,
    privatePem,
    JSON.stringify(jwk),
  ]);
}

/** Every other active key stops signing from now (it keeps verifying for a while). */
export async function retireKeysOtherThan(q: Queryable, kid: string): Promise<void> {
  await q.query(
    'UPDATE signing_keys SET retired_at = now() WHERE kid <> $1 AND retired_at IS NULL',
    [kid],
  );
}

/** The newest generated key that still signs. */
export async function findSigningKey(q: Queryable): Promise<KeyRow | undefined> {
  const rows = (await q.query(
    `SELECT * FROM signing_keys WHERE private_pem IS NOT NULL AND retired_at IS NULL
      ORDER BY created_at DESC LIMIT 1`,
  )) as KeyRow[];
  return rows[0];
}

/** Keys that verify: active ones, and those retired less than `graceSeconds` ago. */
export async function findVerifyingKeys(q: Queryable, graceSeconds: number): Promise<KeyRow[]> {
  return (await q.query(
    `SELECT * FROM signing_keys
      WHERE retired_at IS NULL OR retired_at > now() - make_interval(secs => $1)`,
    [graceSeconds],
  )) as KeyRow[];
}
