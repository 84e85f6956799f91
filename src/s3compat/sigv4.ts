import type { Transform } from 'node:stream';
import { BodyVerifier } from './checksums';
import {
  EMPTY_SHA256,
  HeaderMap,
  Result,
  fail,
  headerLines,
  hmacSha256,
  macEqualsHex,
  ok,
  sha256Hex,
  singleHeader,
  toByteString,
} from './wire';
import { decodeQuery, reencodePath, splitQuery, uriEncodeBytes } from './s3-uri';

/** The query reading routing shares with the signature check (defined in s3-uri.ts). */
export { decodeQuery };

/**
 * AWS Signature Version 4 verification for the S3 door, as pure functions (no Nest, no I/O).
 *
 * Two steps, so the caller can look the secret up in between:
 *
 *   const parsed = parseSigV4({ method, rawPath, rawQuery, headers });   // Result<ParsedSigV4>
 *   if (!parsed.ok) throw parsed.error;                                    // an S3Error
 *   const secret = await secretFor(parsed.value.accessKeyId);              // caller's business
 *   const verified = verifySigV4(parsed.value, secret, Date.now());       // Result<SigningContext>
 *
 * `parseAccessKeyFromRequest` is the cheap first half alone (just the access key id).
 * Nothing here throws: every refusal is a `Result` carrying an `S3Error` with the code S3 uses.
 *
 * The request, as received:
 * - `rawPath`: the path of the request line exactly as sent (Express: the part of
 *   `req.originalUrl` before `?`), including the `/s3` mount prefix — clients sign the whole
 *   path they send. S3 does not double-encode and does not normalise the path (no `.`/`..`
 *   or `//` removal): the canonical URI is the raw path. Only when the raw path is not in
 *   canonical encoding (a raw `!`, lower-case `%3a`, `%7E`) is a second canonical request tried
 *   with the path re-encoded per the spec (every byte except A-Z a-z 0-9 - _ . ~ and `/` as
 *   upper-case %XX; `%2F` is kept as it is, so a signature never moves across a `/`).
 * - `rawQuery`: the query string without `?`, as sent. Canonical query: every parameter
 *   (including `x-id`; for presigned requests all but `X-Amz-Signature`), names and values
 *   percent-decoded (`+` reads as a space, as URLSearchParams does; a `%` not followed by two
 *   hex digits is a literal `%`) and re-encoded per the spec, sorted by encoded name then value.
 * - `headers`: lower-cased names (see wire.ts: pass `req.headersDistinct` for exact repeated
 *   header handling). Only the headers named in SignedHeaders enter the canonical request:
 *   value lines trimmed, inner runs of spaces/tabs collapsed to one space, lines joined by ",".
 *   A signed header that is absent counts as empty.
 *
 * Rules enforced (S3's behaviour, S3's codes):
 * - exactly one auth mechanism (header or query), algorithm AWS4-HMAC-SHA256 only;
 * - credential scope `<yyyymmdd>/<region>/s3/aws4_request`, its date equal to the date part of
 *   X-Amz-Date (or of the `Date` header, which header auth may use instead of `x-amz-date`);
 * - `host` signed; every `x-amz-*` header present signed too, except `x-amz-content-sha256`
 *   (AccessDenied "There were headers present in the request which were not signed");
 * - header auth: `x-amz-content-sha256` present: a hex SHA-256 (the body must then match it —
 *   `BodyVerifier` / `payloadHashCheck` report XAmzContentSHA256Mismatch), UNSIGNED-PAYLOAD,
 *   or one of the three aws-chunked STREAMING-* modes (decode with aws-chunked.ts);
 * - presigned: payload hash UNSIGNED-PAYLOAD (or an X-Amz-Content-Sha256 query parameter
 *   when the signer put one there), session token from X-Amz-Security-Token;
 * - verify: header auth with |now − request time| > 15 min → RequestTimeTooSkewed;
 *   presigned with now > X-Amz-Date + X-Amz-Expires → AccessDenied "Request has expired",
 *   X-Amz-Date more than 15 min ahead → AccessDenied "Request is not valid yet",
 *   X-Amz-Expires > 604800 → AccessDenied; signature compared in constant time →
 *   SignatureDoesNotMatch.
 *
 * The access key id itself is not signed (only the scope is): it is bound by the secret the
 * caller looks up for it — a request re-labelled with another key id verifies only if that key
 * has the same secret.
 *
 * Never log a ParsedSigV4 or a request's Authorization / X-Amz-* values: they carry the
 * signature and the session token (the canonical request includes the token too).
 *
 * Malformed presigned parameters are answered `AuthorizationHeaderMalformed` (S3 itself says
 * `AuthorizationQueryParametersError`, a code the door's table does not list yet; see
 * `authMalformed`).
 */

