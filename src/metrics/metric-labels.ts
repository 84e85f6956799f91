/**
 * The label values of Statehouse's metrics, and the pure functions that compute them. Every
 * value comes from a fixed set (or, for the management API's operations, from the set of
 * registered routes): never a unit name, a principal, a raw path or an id, so the number of
 * series stays bounded whatever clients send.
 */
import type { Door } from '../common/request-context';
import { BLOB_STORE_OPERATIONS } from '../storage/observed-blob.store';

/** The `door` label: how a request came in. */
export const DOOR_LABELS = ['s3', 'backend', 'api', 'tfe'] as const;
export type DoorLabel = (typeof DOOR_LABELS)[number];

/** The request context's door (the HTTP backend is `http` there) as a label. */
export function doorLabel(door: Door | undefined): DoorLabel {
  switch (door) {
    case 's3':
      return 's3';
    case 'http':
      return 'backend';
    case 'tfe':
      return 'tfe';
    case 'api':
    case undefined:
      return 'api';
  }
}

/** The door of a request that reached no route: its path is all there is to go by. */
export function doorOfUnroutedPath(url: string): DoorLabel {
  if (/^\/s3(?:[/?]|$)/i.test(url)) return 's3';
  if (/^\/v1\/backend(?:[/?]|$)/i.test(url)) return 'backend';
  if (/^\/api\/v2(?:[/?]|$)/i.test(url)) return 'tfe';
  return 'api';
}

/**
 * The `status` label: the class of the answer's status code, or `aborted` when the connection
 * closed before the server answered at all (the client gave up waiting).
 */
export const STATUS_LABELS = ['2xx', '3xx', '4xx', '5xx', 'aborted'] as const;
export type StatusLabel = (typeof STATUS_LABELS)[number];

/** Index into STATUS_LABELS (so a series can be kept per class without building a string). */
export function statusIndex(statusCode: number, answered: boolean): number {
  if (!answered) return 4;
  if (statusCode < 300) return 0;
  if (statusCode < 400) return 1;
  if (statusCode < 500) return 2;
  return 3;
}

/**
 * Operation of a request that reached no route of the server: an unknown path (404), one
 * refused before routing (a malformed backend path), Swagger UI's pages under `/docs`.
 */
export const UNROUTED_OPERATION = 'unrouted';

/**
 * The S3 operations the door answers, named as AWS names them; `NotImplemented` for the
 * requests it refuses as such (sub-resources, ListObjects v1, unknown methods).
 */
export const S3_OPERATIONS = [
  'ListBuckets',
  'HeadBucket',
  'GetBucketLocation',
  'GetBucketVersioning',
  'ListObjects',
  'ListObjectsV2',
  'CreateBucket',
  'GetObject',
  'HeadObject',
  'PutObject',
  'DeleteObject',
  'CreateMultipartUpload',
  'UploadPart',
  'CompleteMultipartUpload',
  'AbortMultipartUpload',
  'ListParts',
  'NotImplemented',
] as const;
export type S3Operation = (typeof S3_OPERATIONS)[number];

/** Operations of Terraform's HTTP backend, as its client names them. */
export const BACKEND_OPERATIONS = [
  'get',
  'head',
  'update',
  'delete',
  'lock',
  'unlock',
  'unsupported',
] as const;
export type BackendOperation = (typeof BACKEND_OPERATIONS)[number];

/**
 * A management API operation: the method and the route's path template as registered
 * (`GET /v1/units/:name/state`) — one value per route, whatever the request's own path.
 */
export function apiOperation(method: string, routePath: string): string {
  return `${method} ${routePath}`;
}

/** Why authentication failed: a fixed set (the audit log keeps the full reason). */
export const AUTH_FAILURE_REASONS = [
  'missing',
  'malformed',
  'invalid',
  'expired',
  'revoked',
  'bad_signature',
  'clock_skew',
  'replay',
  'other',
] as const;
export type AuthFailureReason = (typeof AUTH_FAILURE_REASONS)[number];

/** The reasons of a rejected token (`TokenRejected.reason`, shown in brackets after the message). */
const TOKEN_FAILURES = new Map<string, AuthFailureReason>(
  Object.entries({
    malformed: 'malformed',
    bad_algorithm: 'malformed',
    unknown_key: 'invalid',
    bad_signature: 'bad_signature',
    expired: 'expired',
    not_yet_valid: 'expired',
    wrong_issuer: 'invalid',
    wrong_audience: 'invalid',
    missing_claim: 'invalid',
    session_mismatch: 'invalid',
    revoked: 'revoked',
  }),
);

