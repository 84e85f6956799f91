import type { NestExpressApplication } from '@nestjs/platform-express';
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import proxyAddr from 'proxy-addr';
import type { LeanRoute } from './common/lean-route';
import { beginRequest, runWithRequestContext } from './common/request-context';
import type { AppConfig } from './config/config';
import { StopState } from './health/stopping';
import { requestLineWriter, RequestLineWriter } from './logging/request-line';
import { doorLabel, statusIndex } from './metrics/metric-labels';
import { MetricsService } from './metrics/metrics.service';
import { timeRequest } from './monitoring/request-metrics';
import { S3ReadRoute } from './s3compat/s3-read.route';
import { S3WriteRoute } from './s3compat/s3-write.route';
import { S3ListRoute } from './s3compat/s3-list.route';
import { BackendLockRoute } from './backend/backend-lock.route';
import { BackendReadRoute } from './backend/backend-read.route';
import { setBackendHeaders } from './http-hygiene';

/** What a lean route gets of the request pipeline that Express runs for every other route. */
interface Pipeline {
  stop: StopState;
  metrics: MetricsService;
  line: RequestLineWriter;
  clientIp(req: IncomingMessage): string | undefined;
}

/**
 * The application's request listener with its hot routes (`LeanRoute`) served below Express.
 * Such a request gets what Express's chain gives every request that reaches those routes, in
 * the same order — its context (request id, client address after STATEHOUSE_TRUSTED_PROXIES,
 * door), the answer headers of its area, its metrics, its one log line — and nothing the chain
 * does for other routes (no CORS, no body parsing). While the server stops, every
 * request goes to Express, which refuses it.
 */
export function withLeanRoutes(app: NestExpressApplication, config: AppConfig): RequestListener {
  const express = app.getHttpAdapter().getInstance() as RequestListener & {
    get(setting: string): unknown;
  };
  const trust = express.get('trust proxy fn') as (addr: string, i: number) => boolean;
  const pipeline: Pipeline = {
    stop: app.get(StopState),
    metrics: app.get(MetricsService),
    line: requestLineWriter(config),
    clientIp: (req) => proxyAddr(req, trust),
  };
  const routes: readonly LeanRoute[] = [
    app.get(S3ReadRoute),
    app.get(S3WriteRoute),
    app.get(S3ListRoute),
    app.get(BackendReadRoute),
    app.get(BackendLockRoute),
  ];
  return (req, res) => {
    const route = pipeline.stop.stopping ? undefined : routes.find((r) => r.accepts(req));
    if (route === undefined) {
      express(req, res);
      return;
    }
    serveLean(route, pipeline, req, res);
  };
}

function serveLean(route: LeanRoute, p: Pipeline, req: IncomingMessage, res: ServerResponse): void {
  const startedAt = Date.now();
  const ctx = beginRequest(req, res, p.clientIp(req));
  // The HTTP backend's answers carry the JSON API's headers (`useHttpHygiene`); the S3 door's none.
  if (route.door === 'http') setBackendHeaders(req, res);
  ctx.door = route.door;
  timeRequest(res, (seconds) => {
    const status = statusIndex(res.statusCode, res.headersSent);
    p.metrics.requestObserved(doorLabel(route.door), route.operation(req), status, seconds);
  });
  res.once('close', () => p.line(req, res, startedAt));
  runWithRequestContext(ctx, () => route.serve(req, res)).catch(() => res.destroy());
}