export const SIGV4_ALGORITHM = 'AWS4-HMAC-SHA256';
export const UNSIGNED_PAYLOAD = 'UNSIGNED-PAYLOAD';
export const STREAMING_UNSIGNED_PAYLOAD_TRAILER = 'STREAMING-UNSIGNED-PAYLOAD-TRAILER';
export const STREAMING_AWS4_HMAC_SHA256_PAYLOAD = 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD';
export const STREAMING_AWS4_HMAC_SHA256_PAYLOAD_TRAILER =
  'STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER';
export type AwsChunkedEncoding =
  | typeof STREAMING_UNSIGNED_PAYLOAD_TRAILER
  | typeof STREAMING_AWS4_HMAC_SHA256_PAYLOAD
  | typeof STREAMING_AWS4_HMAC_SHA256_PAYLOAD_TRAILER;

/** Maximum |server time − request time| for header-signed requests. */
export const MAX_CLOCK_SKEW_MS = 15 * 60 * 1000;
/** Maximum X-Amz-Expires of a presigned URL (7 days). */
export const MAX_PRESIGNED_EXPIRES_SECONDS = 604800;

export interface SigV4Request {
  method: string;
  /** Path of the request line as received, without the query. */
  rawPath: string;
  /** Query string as received, without the leading `?` ('' when none). */
  rawQuery: string;
  headers: HeaderMap;
}

/** What `x-amz-content-sha256` (or its presigned equivalent) declares about the body. */
export type PayloadMode =
  /** The body's SHA-256, lower-case hex: the body reader must check it. */
  | { kind: 'sha256'; hex: string }
  /** UNSIGNED-PAYLOAD: the body is not covered by the signature. */
  | { kind: 'unsigned' }
  /** An aws-chunked body (Content-Encoding: aws-chunked) in one of the three STREAMING modes. */
  | { kind: 'aws-chunked'; encoding: AwsChunkedEncoding };

export interface ParsedSigV4 {
  via: 'header' | 'query';
  accessKeyId: string;
  /** Credential scope parts. */
  date: string;
  region: string;
  service: string;
  /** `<date>/<region>/s3/aws4_request` */
  scope: string;
  /** The request time as signed, ISO 8601 basic (`20130524T000000Z`). */
  amzDate: string;
  /** The same, epoch milliseconds. */
  requestTime: number;
  /** X-Amz-Expires in seconds (presigned only). */
  expiresSeconds: number | undefined;
  signedHeaders: readonly string[];
  /** The signature given, lower-case hex. */
  signature: string;
  /** X-Amz-Security-Token (header auth: the `x-amz-security-token` header). */
  sessionToken: string | undefined;
  payload: PayloadMode;
  /** The canonical request built from the raw path (a latin1 byte string). */
  canonicalRequest: string;
  /** Another canonical request accepted for the same request (path re-encoded), if any. */
  alternateCanonicalRequests: readonly string[];
}

