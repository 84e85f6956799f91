import { DomainError, ErrorCode } from '../common/errors';

/** The S3 error codes the door answers with, and their HTTP statuses (as S3 sends them). */
export const S3_ERRORS = {
  AccessDenied: 403,
  AuthorizationHeaderMalformed: 400,
  BadDigest: 400,
  EntityTooLarge: 400,
  EntityTooSmall: 400,
  ExpiredToken: 400,
  IncompleteBody: 400,
  InternalError: 500,
  InvalidAccessKeyId: 403,
  InvalidArgument: 400,
  InvalidPart: 400,
  InvalidPartOrder: 400,
  InvalidRange: 416,
  InvalidRequest: 400,
  InvalidToken: 400,
  InvalidURI: 400,
  MalformedXML: 400,
  MethodNotAllowed: 405,
  MissingContentLength: 411,
  MissingSecurityHeader: 400,
  NoSuchBucket: 404,
  NoSuchKey: 404,
  NoSuchUpload: 404,
  NotImplemented: 501,
  OperationAborted: 409,
  PreconditionFailed: 412,
  RequestTimeTooSkewed: 403,
  ServiceUnavailable: 503,
  SignatureDoesNotMatch: 403,
  SlowDown: 503,
  XAmzContentSHA256Mismatch: 400,
} as const;
export type S3ErrorCode = keyof typeof S3_ERRORS;

/** An error of the S3 door, answered as S3 XML. */
export class S3Error extends Error {
  constructor(
    readonly code: S3ErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'S3Error';
  }

  get status(): number {
    return S3_ERRORS[this.code];
  }
}

/** How the core's domain errors read through the S3 door. */
export function s3CodeOf(code: ErrorCode): S3ErrorCode {
  switch (code) {
    case 'forbidden':
    case 'unauthenticated':
      return 'AccessDenied';
    case 'unit_not_found':
    case 'state_not_found':
    case 'version_not_found':
    case 'lock_not_found':
    case 'not_found':
      return 'NoSuchKey';
    case 'lock_conflict':
    case 'precondition_failed':
      return 'PreconditionFailed';
    case 'locked':
    case 'lock_mismatch':
    case 'lock_not_held':
    case 'serial_conflict':
    case 'unit_exists':
    case 'conflict':
    case 'unit_deleted':
    case 'not_deleted':
      return 'OperationAborted';
    case 'invalid_state':
    case 'invalid_name':
    case 'state_encrypted':
      return 'InvalidArgument';
    case 'invalid_request':
    case 'unknown_route':
      return 'InvalidRequest';
    case 'checksum_mismatch':
      return 'BadDigest';
    case 'too_large':
      return 'EntityTooLarge';
    case 'unavailable':
      return 'ServiceUnavailable';
    case 'slow_down':
      return 'SlowDown';
    case 'blob_unreadable':
    case 'internal':
      return 'InternalError';
  }
}

export function toS3Error(e: DomainError): S3Error {
  return new S3Error(s3CodeOf(e.code), e.message);
}
