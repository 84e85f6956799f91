import {
  ArgumentsHost,
  Catch,
  ExceptionFilter,
  HttpException,
  Logger,
  NotFoundException,
} from '@nestjs/common';
import type { Request, Response } from 'express';
import type { ServerResponse } from 'node:http';
import { toDomainError } from './error-mapping';
import { DomainError, httpStatusOf } from './errors';
import { currentRequestContext } from './request-context';

/** What a 503 tells clients to wait before trying again (seconds). */
export const RETRY_AFTER_SECONDS = 2;

export interface ErrorBody {
  statusCode: number;
  error: string;
  code: string;
  message: string;
  requestId?: string;
  /** The lock holder's LockInfo, as its client sent it, when a lock caused the refusal. */
  lock?: Record<string, unknown>;
  lockHolder?: string;
}

const REASONS: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  409: 'Conflict',
  412: 'Precondition Failed',
  413: 'Payload Too Large',
  415: 'Unsupported Media Type',
  423: 'Locked',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

const logger = new Logger('errors');

/** Turns anything thrown into a status and a JSON body; logs the unexpected once, with its id. */
export function describeError(e: unknown): {
  status: number;
  body: ErrorBody;
  error: DomainError | HttpException;
} {
  const err = toDomainError(e);
  const requestId = currentRequestContext()?.requestId;
  if (err instanceof HttpException) {
    const status = err.getStatus();
    const res = err.getResponse();
    const message =
      typeof res === 'object' && res !== null && 'message' in res
        ? [res.message].flat().join('; ')
        : err.message;
    return {
      status,
      error: err,
      body: {
        statusCode: status,
        error: REASONS[status] ?? 'Error',
        code:
          status === 404
            ? 'not_found'
            : status === 400
              ? 'invalid_request'
              : status === 429
                ? 'rate_limited'
                : `http_${status}`,
        message,
        requestId,
      },
    };
  }
  const status = httpStatusOf(err.code);
  if (err.code === 'internal') logger.error({ err: e, requestId }, 'unexpected error');
  if (err.code === 'unavailable') logger.warn({ err: e, requestId }, 'dependency unavailable');
  const body: ErrorBody = {
    statusCode: status,
    error: REASONS[status] ?? 'Error',
    code: err.code,
    message:
      err.code === 'internal'
        ? `internal error (request id ${requestId ?? 'unknown'})`
        : err.message,
    requestId,
  };
  if (err.lock) {
    try {
      body.lock = JSON.parse(err.lock.infoJson) as Record<string, unknown>;
    } catch {
      body.lock = { ID: err.lock.id };
    }
    body.lockHolder = err.lock.principal;
  }
  return { status, body, error: err };
}

/** Sends an error unless the answer has already started (then the connection is cut). */
export function sendError(
  res: ServerResponse,
  status: number,
  contentType: string,
  payload: string,
): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  if (status === 401 && !res.getHeader('WWW-Authenticate')) {
    res.setHeader('WWW-Authenticate', 'Bearer realm="statehouse"');
  }
  if (status === 413) res.setHeader('Connection', 'close');
  // Busy (the inspection budget) or a dependency down: worth trying again shortly.
  if (status === 503) res.setHeader('Retry-After', String(RETRY_AFTER_SECONDS));
  // As Express's `res.type(…).send(text)` answers it (no body on HEAD).
  res.statusCode = status;
  res.setHeader('Content-Type', `${contentType}; charset=utf-8`);
  res.setHeader('Content-Length', Buffer.byteLength(payload));
  res.end(res.req?.method === 'HEAD' ? undefined : payload);
}

/** The management API's error format: JSON with a stable `code`. */
@Catch()
export class ApiExceptionFilter implements ExceptionFilter {
  catch(exception: unknown, host: ArgumentsHost): void {
    const ctx = host.switchToHttp();
    const res = ctx.getResponse<Response>();
    const req = ctx.getRequest<Request>();
    const { status, body } = describeError(unmatched(exception, req) ?? exception);
    sendError(res, status, 'application/json', JSON.stringify(body));
  }
}

/**
 * A request no route matched — Nest's fallback handler throws a `NotFoundException`, which no
 * handler of ours does (they throw domain errors; a missing state is `state_not_found`): 400
 * `unknown_route` naming the method and path, never 404. Terraform's http backend reads a 404 on
 * GET as "no state", so a mistyped address must not look like an empty state. The path is named
 * without its query (which may carry credentials), shortened.
 */
function unmatched(exception: unknown, req: Request): DomainError | undefined {
  if (!(exception instanceof NotFoundException)) return undefined;
  const path = req.originalUrl.split('?')[0];
  const shown = path.length > 200 ? `${path.slice(0, 200)}…` : path;
  return new DomainError(
    'unknown_route',
    `no route matches ${req.method} ${shown} (see /docs for the API, /v1/backend/<unit> for the Terraform http backend, /s3 for the S3 door)`,
  );
}