/** What a verified request hands to the body reader (aws-chunked needs the signing chain). */
export interface SigningContext {
  via: 'header' | 'query';
  accessKeyId: string;
  sessionToken: string | undefined;
  region: string;
  scope: string;
  amzDate: string;
  /**
   * HMAC key of the scope (not enumerable, so logging the context does not leak it):
   * kSigning = HMAC(HMAC(HMAC(HMAC("AWS4"+secret, date), region), "s3"), "aws4_request"). */
  signingKey: Buffer;
  /** The verified request signature: the seed of a signed aws-chunked body. */
  seedSignature: string;
  /**
   * The last instant (epoch ms) at which this very request would still verify: X-Amz-Date plus
   * the allowed clock skew (header auth), or plus X-Amz-Expires (presigned). A record that the
   * signature was used must be kept until then (replay protection).
   */
  validUntil: number;
  payload: PayloadMode;
}

export interface VerifyOptions {
  /** Accept only this region in the credential scope (default: any region). */
  region?: string;
}

// ---------------------------------------------------------------------------------------------
// Canonical URI and query (the percent-coding itself is s3-uri.ts)

/** The canonical URI for a raw path (see the file header): raw first, re-encoded second. */
export function canonicalUriCandidates(rawPath: string): string[] {
  const raw = toByteString(rawPath === '' ? '/' : rawPath);
  const reencoded = reencodePath(raw);
  return reencoded === raw ? [raw] : [raw, reencoded];
}

function compareAscii(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The canonical query string; parameters named `exclude` (exact, decoded) are left out. */
export function canonicalQuery(rawQuery: string, exclude?: string): string {
  const pairs: Array<[string, string]> = [];
  for (const p of splitQuery(rawQuery)) {
    if (exclude !== undefined && p.name.toString('latin1') === exclude) continue;
    pairs.push([uriEncodeBytes(p.name, false), uriEncodeBytes(p.value, false)]);
  }
  pairs.sort((a, b) => compareAscii(a[0], b[0]) || compareAscii(a[1], b[1]));
  return pairs.map(([n, v]) => `${n}=${v}`).join('&');
}

/** Canonical form of one signed header: lines trimmed, blank runs collapsed, joined by ",". */
export function canonicalHeaderValue(lines: readonly string[]): string {
  return lines
    .map((l) =>
      toByteString(l)
        .replace(/[ \t]+/g, ' ')
        .replace(/^ | $/g, ''),
    )
    .join(',');
}

// ---------------------------------------------------------------------------------------------
// Signing primitives (exported for the aws-chunked decoder and for tests)

export function deriveSigningKey(
  secretAccessKey: string,
  date: string,
  region: string,
  service: string,
): Buffer {
  const kDate = hmacSha256(Buffer.from('AWS4' + secretAccessKey, 'utf8'), date);
  const kRegion = hmacSha256(kDate, region);
  const kService = hmacSha256(kRegion, service);
  return hmacSha256(kService, 'aws4_request');
}

/**
 * Signing keys as derived (four HMACs each), kept per secret, date, region and service: a
 * client signs every request of a day with the same one. Bounded; the oldest goes first. A key
 * is as secret as the secret it comes from: kept in memory only, never logged.
 */
export class SigningKeyCache {
  private readonly keys = new Map<string, Buffer>();

  constructor(private readonly max: number) {}

  get size(): number {
    return this.keys.size;
  }

  get(secretAccessKey: string, date: string, region: string, service: string): Buffer {
    const id = `${date}\n${region}\n${service}\n${secretAccessKey}`;
    const kept = this.keys.get(id);
    if (kept) return kept;
    const key = deriveSigningKey(secretAccessKey, date, region, service);
    if (this.keys.size >= this.max) this.keys.delete(this.keys.keys().next().value as string);
    this.keys.set(id, key);
    return key;
  }
}

const signingKeys = new SigningKeyCache(4096);

export function stringToSign(amzDate: string, scope: string, canonicalRequest: string): string {
  return `${SIGV4_ALGORITHM}\n${amzDate}\n${scope}\n${sha256Hex(canonicalRequest)}`;
}

export function buildCanonicalRequest(parts: {
  method: string;
  canonicalUri: string;
  canonicalQuery: string;
  headers: HeaderMap;
  signedHeaders: readonly string[];
  payloadHash: string;
}): string {
  let headerBlock = '';
  for (const name of parts.signedHeaders) {
    headerBlock += `${name}:${canonicalHeaderValue(headerLines(parts.headers, name))}\n`;
  }
  return [
    toByteString(parts.method),
    parts.canonicalUri,
    parts.canonicalQuery,
    headerBlock,
    parts.signedHeaders.join(';'),
    toByteString(parts.payloadHash),
  ].join('\n');
}

// ---------------------------------------------------------------------------------------------
// Parsing

const AMZ_DATE = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/;
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const HTTP_DATE =
  /^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), (\d{2}) (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) (\d{4}) (\d{2}):(\d{2}):(\d{2}) GMT$/;

