import { HttpException } from '@nestjs/common';
import { DomainError } from './errors';

const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'EPIPE',
  '57P01', // admin_shutdown
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now
  '57014', // query_canceled (statement timeout)
  '53300', // too_many_connections
  '08000',
  '08001',
  '08003',
  '08004',
  '08006',
]);

/** An error as the drivers shape it: TypeORM wraps the driver's in driverError, others in cause. */
interface ErrorLink {
  code?: unknown;
  message?: unknown;
  driverError?: unknown;
  cause?: unknown;
}

/** True when `test` holds for `e` or one of the errors it wraps (at most 4 deep). */
function anyInChain(e: unknown, test: (err: ErrorLink) => boolean): boolean {
  for (let cur: unknown = e, depth = 0; cur && depth < 4; depth++) {
    const err = cur as ErrorLink;
    if (test(err)) return true;
    cur = err.driverError ?? err.cause;
  }
  return false;
}

/** True for errors that mean "the database (or blob store) cannot be reached right now". */
export function isUnavailable(e: unknown): boolean {
  return anyInChain(e, (err) => {
    if (typeof err.code === 'string' && UNAVAILABLE_CODES.has(err.code)) return true;
    const msg = typeof err.message === 'string' ? err.message : '';
    return /timeout exceeded when trying to connect|Connection terminated|connection is closed|Client has encountered a connection error|the database system is (starting up|shutting down)/i.test(
      msg,
    );
  });
}

/**
 * PostgreSQL refusing the text it was given: a NUL character (22021, or 22P05 for the `\u0000`
 * escape in jsonb), an unpaired surrogate escape in json (22P02 with a Unicode message).
 */
const ENCODING_CODES = new Set(['22021', '22P05']);
const ENCODING_MESSAGE =
  /unsupported Unicode escape sequence|invalid byte sequence for encoding|Unicode (high|low) surrogate must|invalid Unicode surrogate pair/i;

/**
 * True for errors that mean "the database cannot store this text". Requests are checked for
 * such text where they enter; this catches whatever slips past, so it is a 400, never a 500.
 */
export function isUnstorableText(e: unknown): boolean {
  return anyInChain(
    e,
    (err) =>
      (typeof err.code === 'string' && ENCODING_CODES.has(err.code)) ||
      (typeof err.message === 'string' && ENCODING_MESSAGE.test(err.message)),
  );
}

/** Everything a door can throw, as a DomainError (or an HttpException Nest raised itself). */
export function toDomainError(e: unknown): DomainError | HttpException {
  if (e instanceof DomainError || e instanceof HttpException) return e;
  if (isUnavailable(e)) {
    return new DomainError('unavailable', 'the database or blob store is unavailable; try again');
  }
  if (isUnstorableText(e)) {
    return new DomainError(
      'invalid_request',
      'the request holds text that cannot be stored (a NUL character or an unpaired UTF-16 surrogate)',
    );
  }
  return new DomainError('internal', 'internal error');
}
