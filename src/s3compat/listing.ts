import { encodeCursor, tryDecodeCursor } from '../common/cursor';
import { S3Error } from './s3-errors';
import { el, S3_NS } from './s3-xml';
import { encodeListingValue } from './s3-uri';

/**
 * S3's bucket listings — ListObjects (v1, paged by `marker`) and ListObjectsV2 (paged by
 * `continuation-token` or `start-after`) — as pure functions over the sorted objects: one
 * paging and grouping rule for both, and the two XML documents. No database in sight.
 */

export interface ListedObject {
  key: string;
  size: number;
  md5: string;
  modified: Date;
}

/** What a listing request asks for, read from the query and checked. */
export interface ListRequest {
  prefix: string;
  delimiter: string;
  maxKeys: number;
  /** Keys up to and including this one are not listed (marker, start-after, the token's key). */
  after: string;
  urlEncode: boolean;
}

export interface ListPage {
  contents: ListedObject[];
  commonPrefixes: string[];
  truncated: boolean;
  /**
   * Where the next page starts when truncated: the last key or common prefix this page
   * returned (a common prefix as marker skips every key under it).
   */
  next: string | undefined;
}

/** The largest page S3 returns, whatever max-keys asks. */
export const MAX_KEYS = 1000;

const isSurrogate = (c: number): boolean => c >= 0xd800 && c <= 0xdfff;

/**
 * S3's listing order: the byte order of the keys' UTF-8 encodings, which is code-point order —
 * not JavaScript's `<` (UTF-16 code units), which puts U+10000 and above (surrogate pairs)
 * before U+E000–U+FFFF. Compared in place, without encoding either string.
 */
export function compareKeys(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    // A surrogate here stands for a code point above U+FFFF, greater than any BMP character.
    if (isSurrogate(x) !== isSurrogate(y)) return isSurrogate(x) ? 1 : -1;
    return x - y;
  }
  return a.length - b.length;
}

/** Sorts objects into listing order (in place) and returns them. */
export function sortForListing<T extends { key: string }>(objects: T[]): T[] {
  return objects.sort((a, b) => compareKeys(a.key, b.key));
}

/**
 * One page of a listing over `objects` (sorted by `compareKeys`): keys after `after` that start
 * with `prefix`; with a delimiter, keys holding it after the prefix are rolled up into one common
 * prefix each (up to and including the delimiter), which counts once against max-keys and is
 * not returned again on a later page — a starting point under a common prefix (or equal to it)
 * skips the whole prefix. max-keys 0 returns an empty page that is not truncated (S3 clients
 * that page until IsTruncated is false would otherwise never stop).
 */
export function listPage(objects: readonly ListedObject[], r: ListRequest): ListPage {
  const contents: ListedObject[] = [];
  const commonPrefixes: string[] = [];
  let last: string | undefined;
  let count = 0;
  if (r.maxKeys === 0) return { contents, commonPrefixes, truncated: false, next: undefined };
  for (const o of objects) {
    if (!o.key.startsWith(r.prefix) || compareKeys(o.key, r.after) <= 0) continue;
    let rolled: string | undefined;
    if (r.delimiter !== '') {
      const i = o.key.indexOf(r.delimiter, r.prefix.length);
      if (i >= 0) rolled = o.key.slice(0, i + r.delimiter.length);
    }
    // A common prefix already returned (or passed by the starting point) is not returned again.
    if (rolled !== undefined && (rolled === last || r.after.startsWith(rolled))) continue;
    if (count === r.maxKeys) return { contents, commonPrefixes, truncated: true, next: last };
    count++;
    if (rolled !== undefined) {
      commonPrefixes.push(rolled);
      last = rolled;
    } else {
      contents.push(o);
      last = o.key;
    }
  }
  return { contents, commonPrefixes, truncated: false, next: undefined };
}

