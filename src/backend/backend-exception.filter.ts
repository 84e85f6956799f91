import { ArgumentsHost, Catch, ExceptionFilter } from '@nestjs/common';
import type { Response } from 'express';
import type { ServerResponse } from 'node:http';
import { describeError, sendError } from '../common/api-exception.filter';
import { DomainError } from '../common/errors';

/**
 * Terraform's http backend reads the body of a refused LOCK as the holder's LockInfo, so lock
 * refusals answer with that JSON exactly as the holder sent it: 423 for a held lock, 409 for
 * an ID mismatch or a write without the holder's ID. Everything else is the JSON error format.
 */
@Catch()
export class BackendExceptionFilter implements ExceptionFilter {
  catch(exception: unknown, host: ArgumentsHost): void {
    answerBackendError(exception, host.switchToHttp().getResponse<Response>());
  }
}

/** The answer to an error of the HTTP backend: the filter's, and the lean read route's. */
export function answerBackendError(exception: unknown, res: ServerResponse): void {
  const { status, body, error } = describeError(exception);
  if (error instanceof DomainError && error.lock) {
    const lockStatus = error.code === 'lock_conflict' ? 423 : 409;
    sendError(res, lockStatus, 'application/json', error.lock.infoJson);
    return;
  }
  if (status === 401) res.setHeader('WWW-Authenticate', 'Basic realm="statehouse"');
  sendError(res, status, 'application/json', JSON.stringify(body));
}
