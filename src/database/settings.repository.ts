import type { Queryable } from './sql';

/**
 * SQL for the `settings` table (one text value per key: server-wide generated secrets, the
 * bootstrap token's hash, RBAC's initialised flag). The only code that writes it; each caller
 * passes where the statement runs (the pool, its transaction, or its advisory-lock connection).
 */

export async function readSetting(q: Queryable, key: string): Promise<string | undefined> {
  const rows = (await q.query('SELECT value FROM settings WHERE key = $1', [key])) as {
    value: string;
  }[];
  return rows[0]?.value;
}

/** Every setting whose key starts with `prefix`, by the rest of its key. */
export async function readSettingsWithPrefix(
  q: Queryable,
  prefix: string,
): Promise<Map<string, string>> {
  const rows = (await q.query('SELECT key, value FROM settings WHERE left(key, length($1)) = $1', [
    prefix,
  ])) as { key: string; value: string }[];
  return new Map(rows.map((r) => [r.key.slice(prefix.length), r.value]));
}

/** Stores `value` unless the key has one; true when this call stored it. */
export async function insertSettingIfAbsent(
  q: Queryable,
  key: string,
  value: string,
): Promise<boolean> {
  const rows = (await q.query(
    'INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING RETURNING key',
    [key, value],
  )) as { key: string }[];
  return rows.length > 0;
}

/** Stores `value` under the key, replacing what was there. */
export async function putSetting(q: Queryable, key: string, value: string): Promise<void> {
  await q.query(
    `INSERT INTO settings (key, value) VALUES ($1, $2)
     ON CONFLICT (key) DO UPDATE SET value = $2, updated_at = now()`,
    [key, value],
  );
}
