/**
 * Domain errors. Services throw these; each door has one exception filter that turns a code
 * into its own wire format (JSON for the API and the HTTP backend, S3 XML for `/s3`).
 */
export type ErrorCode =
  | 'invalid_request'
  | 'unknown_route'
  | 'invalid_name'
  | 'invalid_state'
  | 'checksum_mismatch'
  | 'unauthenticated'
  | 'forbidden'
  | 'unit_not_found'
  | 'state_not_found'
  | 'version_not_found'
  | 'lock_not_found'
  | 'not_found'
  | 'unit_exists'
  | 'conflict'
  | 'unit_deleted'
  | 'not_deleted'
  | 'locked'
  | 'lock_conflict'
  | 'precondition_failed'
  | 'lock_mismatch'
  | 'lock_not_held'
  | 'serial_conflict'
  | 'state_encrypted'
  | 'too_large'
  | 'unavailable'
  | 'slow_down'
  | 'blob_unreadable'
  | 'internal';

/** Terraform's lock description, as the client sent it (parsed) plus who took it. */
export interface HeldLock {
  /** The LockInfo JSON exactly as the client sent it. */
  infoJson: string;
  id: string;
  principal: string;
  createdAt: Date;
}

export class DomainError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    /** The lock that caused the refusal, for codes that answer with the holder's LockInfo. */
    readonly lock?: HeldLock,
  ) {
    super(message);
    this.name = 'DomainError';
  }
}

export const invalidRequest = (message: string): DomainError =>
  new DomainError('invalid_request', message);

/** HTTP status for each code on the JSON doors. */
export function httpStatusOf(code: ErrorCode): number {
  switch (code) {
    case 'invalid_request':
    case 'unknown_route':
    case 'invalid_name':
    case 'invalid_state':
    case 'checksum_mismatch':
      return 400;
    case 'unauthenticated':
      return 401;
    case 'forbidden':
      return 403;
    case 'unit_not_found':
    case 'state_not_found':
    case 'version_not_found':
    case 'lock_not_found':
    case 'not_found':
      return 404;
    case 'unit_exists':
    case 'conflict':
    case 'unit_deleted':
    case 'not_deleted':
    case 'locked':
    case 'lock_conflict':
    case 'lock_mismatch':
    case 'lock_not_held':
    case 'serial_conflict':
    case 'state_encrypted':
      return 409;
    case 'precondition_failed':
      return 412;
    case 'too_large':
      return 413;
    case 'unavailable':
    case 'slow_down':
      return 503;
    case 'blob_unreadable':
    case 'internal':
      return 500;
  }
}
