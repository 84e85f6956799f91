import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { S3Error, S3ErrorCode } from './s3-errors';

/**
 * Small shared pieces of the S3 wire code (SigV4, aws-chunked, checksums): the header map the
 * pure functions take, a result type that never throws, and the hashing primitives.
 *
 * Header maps: names lower-cased, values as Node gives them. Pass `req.headersDistinct`
 * (Node ≥ 18.3: every header as an array of its lines) where exact repeated-header semantics
 * matter — SigV4 joins repeated header lines with "," while `req.headers` joins most of them
 * with ", " and silently drops repeats of some (host, content-length, …). Plain `req.headers`
 * works for every request a real client sends with one line per header.
 *
 * Strings coming from the socket (path, header values) are "byte strings": Node decodes the
 * request head as latin1, one char per byte. `toBytes` turns them back into the bytes the client
 * signed; a string holding chars above U+00FF cannot have come from the socket and is taken as
 * UTF-8 instead.
 */
export type HeaderValue = string | readonly string[] | undefined;
export type HeaderMap = Readonly<Record<string, HeaderValue>>;

export type Result<T> = { ok: true; value: T } | { ok: false; error: S3Error };

export function ok<T>(value: T): Result<T> {
  return { ok: true, value };
}

export function fail<T = never>(code: S3ErrorCode, message: string): Result<T> {
  return { ok: false, error: new S3Error(code, message) };
}

/** All lines of a header, in order ([] when absent). */
export function headerLines(headers: HeaderMap, name: string): readonly string[] {
  const v = Object.prototype.hasOwnProperty.call(headers, name) ? headers[name] : undefined;
  if (v === undefined) return [];
  return typeof v === 'string' ? [v] : v;
}

/**
 * A header that may appear once. Repeated lines with the same value count as one; different
 * values are an error (`InvalidArgument`), never a silent pick.
 */
export function singleHeader(headers: HeaderMap, name: string): Result<string | undefined> {
  const lines = headerLines(headers, name);
  if (lines.length === 0) return ok(undefined);
  const first = lines[0].trim();
  for (const l of lines) {
    if (l.trim() !== first)
      return fail('InvalidArgument', `The ${name} header appears more than once.`);
  }
  return ok(first);
}

// eslint-disable-next-line no-control-regex -- any char above latin1 marks a real (UTF-16) string
const ABOVE_LATIN1 = /[^\u0000-\u00ff]/;

/** The bytes of a request string (see the file header). */
export function toBytes(s: string): Buffer {
  return Buffer.from(s, ABOVE_LATIN1.test(s) ? 'utf8' : 'latin1');
}

/** The same bytes as a latin1 byte string (one char per byte); identity for socket strings. */
export function toByteString(s: string): string {
  return ABOVE_LATIN1.test(s) ? Buffer.from(s, 'utf8').toString('latin1') : s;
}

export const EMPTY_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';

export function sha256Hex(data: string | Uint8Array): string {
  return createHash('sha256')
    .update(typeof data === 'string' ? toBytes(data) : data)
    .digest('hex');
}

export function hmacSha256(key: Uint8Array | string, data: string | Uint8Array): Buffer {
  return createHmac('sha256', key).update(data).digest();
}

const HEX64 = /^[0-9a-fA-F]{64}$/;

export function isHex64(s: string): boolean {
  return HEX64.test(s);
}

/**
 * Constant-time comparison of a computed 32-byte MAC with a hex string from the request. The
 * comparison time does not depend on where the two differ; a malformed `givenHex` compares
 * unequal (its shape is public anyway).
 */
export function macEqualsHex(computed: Buffer, givenHex: string): boolean {
  if (!HEX64.test(givenHex)) return false;
  return timingSafeEqual(computed, Buffer.from(givenHex, 'hex'));
}