/** S3 error codes of authentication failures that name their reason unambiguously. */
const S3_AUTH_CODES = new Map<string, AuthFailureReason>(
  Object.entries({
    InvalidAccessKeyId: 'invalid',
    SignatureDoesNotMatch: 'bad_signature',
    ExpiredToken: 'expired',
    RequestTimeTooSkewed: 'clock_skew',
    AuthorizationHeaderMalformed: 'malformed',
    InvalidRequest: 'malformed',
    InvalidArgument: 'malformed',
    InvalidToken: 'invalid',
    MissingSecurityHeader: 'missing',
  }),
);

/**
 * The reason label of an `auth.failed` security event, from what every such event carries: the
 * S3 error code (the S3 door), a rejected token's reason in brackets, or the failed check's
 * message. Anything not recognised is `other` — still counted, never a new label value.
 */
export function authFailureReason(
  details: Record<string, string | number | boolean | null> | undefined,
): AuthFailureReason {
  const code = typeof details?.code === 'string' ? details.code : undefined;
  const byCode = code === undefined ? undefined : S3_AUTH_CODES.get(code);
  if (byCode) return byCode;
  const reason = typeof details?.reason === 'string' ? details.reason : '';
  if (/\breplay\b/i.test(reason)) return 'replay';
  const bracketed = /\(([a-z_]+)\)\s*$/.exec(reason)?.[1];
  const byToken = bracketed === undefined ? undefined : TOKEN_FAILURES.get(bracketed);
  if (byToken) return byToken;
  for (const [pattern, label] of REASON_PATTERNS) if (pattern.test(reason)) return label;
  return 'other';
}

/** What the failed checks' messages say, tried in order (the first match decides). */
const REASON_PATTERNS: [RegExp, AuthFailureReason][] = [
  [/^authentication required|anonymous access|need their session token|carries no aws/i, 'missing'],
  [/not valid yet/i, 'clock_skew'],
  [/\bexpired\b/i, 'expired'],
  [/\brevoked\b|already used|has ended/i, 'revoked'],
  [
    /malformed|not signed|must be signed|requires a valid|must be less than|missing required/i,
    'malformed',
  ],
  [/\bsignature\b/i, 'bad_signature'],
  [
    /unknown|not valid|invalid|not a statehouse|not one this server issued|another issuer|does not match/i,
    'invalid',
  ],
];

/** Authorization decisions: allowed or refused. */
export const AUTHZ_RESULTS = ['allow', 'deny'] as const;

/** What the audit log failed to keep (`AuditService.lost()`), while the process runs. */
export const AUDIT_LOSS_REASONS = ['queue_full', 'unstorable'] as const;

/** Kinds of database errors. */
export const DB_ERROR_KINDS = [
  'connection',
  'timeout',
  'serialization',
  'constraint',
  'other',
] as const;
export type DbErrorKind = (typeof DB_ERROR_KINDS)[number];

/** The SQLSTATE of a driver error (TypeORM wraps pg's errors in `driverError`). */
function sqlState(e: unknown): string | undefined {
  const err = e as { code?: unknown; driverError?: { code?: unknown } } | null | undefined;
  const code = err?.driverError?.code ?? err?.code;
  return typeof code === 'string' ? code : undefined;
}

/**
 * The kind of a failed statement or a broken pooled connection. `unreachable` is the caller's
 * verdict that the database could not be reached (`isUnavailable`); it is asked here only after
 * the codes that say more.
 */
export function dbErrorKind(e: unknown, unreachable: boolean): DbErrorKind {
  const state = sqlState(e);
  const message = e instanceof Error ? e.message : '';
  if (state === '57014' || /query read timeout|timeout exceeded/i.test(message)) return 'timeout';
  if (state === '40001' || state === '40P01') return 'serialization';
  if (state?.startsWith('23')) return 'constraint';
  if (unreachable) return 'connection';
  return 'other';
}

/** Blob store operations whose failures are counted. */
export const BLOB_OPERATIONS = BLOB_STORE_OPERATIONS;

/** How a cached read was answered: from memory, or from the database. */
export const CACHE_RESULTS = ['hit', 'miss'] as const;

/** Statements sent to the database: the audit log's inserts, and all the rest. */
export const STATEMENT_KINDS = ['audit', 'other'] as const;

/** The credentials whose verifications are counted (`tokenVerifications` in src/auth/tokens). */
export const VERIFIED_CREDENTIALS = ['access_token', 'session_token', 'api_token'] as const;
/** How a credential's verification ended: checked in full, a kept verdict reused, refused. */
export const VERIFICATION_RESULTS = ['verified', 'reused', 'refused'] as const;
