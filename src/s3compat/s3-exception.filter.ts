import { ArgumentsHost, Catch, ExceptionFilter, HttpException, Logger } from '@nestjs/common';
import type { Request, Response } from 'express';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { toDomainError } from '../common/error-mapping';
import { currentRequestContext } from '../common/request-context';
import { S3Error, toS3Error } from './s3-errors';
import { errorXml } from './s3-xml';
import { RETRY_AFTER_SECONDS } from '../common/api-exception.filter';

const logger = new Logger('s3');

/** Every error of the `/s3` door as S3 XML with S3's code and status (no body on HEAD). */
@Catch()
export class S3ExceptionFilter implements ExceptionFilter {
  catch(exception: unknown, host: ArgumentsHost): void {
    answerS3Error(
      exception,
      host.switchToHttp().getRequest<Request>(),
      host.switchToHttp().getResponse<Response>(),
    );
  }
}

/**
 * Answers an error of the S3 door: the filter's answer, and that of the routes served below
 * Express (`S3ReadRoute`). A failure after the answer began closes the connection.
 */
export function answerS3Error(
  exception: unknown,
  req: IncomingMessage & { originalUrl?: string },
  res: ServerResponse,
): void {
  const requestId = currentRequestContext()?.requestId ?? '';
  const error = asS3Error(exception, requestId);
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const resource = (req.originalUrl ?? req.url ?? '').split('?')[0];
  res.statusCode = error.status;
  res.setHeader('x-amz-request-id', requestId);
  if (error.code === 'InvalidRange') res.setHeader('Content-Range', 'bytes */*');
  if (error.status === 503) res.setHeader('Retry-After', String(RETRY_AFTER_SECONDS));
  if (req.method === 'HEAD') {
    res.end();
    return;
  }
  const body = errorXml(error.code, error.message, resource, requestId);
  res.setHeader('Content-Type', 'application/xml; charset=utf-8');
  res.setHeader('Content-Length', Buffer.byteLength(body));
  res.end(body);
}

function asS3Error(exception: unknown, requestId: string): S3Error {
  if (exception instanceof S3Error) return exception;
  const mapped = toDomainError(exception);
  if (mapped instanceof HttpException) {
    return new S3Error(mapped.getStatus() === 404 ? 'NoSuchKey' : 'InvalidRequest', mapped.message);
  }
  if (mapped.code === 'internal') {
    logger.error({ err: exception, requestId }, 'unexpected error on the S3 door');
    return new S3Error(
      'InternalError',
      `We encountered an internal error (request id ${requestId}). Please try again.`,
    );
  }
  if (mapped.code === 'unavailable')
    logger.warn({ err: exception, requestId }, 'dependency unavailable');
  return toS3Error(mapped);
}
