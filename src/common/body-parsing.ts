import {
  CallHandler,
  ExecutionContext,
  Injectable,
  NestInterceptor,
  SetMetadata,
} from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import express, { Request, Response } from 'express';
import { from, Observable, switchMap } from 'rxjs';
import { DomainError } from './errors';

export const RAW_BODY = 'statehouse:raw-body';

/**
 * The handler reads the request body itself, raw (state bodies stored byte for byte, a LockInfo
 * kept as sent, the S3 door's signed payloads): nothing parses it first. Whether a body is read
 * raw is a property of the handler the router chose — never of a second pattern over the path,
 * which would disagree with the router on spellings it accepts (`/v1/Units/…/State`, a trailing
 * slash).
 */
export const RawBody = (): MethodDecorator & ClassDecorator => SetMetadata(RAW_BODY, true);

export const MAX_JSON_BODY_BYTES = 1024 * 1024;

/**
 * Parses a JSON body (`Content-Type: application/json`, at most 1 MiB) for every handler that
 * is not marked `@RawBody()`. It runs after routing and after the global guard, so it knows the
 * handler and never parses for an unauthenticated caller; its refusals go through the
 * handler's own exception filter (400 `invalid_request`, 413 `too_large`).
 */
@Injectable()
export class JsonBodyInterceptor implements NestInterceptor {
  private readonly json = express.json({ limit: MAX_JSON_BODY_BYTES });

  constructor(private readonly reflector: Reflector) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (context.getType() !== 'http') return next.handle();
    const raw = this.reflector.getAllAndOverride<boolean | undefined>(RAW_BODY, [
      context.getHandler(),
      context.getClass(),
    ]);
    if (raw) return next.handle();
    const http = context.switchToHttp();
    return from(this.parse(http.getRequest<Request>(), http.getResponse<Response>())).pipe(
      switchMap(() => next.handle()),
    );
  }

  private parse(req: Request, res: Response): Promise<void> {
    return new Promise((resolve, reject) => {
      this.json(req, res, (err?: unknown) => {
        if (!err) return resolve();
        const status = (err as { status?: number }).status;
        reject(
          status === 413
            ? new DomainError('too_large', `JSON body is larger than ${MAX_JSON_BODY_BYTES} bytes`)
            : new DomainError('invalid_request', 'request body is not valid JSON'),
        );
      });
    });
  }
}
