import { ArgumentsHost, Catch, ExceptionFilter } from '@nestjs/common';
import type { Response } from 'express';
import type { ServerResponse } from 'node:http';
import { describeError, RETRY_AFTER_SECONDS, sendError } from '../common/api-exception.filter';
import { DomainError } from '../common/errors';
import { errorDocument, JSONAPI_MEDIA_TYPE } from './jsonapi';

const TITLES: Record<number, string> = {
  400: 'bad request',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not found',
  409: 'conflict',
  412: 'precondition failed',
  413: 'payload too large',
  422: 'invalid attribute',
  429: 'too many requests',
  500: 'internal error',
  503: 'service unavailable',
};

/**
 * The TFE door's errors, as go-tfe reads them: a JSON:API `errors` document with the status
 * go-tfe maps (404 → not found, 401, 409 on the lock actions). A name Terraform cannot use is
 * a 422; everything a client can cause is a 4xx, because go-tfe retries a 5xx again and again.
 * A busy server answers 429 with Retry-After and X-RateLimit-Reset (go-tfe's rate-limit wait).
 */
@Catch()
export class TfeExceptionFilter implements ExceptionFilter {
  catch(exception: unknown, host: ArgumentsHost): void {
    answerTfeError(exception, host.switchToHttp().getResponse<Response>());
  }
}

export function answerTfeError(exception: unknown, res: ServerResponse): void {
  const { status: described, body, error } = describeError(exception);
  let status = described;
  if (error instanceof DomainError) {
    if (error.code === 'invalid_name') status = 422;
    if (error.code === 'unknown_route') status = 404;
    if (error.code === 'slow_down') {
      // Busy (the inspection budget): go-tfe waits out a 429 for X-RateLimit-Reset seconds and
      // tries again, where a 503 would count against its retries of server errors.
      status = 429;
      res.setHeader('Retry-After', String(RETRY_AFTER_SECONDS));
      res.setHeader('X-RateLimit-Reset', String(RETRY_AFTER_SECONDS));
    }
  }
  if (status === 405) status = 404;
  const detail =
    error instanceof DomainError && error.lock
      ? `${body.message} (lock ${error.lock.id}, held by ${error.lock.principal} since ${error.lock.createdAt.toISOString()})`
      : body.message;
  sendError(
    res,
    status,
    JSONAPI_MEDIA_TYPE,
    JSON.stringify(errorDocument(status, TITLES[status] ?? 'error', detail)),
  );
}
