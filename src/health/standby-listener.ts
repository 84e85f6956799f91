import { randomUUID } from 'node:crypto';
import {
  createServer as createHttpServer,
  IncomingMessage,
  Server,
  ServerResponse,
} from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { RETRY_AFTER_SECONDS } from '../common/api-exception.filter';
import { errorXml } from '../s3compat/s3-xml';
import { S3_PREFIX } from '../s3compat/s3-request';

export interface StandbyListener {
  /** Idempotent. */
  close: () => Promise<void>;
}

/**
 * What answers on PORT while the server waits before it starts (a schema its migrations Job has
 * not brought up to this release yet): `/healthz` 200, as the process is alive and a restart
 * would not help; `/readyz` 503 with the reason, in the shape of the server's own readiness
 * report; anything else 503 in its door's format. Nothing else runs until the wait is over.
 */
export function openStandbyListener(
  port: number,
  host: string,
  tlsFiles: { cert: Buffer; key: Buffer } | undefined,
  reason: () => string,
): Promise<StandbyListener> {
  const handler = (req: IncomingMessage, res: ServerResponse): void => {
    const path = (req.url ?? '/').split('?')[0];
    const message = reason();
    req.resume();
    res.setHeader('Cache-Control', 'no-store');
    if (path === '/healthz') return send(res, 200, 'application/json', { status: 'ok' });
    res.setHeader('Retry-After', String(RETRY_AFTER_SECONDS));
    if (path === '/readyz') {
      const schema = { status: 'down', message };
      return send(res, 503, 'application/json', {
        status: 'error',
        info: {},
        error: { schema },
        details: { schema },
      });
    }
    const requestId = randomUUID();
    res.setHeader('X-Request-Id', requestId);
    if (path === S3_PREFIX || path.startsWith(`${S3_PREFIX}/`)) {
      res.writeHead(503, { 'Content-Type': 'application/xml' });
      res.end(errorXml('ServiceUnavailable', message, path, requestId));
      return;
    }
    send(res, 503, 'application/json', {
      statusCode: 503,
      error: 'Service Unavailable',
      code: 'not_ready',
      message,
      requestId,
    });
  };
  const server: Server = tlsFiles
    ? createHttpsServer(tlsFiles, handler)
    : createHttpServer(handler);
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      let closed: Promise<void> | undefined;
      resolve({
        close: () =>
          (closed ??= new Promise<void>((done) => {
            server.close(() => done());
            server.closeAllConnections();
          })),
      });
    });
  });
}

function send(res: ServerResponse, status: number, type: string, body: unknown): void {
  res.writeHead(status, { 'Content-Type': type });
  res.end(JSON.stringify(body));
}
