import { queryHas } from '../common/query-has';
import type { S3Operation } from '../metrics/metric-labels';
import { UNSUPPORTED_SUB_RESOURCES } from './s3-request';

/**
 * The S3 operation of a request to the door, from its method (upper case, as Node gives it),
 * whether it names a bucket and a key, and its query — the same reading as the door's dispatch (`S3Controller`). The URL may
 * start with `/s3` (the main listener) or not (a listener serving the door at its root): `s3` is
 * not a valid bucket name (at least 3 characters), so the two cannot be confused.
 */
export function s3Operation(m: string, url: string): S3Operation {
  const q = url.indexOf('?');
  const pathEnd = q < 0 ? url.length : q;
  let start = /^\/s3(?:[/?]|$)/i.test(url) ? 3 : 0;
  if (url[start] === '/') start++;
  const slash = url.indexOf('/', start);
  const hasBucket = start < pathEnd;
  const hasKey = slash >= 0 && slash < pathEnd - 1;
  if (!hasBucket) return m === 'GET' ? 'ListBuckets' : 'NotImplemented';
  if (!hasKey) {
    if (m === 'HEAD') return 'HeadBucket';
    if (m === 'PUT')
      return onlyQueryNames(url, pathEnd, ['x-id']) ? 'CreateBucket' : 'NotImplemented';
    if (m !== 'GET') return 'NotImplemented';
    if (queryHas(url, 'location')) return 'GetBucketLocation';
    if (queryHas(url, 'versioning')) return 'GetBucketVersioning';
    if (queryHas(url, 'list-type', '2')) return 'ListObjectsV2';
    if (queryHas(url, 'list-type') || queryHas(url, 'uploads')) return 'NotImplemented';
    return UNSUPPORTED_SUB_RESOURCES.some((k) => queryHas(url, k))
      ? 'NotImplemented'
      : 'ListObjects';
  }
  const upload = queryHas(url, 'uploadId');
  switch (m) {
    case 'GET':
      return upload ? 'ListParts' : 'GetObject';
    case 'HEAD':
      return 'HeadObject';
    case 'PUT':
      return upload ? 'UploadPart' : 'PutObject';
    case 'POST':
      if (queryHas(url, 'uploads')) return 'CreateMultipartUpload';
      return upload ? 'CompleteMultipartUpload' : 'NotImplemented';
    case 'DELETE':
      return upload ? 'AbortMultipartUpload' : 'DeleteObject';
    default:
      return 'NotImplemented';
  }
}

/** Whether every parameter of the query (from `at`, the `?` or the URL's end) is one of `names`. */
function onlyQueryNames(url: string, at: number, names: readonly string[]): boolean {
  if (at >= url.length) return true;
  return url
    .slice(at + 1)
    .split('&')
    .every((p) => p === '' || names.includes(p.split('=', 1)[0]));
}
