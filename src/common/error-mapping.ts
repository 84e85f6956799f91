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

/** True for errors that mean "the database (or blob store) cannot be reached right now". */
export function isUnavailable(e: unknown): boolean {
  for (let cur: unknown = e, depth = 0; cur && depth < 4; depth++) {
    const err = cur as {
      code?: unknown;
      message?: unknown;
      driverError?: unknown;
      cause?: unknown;
    };
    if (typeof err.code === 'string' && UNAVAILABLE_CODES.has(err.code)) return true;
    const msg = typeof err.message === 'string' ? err.message : '';
    if (
      /timeout exceeded when trying to connect|Connection terminated|connection is closed|Client has encountered a connection error|the database system is (starting up|shutting down)/i.test(
        msg,
      )
    ) {
      return true;
    }
    cur = err.driverError ?? err.cause;
  }
  return false;
}

/** Everything a door can throw, as a DomainError (or an HttpException Nest raised itself). */
export function toDomainError(e: unknown): DomainError | HttpException {
  if (e instanceof DomainError || e instanceof HttpException) return e;
  if (isUnavailable(e)) {
    return new DomainError('unavailable', 'the database or blob store is unavailable; try again');
  }
  return new DomainError('internal', 'internal error');
}