/** The parameters both listing versions share: prefix, delimiter, max-keys, encoding-type. */
function commonParameters(q: Map<string, string>): Omit<ListRequest, 'after'> {
  const encoding = q.get('encoding-type');
  if (encoding !== undefined && encoding !== 'url')
    throw new S3Error('InvalidArgument', 'Invalid Encoding Method specified in Request');
  const maxRaw = q.get('max-keys') ?? String(MAX_KEYS);
  if (!/^\d{1,10}$/.test(maxRaw))
    throw new S3Error('InvalidArgument', 'max-keys must be a non-negative integer');
  return {
    prefix: q.get('prefix') ?? '',
    delimiter: q.get('delimiter') ?? '',
    maxKeys: Math.min(Number(maxRaw), MAX_KEYS),
    urlEncode: encoding === 'url',
  };
}

/** A ListObjects (v1) request: `marker` is where the listing starts (after it). */
export function listRequestV1(q: Map<string, string>): ListRequest {
  return { ...commonParameters(q), after: q.get('marker') ?? '' };
}

/**
 * A ListObjectsV2 request: the continuation token (this server's page cursor, `encodeCursor` of
 * the last key or common prefix returned) wins over start-after. A token that is not one this
 * server could have returned — empty included — is InvalidArgument.
 */
export function listRequestV2(q: Map<string, string>): ListRequest {
  const token = q.get('continuation-token');
  let after = q.get('start-after') ?? '';
  if (token !== undefined) {
    const decoded = tryDecodeCursor(token);
    if (decoded === undefined) {
      throw new S3Error('InvalidArgument', 'The continuation token provided is incorrect');
    }
    after = decoded;
  }
  return { ...commonParameters(q), after };
}

/** `encoding-type=url`: keys, prefixes, markers, delimiters as `encodeListingValue` writes them. */
function encoder(r: ListRequest): (s: string) => string {
  return r.urlEncode ? encodeListingValue : (s) => s;
}

function entries(page: ListPage, enc: (s: string) => string): string {
  return (
    page.contents
      .map(
        (o) =>
          `<Contents>${el('Key', enc(o.key))}${el('LastModified', o.modified.toISOString())}${el('ETag', `"${o.md5}"`)}${el('Size', o.size)}${el('StorageClass', 'STANDARD')}</Contents>`,
      )
      .join('') +
    page.commonPrefixes
      .map((p) => `<CommonPrefixes>${el('Prefix', enc(p))}</CommonPrefixes>`)
      .join('')
  );
}

/** The ListObjects (v1) answer: NextMarker whenever the page is truncated (rclone and s3cmd page by it). */
export function listBucketResultV1(
  bucket: string,
  r: ListRequest,
  page: ListPage,
  q: Map<string, string>,
): string {
  const enc = encoder(r);
  return (
    `<ListBucketResult xmlns="${S3_NS}">${el('Name', bucket)}${el('Prefix', enc(r.prefix))}` +
    el('Marker', enc(q.get('marker') ?? '')) +
    el('MaxKeys', r.maxKeys) +
    (r.delimiter ? el('Delimiter', enc(r.delimiter)) : '') +
    el('IsTruncated', page.truncated) +
    (page.truncated && page.next !== undefined ? el('NextMarker', enc(page.next)) : '') +
    (r.urlEncode ? el('EncodingType', 'url') : '') +
    entries(page, enc) +
    '</ListBucketResult>'
  );
}

/** The ListObjectsV2 answer: NextContinuationToken whenever the page is truncated. */
export function listBucketResultV2(
  bucket: string,
  r: ListRequest,
  page: ListPage,
  q: Map<string, string>,
): string {
  const enc = encoder(r);
  const token = q.get('continuation-token');
  return (
    `<ListBucketResult xmlns="${S3_NS}">${el('Name', bucket)}${el('Prefix', enc(r.prefix))}` +
    (r.delimiter ? el('Delimiter', enc(r.delimiter)) : '') +
    `${el('MaxKeys', r.maxKeys)}${el('KeyCount', page.contents.length + page.commonPrefixes.length)}${el('IsTruncated', page.truncated)}` +
    (token !== undefined ? el('ContinuationToken', token) : '') +
    (page.truncated && page.next !== undefined
      ? el('NextContinuationToken', encodeCursor(page.next))
      : '') +
    (q.has('start-after') ? el('StartAfter', enc(q.get('start-after') ?? '')) : '') +
    (r.urlEncode ? el('EncodingType', 'url') : '') +
    entries(page, enc) +
    '</ListBucketResult>'
  );
}
