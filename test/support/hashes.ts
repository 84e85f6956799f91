import { createHash } from 'node:crypto';

/** The SHA-256 of `data`, in lowercase hex. */
export const sha256Hex = (data: Buffer | string): string =>
  createHash('sha256').update(data).digest('hex');