function utcMillis(y: number, mo: number, d: number, h: number, mi: number, s: number) {
  const t = Date.UTC(y, mo - 1, d, h, mi, s);
  const back = new Date(t);
  const same =
    back.getUTCFullYear() === y &&
    back.getUTCMonth() === mo - 1 &&
    back.getUTCDate() === d &&
    back.getUTCHours() === h &&
    back.getUTCMinutes() === mi &&
    back.getUTCSeconds() === s;
  return same ? t : undefined;
}

/** `20130524T000000Z` → epoch ms (undefined when not a real instant in that exact form). */
export function parseAmzDate(s: string): number | undefined {
  const m = AMZ_DATE.exec(s);
  if (!m) return undefined;
  const [y, mo, d, h, mi, sec] = m.slice(1).map(Number);
  return utcMillis(y, mo, d, h, mi, sec);
}

export function formatAmzDate(ms: number): string {
  return new Date(ms)
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}Z$/, 'Z');
}

function parseHttpDate(s: string): number | undefined {
  const m = HTTP_DATE.exec(s);
  if (!m) return undefined;
  return utcMillis(Number(m[3]), MONTHS.indexOf(m[2]) + 1, Number(m[1]), +m[4], +m[5], +m[6]);
}

/** One place to change when the door's table learns `AuthorizationQueryParametersError`. */
function authMalformed<T>(via: 'header' | 'query', detail: string): Result<T> {
  return fail(
    'AuthorizationHeaderMalformed',
    via === 'header'
      ? `The authorization header is malformed; ${detail}`
      : `Query-string authentication is malformed; ${detail}`,
  );
}

const ONE_MECHANISM =
  'Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, Signature query string parameter or the Authorization header should be specified';
const UNSUPPORTED_MECHANISM =
  'The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256.';

interface CredentialParts {
  accessKeyId: string;
  date: string;
  region: string;
  service: string;
}

function parseCredential(via: 'header' | 'query', credential: string): Result<CredentialParts> {
  const parts = credential.split('/');
  if (parts.length !== 5 || parts.some((p) => p === '' || /\s/.test(p))) {
    return authMalformed(
      via,
      'the Credential is mal-formed; expecting "<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request".',
    );
  }
  const [accessKeyId, date, region, service, terminator] = parts;
  if (!/^\d{8}$/.test(date)) {
    return authMalformed(
      via,
      `incorrect date format "${date}". This date in the credential must be in the format "yyyyMMdd".`,
    );
  }
  if (service !== 's3') {
    return authMalformed(via, `incorrect service "${service}". This endpoint belongs to "s3".`);
  }
  if (terminator !== 'aws4_request') {
    return authMalformed(
      via,
      `incorrect terminal "${terminator}". This endpoint uses "aws4_request".`,
    );
  }
  return ok({ accessKeyId, date, region, service });
}

