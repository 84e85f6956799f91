import { S3Error } from './s3-errors';
import { toByteString } from './wire';

/**
 * The S3 door's percent-coding, in one place: what SigV4 signs and what the router reads come
 * from the same functions, so a path or query is never decoded two ways.
 *
 * Two families, kept apart on purpose:
 * - byte-level and lenient (SigV4 and routing): `percentDecode` turns `%XX` into the byte and
 *   leaves a `%` without two hex digits as a literal `%`; `uriEncodeBytes` is AWS's UriEncode
 *   (every byte but A-Z a-z 0-9 - _ . ~ as upper-case %XX);
 * - JavaScript's `encodeURIComponent` / `decodeURIComponent` (strict UTF-8; they throw on a
 *   malformed escape or a lone surrogate) where clients expect exactly that reading: the check
 *   that a path is decodable at all, listing values under `encoding-type=url`, and the Location
 *   of a completed upload.
 *
 * Pure: no Nest, no I/O.
 */

const HEX_UPPER = '0123456789ABCDEF';
const ENCODED_BYTE: string[] = [];
for (let b = 0; b < 256; b++) {
  const c = String.fromCharCode(b);
  ENCODED_BYTE.push(/[A-Za-z0-9\-_.~]/.test(c) ? c : '%' + HEX_UPPER[b >> 4] + HEX_UPPER[b & 15]);
}

/** AWS UriEncode of bytes: unreserved characters as they are, everything else as %XX. */
export function uriEncodeBytes(bytes: Uint8Array, keepSlash: boolean): string {
  let out = '';
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i];
    out += keepSlash && b === 0x2f ? '/' : ENCODED_BYTE[b];
  }
  return out;
}

function hexVal(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x41 && c <= 0x46) return c - 0x37;
  if (c >= 0x61 && c <= 0x66) return c - 0x57;
  return -1;
}

/** Percent-decodes a byte string to bytes; a `%` without two hex digits stays a literal `%`. */
export function percentDecode(s: string, plusAsSpace: boolean): Buffer {
  // Nothing to decode (a session token, a signature): the bytes as they are, natively.
  if (s.indexOf('%') < 0 && !(plusAsSpace && s.indexOf('+') >= 0)) return Buffer.from(s, 'latin1');
  const out = Buffer.allocUnsafe(s.length);
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 0x25 && i + 2 < s.length) {
      const h = hexVal(s.charCodeAt(i + 1));
      const l = hexVal(s.charCodeAt(i + 2));
      if (h >= 0 && l >= 0) {
        out[n++] = (h << 4) | l;
        i += 2;
        continue;
      }
    }
    out[n++] = plusAsSpace && c === 0x2b ? 0x20 : c & 0xff;
  }
  return out.subarray(0, n);
}

/**
 * A raw path re-encoded the SigV4 way: each piece between `%2F`s (either case) decoded and
 * UriEncoded with `/` kept; the `%2F`s themselves kept as `%2F`, so nothing moves across a `/`.
 */
export function reencodePath(rawPath: string): string {
  return toByteString(rawPath)
    .split(/%2F/i)
    .map((piece) => uriEncodeBytes(percentDecode(piece, false), true))
    .join('%2F');
}

/** One raw query parameter: name and value percent-decoded (`+` as space), as bytes. */
export interface RawQueryParam {
  name: Buffer;
  value: Buffer;
}

/** The query string (without `?`) split at `&` and `=`, empty parts skipped, in order. */
export function splitQuery(rawQuery: string): RawQueryParam[] {
  const params: RawQueryParam[] = [];
  if (rawQuery === '') return params;
  const q = toByteString(rawQuery);
  for (const part of q.split('&')) {
    if (part === '') continue;
    const eq = part.indexOf('=');
    const name = eq < 0 ? part : part.slice(0, eq);
    const value = eq < 0 ? '' : part.slice(eq + 1);
    params.push({ name: percentDecode(name, true), value: percentDecode(value, true) });
  }
  return params;
}

/**
 * The query parameters as name/value strings (UTF-8 decoded, `+` as space), in order — the same
 * reading the signature check uses, for routing.
 */
export function decodeQuery(rawQuery: string): Array<[string, string]> {
  return splitQuery(rawQuery).map((p) => [p.name.toString('utf8'), p.value.toString('utf8')]);
}

/**
 * A bucket name or object key from the raw path: percent-decoded (`+` stays `+`, a broken
 * escape stays literal) and read as UTF-8; bytes that are not UTF-8 are `InvalidArgument`.
 */
export function decodePathPart(raw: string): string {
  const bytes = percentDecode(raw, false);
  const text = bytes.toString('utf8');
  if (Buffer.compare(Buffer.from(text, 'utf8'), bytes) !== 0) {
    throw new S3Error('InvalidArgument', 'the object key is not valid UTF-8');
  }
  return text;
}

/**
 * Whether every `/`-separated segment of a path decodes with `decodeURIComponent` (the reading
 * Express applies to route parameters): false for `%ZZ`, a truncated `%E0%A4`, or non-UTF-8.
 */
export function isDecodablePath(path: string): boolean {
  try {
    for (const segment of path.split('/')) decodeURIComponent(segment);
    return true;
  } catch {
    return false;
  }
}

/**
 * A listing value (key, prefix, marker, delimiter) under `encoding-type=url`: UTF-8
 * percent-encoded as `encodeURIComponent` does, except `/`, which clients (botocore's unquote,
 * rclone's url.PathUnescape) read back alike.
 */
export function encodeListingValue(s: string): string {
  return encodeURIComponent(s).replace(/%2F/g, '/');
}

/** An object key as a URL path: each `/`-separated segment `encodeURIComponent`-encoded. */
export function encodeKeyPath(key: string): string {
  return key.split('/').map(encodeURIComponent).join('/');
}
