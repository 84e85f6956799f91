import type { IncomingMessage } from 'node:http';
import { headerValue } from '../common/raw-body';
import type { HeaderMap } from './wire';

/**
 * What the S3 door reads from a request's headers, read once per request: the conditions, the
 * range, the copy source, the requested server-side encryption and the declared decoded length
 * — and, untouched, every header's lines (`lines`: `req.headersDistinct`), which SigV4 signs and
 * from which the body plan (`request-body.ts`: aws-chunked, checksums, Content-MD5) reads the
 * payload's own headers. Values are as `req.headers` gives them (Node's joining of repeated
 * lines), first line when Node keeps a list.
 */
export interface S3RequestHead {
  /** Every header as its lines, as received. */
  readonly lines: HeaderMap;
  readonly ifMatch: string | undefined;
  readonly ifNoneMatch: string | undefined;
  /** `Range: bytes=…`, parsed once the object's size is known. */
  readonly range: string | undefined;
  /** `x-amz-copy-source`: CopyObject, which this server refuses. */
  readonly copySource: string | undefined;
  /** `x-amz-server-side-encryption`, echoed on writes. */
  readonly sse: string | undefined;
  /** `x-amz-decoded-content-length` (aws-chunked), else `Content-Length`, when all digits. */
  readonly declaredLength: number | undefined;
}

const HEAD = Symbol('s3RequestHead');

/** The request's head, described on first use and kept on the request. */
export function describeS3Request(req: IncomingMessage): S3RequestHead {
  const holder = req as IncomingMessage & { [HEAD]?: S3RequestHead };
  return (holder[HEAD] ??= describe(req));
}

function describe(req: IncomingMessage): S3RequestHead {
  const h = req.headers;
  const decoded =
    headerValue(h['x-amz-decoded-content-length']) ?? headerValue(h['content-length']);
  return {
    lines: req.headersDistinct,
    ifMatch: headerValue(h['if-match']),
    ifNoneMatch: headerValue(h['if-none-match']),
    range: headerValue(h['range']),
    copySource: headerValue(h['x-amz-copy-source']),
    sse: headerValue(h['x-amz-server-side-encryption']),
    declaredLength: decoded !== undefined && /^\d+$/.test(decoded) ? Number(decoded) : undefined,
  };
}
