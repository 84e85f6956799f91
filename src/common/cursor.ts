import { DomainError } from './errors';

/**
 * Opaque page cursors (the management API's `cursor`, the S3 door's continuation token): the
 * last key of a page, base64url-encoded. A cursor is accepted only if it is one this server could
 * have returned — it must decode to a non-empty value and re-encode to exactly the same text.
 */
export function encodeCursor(value: string): string {
  return Buffer.from(value, 'utf8').toString('base64url');
}

/** The key a cursor stands for; `undefined` for no cursor; a 400 for one not made here. */
export function decodeCursor(cursor: string | undefined): string | undefined {
  if (cursor === undefined || cursor === '') return undefined;
  const value = tryDecodeCursor(cursor);
  if (value === undefined) {
    throw new DomainError('invalid_request', 'cursor is not one this server returned');
  }
  return value;
}

/** The key a non-empty cursor stands for, or `undefined` when it is not one `encodeCursor` made. */
export function tryDecodeCursor(cursor: string): string | undefined {
  const value = Buffer.from(cursor, 'base64url').toString('utf8');
  return value === '' || encodeCursor(value) !== cursor ? undefined : value;
}
