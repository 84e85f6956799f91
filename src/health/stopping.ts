import type { NextFunction, Request, Response } from 'express';
import { randomUUID } from 'node:crypto';
import { errorXml } from '../s3compat/s3-xml';
import type { ErrorBody } from '../common/api-exception.filter';
import { RETRY_AFTER_SECONDS } from '../common/api-exception.filter';
import { currentRequestContext } from '../common/request-context';

/**
 * Whether the server is stopping: set once, when SIGTERM or SIGINT arrives, before anything else
 * of the stop happens. `/readyz` answers 503 from then on, and every other request that arrives
 * is refused (`refuseWhileStopping`); requests already in flight are not affected.
 */
export class StopState {
  private signal?: string;

  begin(signal: string): void {
    this.signal ??= signal;
  }

  get stopping(): boolean {
    return this.signal !== undefined;
  }

  /** The signal that started the stop, once it did. */
  get reason(): string | undefined {
    return this.signal;
  }
}

/** Still answered while stopping: liveness (the process is alive) and readiness (which says no). */
const PROBES = new Set(['/healthz', '/readyz']);
const S3_DOOR = /^\/s3(?:[/?]|$)/i;

export interface Refusal {
  status: 503;
  headers: Record<string, string>;
  body: string;
}

/**
 * The answer to a request that arrived after the stop began, in its door's own format: S3 XML
 * `ServiceUnavailable` for the S3 door (`/s3` on the main listener; the S3 listener hands its
 * requests on below `/s3`), JSON for everything else. A 503 with `Retry-After` is what Terraform
 * (both backends) and the AWS SDKs retry, and `Connection: close` sends that retry over a new
 * connection, which the load balancer gives to another replica.
 */
export function refusalWhileStopping(url: string, requestId: string): Refusal {
  const message = 'the server is stopping; try again (another replica answers)';
  const common = { 'Retry-After': String(RETRY_AFTER_SECONDS), Connection: 'close' };
  if (S3_DOOR.test(url)) {
    const resource = url.split('?')[0].slice(0, 200);
    return {
      status: 503,
      headers: {
        ...common,
        'Content-Type': 'application/xml',
        'x-amz-request-id': requestId,
      },
      body: errorXml('ServiceUnavailable', message, resource, requestId),
    };
  }
  const body: ErrorBody = {
    statusCode: 503,
    error: 'Service Unavailable',
    code: 'unavailable',
    message,
    requestId,
  };
  return {
    status: 503,
    headers: { ...common, 'Content-Type': 'application/json; charset=utf-8' },
    body: JSON.stringify(body),
  };
}

/**
 * Express middleware, mounted before every route: while stopping, answers each request but the
 * probes with `refusalWhileStopping` — once its body has been read (and discarded). Answering
 * first and closing the connection while the client is still sending would make the kernel
 * reset it, and a reset can wipe the answer before the client reads it; reading the body is
 * bounded by the drain, which closes whatever is still open at STATEHOUSE_SHUTDOWN_TIMEOUT.
 */
export function refuseWhileStopping(state: StopState) {
  return (req: Request, res: Response, next: NextFunction): void => {
    if (!state.stopping || PROBES.has(req.path)) {
      next();
      return;
    }
    const refusal = refusalWhileStopping(
      req.url,
      currentRequestContext()?.requestId ?? randomUUID(),
    );
    const answer = (): void => {
      if (res.headersSent || res.destroyed) return;
      res.writeHead(refusal.status, {
        ...refusal.headers,
        'Content-Length': String(Buffer.byteLength(refusal.body)),
      });
      res.end(req.method === 'HEAD' ? undefined : refusal.body);
    };
    if (req.readableEnded) {
      answer();
      return;
    }
    req.once('end', answer);
    req.resume();
  };
}
