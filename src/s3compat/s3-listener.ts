import type { NextFunction, Request, Response } from 'express';
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import { currentRequestContext } from '../common/request-context';
import { markAtRoot, S3_PREFIX } from './s3-request';
import { isDecodablePath } from './s3-uri';
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
  answer(res, {
    code: 'InvalidRequest',
    message: 'The S3 listener takes requests for /<bucket>/<key> (path-style) only',
    resource: target.slice(0, 200),
    requestId: randomUUID(),
    close: true,
  });
}

/**
 * Express middleware for `/s3` (both listeners reach the door through it), mounted before the
 * router: Express decodes the route's wildcard parameter before any handler runs and answers a
 * malformed percent-encoding (`%ZZ`, `%E0%A4`, bytes that are not UTF-8) itself, as JSON. The
 * door reads its target from the raw URL; this answers that one case in the door's own format.
 */
export function rejectMalformedS3Path(req: Request, res: Response, next: NextFunction): void {
  const path = req.originalUrl.split('?')[0];
  if (!isDecodablePath(path)) {
    answer(res, {
      code: 'InvalidURI',
      message:
        "Couldn't parse the specified URI: the path has a malformed percent-encoding or is not UTF-8",
      resource: path.slice(0, 200),
      requestId: currentRequestContext()?.requestId ?? randomUUID(),
      head: req.method === 'HEAD',
    });
    return;
  }
  next();
}

function answer(
  res: ServerResponse,
  e: {
    code: 'InvalidRequest' | 'InvalidURI';
    message: string;
    resource: string;
    requestId: string;
    close?: boolean;
    head?: boolean;
  },
): void {
  const body = errorXml(e.code, e.message, e.resource, e.requestId);
  res.writeHead(400, {
    'Content-Type': 'application/xml',
    'Content-Length': Buffer.byteLength(body),
    'x-amz-request-id': e.requestId,
    ...(e.close ? { Connection: 'close' } : {}),
  });
  res.end(e.head ? undefined : body);
}
