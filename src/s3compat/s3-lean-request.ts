import type { IncomingMessage } from 'node:http';
import { s3BaseOf } from './s3-request';
import { isDecodablePath } from './s3-uri';
import { PRESIGN_PARAMS } from './sigv4';

/** A request of the S3 door, with the URL as received where the S3 listener rewrote it. */
export type S3Message = IncomingMessage & { originalUrl?: string };

/**
 * The query parameters a plain object operation (GetObject, HeadObject, PutObject,
 * DeleteObject) may carry: the presigning ones (SigV4's, the session token, the payload hash)
 * and the SDK's `x-id`. Any other name (a sub-resource, `uploadId`, an override) leaves the
 * request to the controller.
 */
const PLAIN_OBJECT_PARAMS = new Set<string>([
  ...PRESIGN_PARAMS,
  'X-Amz-Security-Token',
  'X-Amz-Content-Sha256',
  'x-id',
]);

/**
 * The target as received: on the main listener the URL itself; on the S3 door's own listener
 * `originalUrl`, which `s3RootListener` sets to it.
 */
export function urlOf(req: S3Message): string {
  return req.originalUrl ?? req.url ?? '';
}

/**
 * Whether the request names exactly one object and nothing else — a decodable
 * `<base>/<bucket>/<key>` path with a bucket and a key that is not empty, and no query
 * parameter but the plain ones — so that the controller would dispatch it, by its method, to
 * the object operation of `S3ObjectsService`. Decided from the request line alone.
 */
export function isPlainObjectRequest(req: S3Message): boolean {
  const url = urlOf(req);
  const base = s3BaseOf(req);
  if (!url.startsWith(`${base}/`)) return false;
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  // `<base>/<bucket>/<key>`: a bucket, then a key that is not empty.
  const slash = path.indexOf('/', base.length + 1);
  if (slash <= base.length + 1 || slash === path.length - 1) return false;
  if (q >= 0) {
    for (const pair of url.slice(q + 1).split('&')) {
      const eq = pair.indexOf('=');
      if (!PLAIN_OBJECT_PARAMS.has(eq < 0 ? pair : pair.slice(0, eq))) return false;
    }
  }
  return isDecodablePath(path);
}

/** Whether the request declares no body (no length but 0, no transfer coding). */
export function hasNoBody(req: IncomingMessage): boolean {
  const h = req.headers;
  return (
    (h['content-length'] === undefined || h['content-length'] === '0') && !h['transfer-encoding']
  );
}

/**
 * The query parameters a plain ListObjectsV2 may carry besides `list-type=2`: its own (they all
 * go to `listRequestV2` / `listBucketResultV2`; `fetch-owner` is ignored there, as by the
 * controller) and the ones of a plain object request. Any other name leaves it to the controller.
 */
const PLAIN_LISTING_PARAMS = new Set<string>([
  ...PLAIN_OBJECT_PARAMS,
  'prefix',
  'delimiter',
  'max-keys',
  'start-after',
  'continuation-token',
  'encoding-type',
  'fetch-owner',
]);

/**
 * Whether the request is a ListObjectsV2 of one bucket and nothing else — a decodable
 * `<base>/<bucket>` path (or `<base>/<bucket>/`), `list-type=2` exactly once and as written,
 * and no query parameter but the listing's own and the plain ones — so that the controller
 * would dispatch it, as a GET, to `S3ObjectsService.listObjectsV2`. Decided from the request
 * line alone.
 */
export function isPlainListingRequest(req: S3Message): boolean {
  const url = urlOf(req);
  const base = s3BaseOf(req);
  const q = url.indexOf('?');
  if (q < 0 || !url.startsWith(`${base}/`)) return false;
  const path = url.slice(0, q);
  // `<base>/<bucket>` or `<base>/<bucket>/`: a bucket, and no key.
  const slash = path.indexOf('/', base.length + 1);
  if (path.length === base.length + 1 || slash === base.length + 1) return false;
  if (slash >= 0 && slash !== path.length - 1) return false;
  let listType = 0;
  for (const pair of url.slice(q + 1).split('&')) {
    const eq = pair.indexOf('=');
    const name = eq < 0 ? pair : pair.slice(0, eq);
    if (name === 'list-type') {
      if (pair !== 'list-type=2') return false;
      listType++;
    } else if (!PLAIN_LISTING_PARAMS.has(name)) return false;
  }
  return listType === 1 && isDecodablePath(path);
}
