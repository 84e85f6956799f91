import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import { markAtRoot, S3_PREFIX } from './s3-request';
import { errorXml } from './s3-xml';

/**
 * The request listener of the S3 door's own listener (STATEHOUSE_S3_PORT): the S3 door at the
 * root — `/<bucket>/<key>` — for clients that cannot put a path in their endpoint (s3cmd signs
 * `/<bucket>/…` whatever its `host_base` says), and nothing else: no health, no `/v1`, no docs.
 *
 * Every request is handed to the application routed to the S3 door (its URL prefixed with `/s3`
 * for the router), while `originalUrl` keeps the path and query exactly as received: the door
 * reads its target and verifies the signature from that, below the base `markAtRoot` records
 * (`s3BaseOf`), so what the client signed is what is checked.
 */
export function s3RootListener(app: RequestListener): RequestListener {
  return (req: IncomingMessage, res: ServerResponse) => {
    const received = req.url ?? '';
    if (!received.startsWith('/')) {
      // `OPTIONS *` or an absolute-form target (`GET http://host/…`): no path to read.
      refuse(res, received);
      return;
    }
    markAtRoot(req);
    (req as IncomingMessage & { originalUrl?: string }).originalUrl = received;
    req.url = `${S3_PREFIX}${received}`;
    app(req, res);
  };
}

function refuse(res: ServerResponse, target: string): void {
  const requestId = randomUUID();
  const body = errorXml(
    'InvalidRequest',
    'The S3 listener takes requests for /<bucket>/<key> (path-style) only',
    target.slice(0, 200),
    requestId,
  );
  res.writeHead(400, {
    'Content-Type': 'application/xml',
    'Content-Length': Buffer.byteLength(body),
    'x-amz-request-id': requestId,
    Connection: 'close',
  });
  res.end(body);
}
