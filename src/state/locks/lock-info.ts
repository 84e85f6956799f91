import { randomUUID } from 'node:crypto';
import { DomainError } from '../../common/errors';
import { textProblem } from '../../common/text';

export const MAX_LOCK_INFO_BYTES = 64 * 1024;
const MAX_LOCK_ID_LENGTH = 256;

/**
 * Reads Terraform's LockInfo (`{"ID":…,"Operation":…,"Who":…,…}`) from a request body. The
 * JSON is kept exactly as sent, so the holder's LockInfo goes back to other clients unchanged.
 * When `generateId` is set (the API), a missing ID is generated and the JSON re-serialised.
 */
export function parseLockInfo(body: Buffer, generateId: boolean): { id: string; infoJson: string } {
  const text = body.toString('utf8');
  let parsed: unknown;
  try {
    parsed = text.trim() === '' && generateId ? {} : JSON.parse(text);
  } catch {
    throw new DomainError('invalid_request', 'lock info is not valid JSON');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new DomainError(
      'invalid_request',
      'lock info must be a JSON object (Terraform LockInfo)',
    );
  }
  const info = parsed as Record<string, unknown>;
  if (info.ID === undefined && generateId) {
    const withId = { ID: randomUUID(), ...info };
    return { id: withId.ID, infoJson: JSON.stringify(withId) };
  }
  if (typeof info.ID !== 'string' || info.ID === '') {
    throw new DomainError('invalid_request', 'lock info has no "ID" string');
  }
  if (
    info.ID.length > MAX_LOCK_ID_LENGTH ||
    hasControlCharacter(info.ID) ||
    textProblem(info.ID) !== undefined
  ) {
    throw new DomainError(
      'invalid_request',
      `lock "ID" must be at most ${MAX_LOCK_ID_LENGTH} printable characters`,
    );
  }
  return { id: info.ID, infoJson: text };
}

/** The ID a release names, from its LockInfo body; undefined for an empty body (force-unlock). */
export function lockIdFromBody(body: Buffer): string | undefined {
  const text = body.toString('utf8').trim();
  if (text === '') return undefined;
  return parseLockInfo(body, false).id;
}

function hasControlCharacter(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c < 0x20 || (c >= 0x7f && c <= 0x9f)) return true;
  }
  return false;
}
