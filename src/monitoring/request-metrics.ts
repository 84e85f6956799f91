import type { NextFunction, Request, Response } from 'express';
import type { ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { currentRequestContext, RequestContext } from '../common/request-context';
import { backendOperation } from '../backend/backend-operation';
import {
  doorLabel,
  doorOfUnroutedPath,
  statusIndex,
  UNROUTED_OPERATION,
} from '../metrics/metric-labels';
import { MetricsService } from '../metrics/metrics.service';
import { s3Operation } from '../s3compat/s3-operation';
import { s3BaseOf } from '../s3compat/s3-request';

/**
 * Times every request, from its arrival to the end of its answer (or the connection's close),
 * and records it by door, operation and status class once it is over. The
 * route and the door are known by then: the router set `req.route`, the global guard the door.
 * Mounted first (after the request context), so requests refused before any route — malformed
 * backend paths, unknown routes, Swagger UI's files — are counted too.
 */
export function requestMetrics(metrics: MetricsService) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const ctx = currentRequestContext();
    timeRequest(res, (seconds) => observeRequest(metrics, req, res, ctx, seconds));
    next();
  };
}

/**
 * Calls `record` once with the seconds from now until the request is over: its answer handed
 * over ('finish'), or its connection gone first ('close' alone: the client may close as soon as
 * it has every byte, before 'finish' is emitted).
 */
export function timeRequest(res: ServerResponse, record: (seconds: number) => void): void {
  const started = performance.now();
  let recorded = false;
  const once = (): void => {
    if (recorded) return;
    recorded = true;
    record((performance.now() - started) / 1000);
  };
  res.once('finish', once);
  res.once('close', once);
}

/** Records one request with the labels its route, door and answer give it. */
export function observeRequest(
  metrics: MetricsService,
  req: Request,
  res: Response,
  ctx: RequestContext | undefined,
  seconds: number,
): void {
  // Answered once the status line went out: a client that closes as soon as it has every byte
  // of the body may be seen to go before the server's own end of the answer.
  const status = statusIndex(res.statusCode, res.headersSent);
  // A route of the server was reached exactly when the global guard named the door (module
  // middleware registered as routes leaves `req.route` set on requests no route matched).
  const route = (req as { route?: { path?: unknown } }).route;
  if (ctx?.door === undefined || route === undefined || typeof route.path !== 'string') {
    // On the S3 door's own listener every request is the S3 door's, whatever its path.
    const door = s3BaseOf(req) === '' ? 's3' : doorOfUnroutedPath(req.originalUrl);
    metrics.requestObserved(door, UNROUTED_OPERATION, status, seconds);
    return;
  }
  const door = doorLabel(ctx.door);
  switch (door) {
    case 's3':
      metrics.requestObserved(door, s3Operation(req.method, req.originalUrl), status, seconds);
      return;
    case 'backend':
      metrics.requestObserved(door, backendOperation(req.method, req.originalUrl), status, seconds);
      return;
    case 'api':
    case 'tfe':
      metrics.routeObserved(route as { path: string }, req.method, status, seconds, door);
      return;
  }
}