const SIGNED_HEADER_NAME = /^[a-z0-9!#$%&'*+.^_`|~-]+$/;

function parseSignedHeaders(via: 'header' | 'query', list: string): Result<string[]> {
  const names = list.split(';');
  const seen = new Set<string>();
  for (const n of names) {
    if (!SIGNED_HEADER_NAME.test(n) || seen.has(n)) {
      return authMalformed(
        via,
        `SignedHeaders must be a ";"-separated list of distinct lower-case header names.`,
      );
    }
    seen.add(n);
  }
  if (!seen.has('host')) {
    return authMalformed(via, 'the host header must be signed.');
  }
  return ok(names);
}

function unsignedAmzHeaders(headers: HeaderMap, signed: readonly string[]): string[] {
  const set = new Set(signed);
  const missing: string[] = [];
  for (const name of Object.keys(headers)) {
    if (
      name.startsWith('x-amz-') &&
      name !== 'x-amz-content-sha256' &&
      !set.has(name) &&
      headerLines(headers, name).length > 0
    ) {
      missing.push(name);
    }
  }
  return missing.sort();
}

/** Classifies an `x-amz-content-sha256` value. */
export function parsePayloadHash(value: string): Result<PayloadMode> {
  switch (value) {
    case UNSIGNED_PAYLOAD:
      return ok({ kind: 'unsigned' });
    case STREAMING_UNSIGNED_PAYLOAD_TRAILER:
    case STREAMING_AWS4_HMAC_SHA256_PAYLOAD:
    case STREAMING_AWS4_HMAC_SHA256_PAYLOAD_TRAILER:
      return ok({ kind: 'aws-chunked', encoding: value });
    case 'STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD':
    case 'STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD-TRAILER':
      return fail('InvalidRequest', `${value} (SigV4a) is not supported; use AWS4-HMAC-SHA256.`);
    default:
      if (/^[0-9a-fA-F]{64}$/.test(value)) return ok({ kind: 'sha256', hex: value.toLowerCase() });
      return fail(
        'InvalidArgument',
        'x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-UNSIGNED-PAYLOAD-TRAILER, STREAMING-AWS4-HMAC-SHA256-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER or a valid sha256 value.',
      );
  }
}

interface QueryAuthParams {
  all: Map<string, string[]>;
}

function queryAuthParams(rawQuery: string): QueryAuthParams {
  const all = new Map<string, string[]>();
  for (const [n, v] of decodeQuery(rawQuery)) {
    const list = all.get(n);
    if (list) list.push(v);
    else all.set(n, [v]);
  }
  return { all };
}

export const PRESIGN_PARAMS = [
  'X-Amz-Algorithm',
  'X-Amz-Credential',
  'X-Amz-Date',
  'X-Amz-Expires',
  'X-Amz-SignedHeaders',
  'X-Amz-Signature',
] as const;

interface AuthorizationHeader {
  algorithm: string;
  credential: string;
  signedHeaders: string;
  signature: string;
}

const isWhiteSpace = (c: string): boolean => /\s/.test(c);

function parseAuthorizationHeader(value: string): Result<AuthorizationHeader> {
  // "<algorithm> <components>": split at the first white space by position (a pattern like
  // /^(\S+)(?:[ \t]+([\s\S]*))?$/ can trade characters between its quantifiers).
  const v = value.trim();
  let end = 0;
  while (end < v.length && !isWhiteSpace(v[end])) end++;
  if (end === 0 || (end < v.length && v[end] !== ' ' && v[end] !== '\t')) {
    return fail('InvalidRequest', UNSUPPORTED_MECHANISM);
  }
  const algorithm = v.slice(0, end);
  if (algorithm !== SIGV4_ALGORITHM) return fail('InvalidRequest', UNSUPPORTED_MECHANISM);
  const fields = new Map<string, string>();
  for (const raw of v.slice(end + 1).split(',')) {
    const part = raw.trim();
    if (part === '') continue;
    const eq = part.indexOf('=');
    const key = eq < 0 ? part : part.slice(0, eq).trim();
    if (eq < 0 || !['Credential', 'SignedHeaders', 'Signature'].includes(key) || fields.has(key)) {
      return authMalformed('header', `unexpected component "${key.slice(0, 40)}".`);
    }
    fields.set(key, part.slice(eq + 1).trim());
  }
  const credential = fields.get('Credential');
  const signedHeaders = fields.get('SignedHeaders');
  const signature = fields.get('Signature');
  if (credential === undefined || signedHeaders === undefined || signature === undefined) {
    return authMalformed(
      'header',
      'the authorization header requires three components: Credential, SignedHeaders, and Signature.',
    );
  }
  return ok({ algorithm, credential, signedHeaders, signature });
}

type Mechanism =
  { via: 'header'; header: AuthorizationHeader } | { via: 'query'; params: QueryAuthParams };

function detectMechanism(request: SigV4Request): Result<Mechanism> {
  const authLines = headerLines(request.headers, 'authorization');
  const params = queryAuthParams(request.rawQuery);
  const queryAuth = params.all.has('X-Amz-Algorithm') || params.all.has('X-Amz-Signature');
  const v2Query = params.all.has('AWSAccessKeyId') && params.all.has('Signature');
  if ((authLines.length > 0 ? 1 : 0) + (queryAuth ? 1 : 0) + (v2Query ? 1 : 0) > 1) {
    return fail('InvalidArgument', ONE_MECHANISM);
  }
  if (v2Query) return fail('InvalidRequest', UNSUPPORTED_MECHANISM);
  if (authLines.length > 0) {
    const single = singleHeader(request.headers, 'authorization');
    if (!single.ok) return single;
    const header = parseAuthorizationHeader(single.value ?? '');
    if (!header.ok) return header;
    return ok({ via: 'header', header: header.value });
  }
  if (queryAuth) return ok({ via: 'query', params });
  return fail('AccessDenied', 'Access Denied: the request carries no AWS Signature Version 4.');
}

/** The access key id of a request, without checking anything else (to look up its secret). */
export function parseAccessKeyFromRequest(request: SigV4Request): Result<string> {
  const mech = detectMechanism(request);
  if (!mech.ok) return mech;
  let credential: string;
  if (mech.value.via === 'header') {
    credential = mech.value.header.credential;
  } else {
    const values = mech.value.params.all.get('X-Amz-Credential');
    if (!values || values.length !== 1) {
      return authMalformed('query', 'exactly one X-Amz-Credential parameter is required.');
    }
    credential = values[0];
  }
  const parts = parseCredential(mech.value.via, credential);
  return parts.ok ? ok(parts.value.accessKeyId) : parts;
}

/** Parses and canonicalises a SigV4 request (header or presigned); checks no secret or clock. */
export function parseSigV4(request: SigV4Request): Result<ParsedSigV4> {
  const mech = detectMechanism(request);
  if (!mech.ok) return mech;
  const via = mech.value.via;

  let credentialText: string;
  let signedHeadersText: string;
  let signature: string;
  let amzDate: string;
  let requestTime: number;
  let expiresSeconds: number | undefined;
  let sessionToken: string | undefined;
  let payloadHashText: string;
  let dateFromDateHeader = false;

  if (mech.value.via === 'header') {
    const h = mech.value.header;
    credentialText = h.credential;
    signedHeadersText = h.signedHeaders;
    signature = h.signature;

    const xAmzDate = singleHeader(request.headers, 'x-amz-date');
    if (!xAmzDate.ok) return xAmzDate;
    const dateHeader = singleHeader(request.headers, 'date');
    if (!dateHeader.ok) return dateHeader;
    let t: number | undefined;
    if (xAmzDate.value !== undefined) {
      t = parseAmzDate(xAmzDate.value);
    } else if (dateHeader.value !== undefined) {
      t = parseHttpDate(dateHeader.value);
      dateFromDateHeader = true;
    }
    if (t === undefined) {
      return fail('AccessDenied', 'AWS authentication requires a valid Date or x-amz-date header');
    }
    requestTime = t;
    amzDate = xAmzDate.value ?? formatAmzDate(t);

    const token = singleHeader(request.headers, 'x-amz-security-token');
    if (!token.ok) return token;
    sessionToken = token.value;

    const contentSha = singleHeader(request.headers, 'x-amz-content-sha256');
    if (!contentSha.ok) return contentSha;
    if (contentSha.value === undefined) {
      return fail(
        'InvalidRequest',
        'Missing required header for this request: x-amz-content-sha256',
      );
    }
    payloadHashText = contentSha.value;
  } else {
    const all = mech.value.params.all;
    for (const name of PRESIGN_PARAMS) {
      const values = all.get(name);
      if (!values) {
        return authMalformed(
          'query',
          'Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters.',
        );
      }
      if (values.length !== 1) return authMalformed('query', `${name} appears more than once.`);
    }
    const one = (name: string): string => (all.get(name) ?? [''])[0];
    if (one('X-Amz-Algorithm') !== SIGV4_ALGORITHM) {
      return authMalformed('query', 'X-Amz-Algorithm only supports "AWS4-HMAC-SHA256".');
    }
    credentialText = one('X-Amz-Credential');
    signedHeadersText = one('X-Amz-SignedHeaders');
    signature = one('X-Amz-Signature');
    amzDate = one('X-Amz-Date');
    const t = parseAmzDate(amzDate);
    if (t === undefined) {
      return authMalformed(
        'query',
        `X-Amz-Date must be in the ISO8601 Long Format "yyyyMMdd'T'HHmmss'Z'".`,
      );
    }
    requestTime = t;
    const expires = one('X-Amz-Expires');
    if (!/^\d{1,12}$/.test(expires) || Number(expires) < 1) {
      return authMalformed(
        'query',
        'X-Amz-Expires must be a whole number of seconds from 1 to 604800.',
      );
    }
    expiresSeconds = Number(expires);
    const tokens = all.get('X-Amz-Security-Token');
    if (tokens && tokens.length !== 1) {
      return authMalformed('query', 'X-Amz-Security-Token appears more than once.');
    }
    sessionToken = tokens?.[0];
    const hashes = [...all.entries()].filter(([n]) => n.toLowerCase() === 'x-amz-content-sha256');
    if (hashes.length > 1 || (hashes.length === 1 && hashes[0][1].length !== 1)) {
      return authMalformed('query', 'X-Amz-Content-Sha256 appears more than once.');
    }
    payloadHashText = hashes.length === 1 ? hashes[0][1][0] : UNSIGNED_PAYLOAD;
  }

  const credential = parseCredential(via, credentialText);
  if (!credential.ok) return credential;
  const { accessKeyId, date, region, service } = credential.value;
  if (date !== amzDate.slice(0, 8)) {
    return authMalformed(via, 'Invalid credential date. Date is not the same as X-Amz-Date.');
  }

  const signed = parseSignedHeaders(via, signedHeadersText);
  if (!signed.ok) return signed;
  const signedHeaders = signed.value;
  if (dateFromDateHeader && !signedHeaders.includes('date')) {
    return fail('AccessDenied', 'The Date header must be signed when it gives the request time.');
  }
  const unsigned = unsignedAmzHeaders(request.headers, signedHeaders);
  if (unsigned.length > 0) {
    return fail(
      'AccessDenied',
      `There were headers present in the request which were not signed: ${unsigned.join(', ')}`,
    );
  }

  if (!/^[0-9a-fA-F]{64}$/.test(signature)) {
    return authMalformed(via, 'the Signature must be 64 hexadecimal digits.');
  }

  const payload = parsePayloadHash(payloadHashText);
  if (!payload.ok) return payload;

  const query = canonicalQuery(request.rawQuery, via === 'query' ? 'X-Amz-Signature' : undefined);
  const [canonicalRequest, ...alternateCanonicalRequests] = canonicalUriCandidates(
    request.rawPath,
  ).map((canonicalUri) =>
    buildCanonicalRequest({
      method: request.method,
      canonicalUri,
      canonicalQuery: query,
      headers: request.headers,
      signedHeaders,
      payloadHash: payloadHashText,
    }),
  );

  return ok({
    via,
    accessKeyId,
    date,
    region,
    service,
    scope: `${date}/${region}/${service}/aws4_request`,
    amzDate,
    requestTime,
    expiresSeconds,
    signedHeaders,
    signature: signature.toLowerCase(),
    sessionToken,
    payload: payload.value,
    canonicalRequest,
    alternateCanonicalRequests,
  });
}

function toMillis(now: Date | number): number {
  return typeof now === 'number' ? now : now.getTime();
}

/**
 * Checks the clock and the signature of a parsed request with the secret of its access key.
 * On success returns what the body reader needs (payload mode, aws-chunked signing chain).
 */
export function verifySigV4(
  parsed: ParsedSigV4,
  secretAccessKey: string,
  now: Date | number,
  options: VerifyOptions = {},
): Result<SigningContext> {
  const nowMs = toMillis(now);
  if (parsed.via === 'header') {
    if (Math.abs(nowMs - parsed.requestTime) > MAX_CLOCK_SKEW_MS) {
      return fail(
        'RequestTimeTooSkewed',
        `The difference between the request time (${parsed.amzDate}) and the current time (${formatAmzDate(nowMs)}) is too large.`,
      );
    }
  } else {
    const expires = parsed.expiresSeconds ?? 0;
    if (expires > MAX_PRESIGNED_EXPIRES_SECONDS) {
      return fail(
        'AccessDenied',
        'X-Amz-Expires must be less than a week (in seconds) that is 604800',
      );
    }
    if (parsed.requestTime - nowMs > MAX_CLOCK_SKEW_MS) {
      return fail('AccessDenied', 'Request is not valid yet');
    }
    if (nowMs > parsed.requestTime + expires * 1000) {
      return fail('AccessDenied', 'Request has expired');
    }
  }
  if (options.region !== undefined && parsed.region !== options.region) {
    return authMalformed(
      parsed.via,
      `the region '${parsed.region}' is wrong; expecting '${options.region}'`,
    );
  }

  const signingKey = signingKeys.get(secretAccessKey, parsed.date, parsed.region, parsed.service);
  let matched = false;
  for (const canonical of [parsed.canonicalRequest, ...parsed.alternateCanonicalRequests]) {
    const expected = hmacSha256(signingKey, stringToSign(parsed.amzDate, parsed.scope, canonical));
    // Evaluate every candidate: the time taken does not tell which one matched.
    matched = macEqualsHex(expected, parsed.signature) || matched;
  }
  if (!matched) {
    return fail(
      'SignatureDoesNotMatch',
      'The request signature we calculated does not match the signature you provided. Check your key and signing method.',
    );
  }
  const context = {
    via: parsed.via,
    accessKeyId: parsed.accessKeyId,
    sessionToken: parsed.sessionToken,
    region: parsed.region,
    scope: parsed.scope,
    amzDate: parsed.amzDate,
    seedSignature: parsed.signature,
    validUntil:
      parsed.via === 'header'
        ? parsed.requestTime + MAX_CLOCK_SKEW_MS
        : parsed.requestTime + (parsed.expiresSeconds ?? 0) * 1000,
    payload: parsed.payload,
  } as SigningContext;
  // Not enumerable: a context that ends up in a log line or a JSON dump does not carry the key.
  Object.defineProperty(context, 'signingKey', { value: signingKey, enumerable: false });
  return ok(context);
}

/**
 * For a body declared by hex SHA-256: a pass-through Transform that fails with
 * XAmzContentSHA256Mismatch at the end when the body's hash differs (undefined for the other
 * payload modes). For checksums and Content-MD5 as well, use `BodyVerifier` directly.
 */
export function payloadHashCheck(payload: PayloadMode): Transform | undefined {
  return payload.kind === 'sha256'
    ? new BodyVerifier({ contentSha256Hex: payload.hex })
    : undefined;
}

/** SHA-256 of the empty body, as `x-amz-content-sha256` carries it on GET/HEAD/DELETE. */
export const EMPTY_PAYLOAD_SHA256 = EMPTY_SHA256;
