import { createHash, Hash } from 'node:crypto';
import { Transform, TransformCallback } from 'node:stream';
import { S3Error } from './s3-errors';
import { HeaderMap, Result, fail, headerLines, ok, singleHeader } from './wire';

/**
 * S3 body integrity: the five flexible-checksum algorithms, Content-MD5 and the declared
 * x-amz-content-sha256, as streaming hashers and one pass-through verifier.
 *
 * - `createChecksum(alg)` → `{ update(bytes), digest() }`; `checksumBase64(alg, bytes)` is the
 *   value S3 puts in `x-amz-checksum-<alg>`: base64 of the big-endian digest (4 bytes for
 *   CRC32/CRC32C, 8 for CRC64NVME, 20 for SHA1, 32 for SHA256). The CRCs are table-driven
 *   (slicing-by-8) here rather than node:zlib's crc32, which Node 20 lacks:
 *     CRC32     reflected poly 0xEDB88320, init/xorout 0xFFFFFFFF   ("123456789" → 0xCBF43926)
 *     CRC32C    reflected poly 0x82F63B78, init/xorout 0xFFFFFFFF   ("123456789" → 0xE3069283)
 *     CRC64NVME reflected poly 0x9A6C9329AC4BC9B5, init/xorout ~0   ("123456789" → 0xAE8B14860A799888)
 * - `integrityFromHeaders(headers, …)` reads what a request declares (Content-MD5, one
 *   `x-amz-checksum-*` header or a checksum trailer named in `x-amz-trailer`,
 *   `x-amz-sdk-checksum-algorithm`) into `BodyVerifierOptions`, refusing malformed or
 *   contradictory declarations with S3's codes.
 * - `BodyVerifier` (a pass-through Transform) hashes the decoded body as it flows and, at its
 *   end, fails with `BadDigest` (Content-MD5 or x-amz-checksum-* mismatch — S3's code for
 *   both) or `XAmzContentSHA256Mismatch` (declared hex SHA-256 differs). A checksum that
 *   arrives in a trailer is read at the end through `resolveChecksumValue`. Bytes pass through
 *   before the end is checked: the consumer must discard what it wrote when the stream errors
 *   (nothing stored). `digests` (length, MD5 for the ETag, computed checksums) is set once the
 *   body verified.
 */

export type ChecksumAlgorithm = 'CRC32' | 'CRC32C' | 'CRC64NVME' | 'SHA1' | 'SHA256';
export const CHECKSUM_ALGORITHMS: readonly ChecksumAlgorithm[] = [
  'CRC32',
  'CRC32C',
  'CRC64NVME',
  'SHA1',
  'SHA256',
];

const DIGEST_BYTES: Record<ChecksumAlgorithm, number> = {
  CRC32: 4,
  CRC32C: 4,
  CRC64NVME: 8,
  SHA1: 20,
  SHA256: 32,
};

/** `CRC32` → `x-amz-checksum-crc32`. */
export function checksumHeaderName(algorithm: ChecksumAlgorithm): string {
  return `x-amz-checksum-${algorithm.toLowerCase()}`;
}

/** `x-amz-checksum-crc32` → `CRC32` (case-insensitive); undefined for any other name. */
export function checksumAlgorithmOfHeader(name: string): ChecksumAlgorithm | undefined {
  const lower = name.toLowerCase();
  return CHECKSUM_ALGORITHMS.find((a) => checksumHeaderName(a) === lower);
}

/** `crc32` / `CRC32` → `CRC32`; undefined when not one of the five. */
export function parseChecksumAlgorithm(name: string): ChecksumAlgorithm | undefined {
  const upper = name.trim().toUpperCase();
  return CHECKSUM_ALGORITHMS.find((a) => a === upper);
}

/** True when `value` is canonical base64 of exactly the digest length of `algorithm`. */
export function isValidChecksumValue(algorithm: ChecksumAlgorithm, value: string): boolean {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(value) || value.length % 4 !== 0) return false;
  const bytes = Buffer.from(value, 'base64');
  return bytes.length === DIGEST_BYTES[algorithm] && bytes.toString('base64') === value;
}

export interface Hasher {
  update(data: Uint8Array): void;
  /** The digest, big-endian for the CRCs. Call once. */
  digest(): Buffer;
}

// --- CRC32 / CRC32C: slicing-by-8 over 8 tables of 256 entries -------------------------------

function crc32Tables(poly: number): Uint32Array {
  const t = new Uint32Array(8 * 256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ poly : c >>> 1;
    t[n] = c >>> 0;
  }
  for (let n = 0; n < 256; n++) {
    let c = t[n];
    for (let k = 1; k < 8; k++) {
      c = (t[c & 0xff] ^ (c >>> 8)) >>> 0;
      t[k * 256 + n] = c;
    }
  }
  return t;
}

const CRC32_TABLES = crc32Tables(0xedb88320);
const CRC32C_TABLES = crc32Tables(0x82f63b78);

function crc32Update(t: Uint32Array, crc: number, buf: Uint8Array): number {
  const len = buf.length;
  let i = 0;
  while (i + 8 <= len) {
    const a = crc ^ (buf[i] | (buf[i + 1] << 8) | (buf[i + 2] << 16) | (buf[i + 3] << 24));
    crc =
      t[1792 + (a & 0xff)] ^
      t[1536 + ((a >>> 8) & 0xff)] ^
      t[1280 + ((a >>> 16) & 0xff)] ^
      t[1024 + (a >>> 24)] ^
      t[768 + buf[i + 4]] ^
      t[512 + buf[i + 5]] ^
      t[256 + buf[i + 6]] ^
      t[buf[i + 7]];
    i += 8;
  }
  while (i < len) crc = t[(crc ^ buf[i++]) & 0xff] ^ (crc >>> 8);
  return crc;
}

class Crc32Hasher implements Hasher {
  private crc = 0xffffffff;
  constructor(private readonly tables: Uint32Array) {}
  update(data: Uint8Array): void {
    this.crc = crc32Update(this.tables, this.crc, data);
  }
  digest(): Buffer {
    const out = Buffer.allocUnsafe(4);
    out.writeUInt32BE((this.crc ^ 0xffffffff) >>> 0, 0);
    return out;
  }
}

/** CRC-32 (IEEE) of `data` as an unsigned number. */
export function crc32(data: Uint8Array): number {
  return (crc32Update(CRC32_TABLES, 0xffffffff, data) ^ 0xffffffff) >>> 0;
}

/** CRC-32C (Castagnoli) of `data` as an unsigned number. */
export function crc32c(data: Uint8Array): number {
  return (crc32Update(CRC32C_TABLES, 0xffffffff, data) ^ 0xffffffff) >>> 0;
}

// --- CRC64/NVME: 64-bit state as two 32-bit halves, slicing-by-8 -----------------------------

const CRC64_POLY_HI = 0x9a6c9329;
const CRC64_POLY_LO = 0xac4bc9b5;
const CRC64_LO = new Uint32Array(8 * 256);
const CRC64_HI = new Uint32Array(8 * 256);
(() => {
  for (let n = 0; n < 256; n++) {
    let lo = n;
    let hi = 0;
    for (let k = 0; k < 8; k++) {
      const odd = lo & 1;
      lo = ((lo >>> 1) | (hi << 31)) >>> 0;
      hi = hi >>> 1;
      if (odd) {
        lo = (lo ^ CRC64_POLY_LO) >>> 0;
        hi = (hi ^ CRC64_POLY_HI) >>> 0;
      }
    }
    CRC64_LO[n] = lo;
    CRC64_HI[n] = hi;
  }
  for (let k = 1; k < 8; k++) {
    for (let n = 0; n < 256; n++) {
      const plo = CRC64_LO[(k - 1) * 256 + n];
      const phi = CRC64_HI[(k - 1) * 256 + n];
      const idx = plo & 0xff;
      CRC64_LO[k * 256 + n] = (((plo >>> 8) | (phi << 24)) ^ CRC64_LO[idx]) >>> 0;
      CRC64_HI[k * 256 + n] = ((phi >>> 8) ^ CRC64_HI[idx]) >>> 0;
    }
  }
})();

class Crc64NvmeHasher implements Hasher {
  private lo = 0xffffffff;
  private hi = 0xffffffff;
  update(buf: Uint8Array): void {
    const TL = CRC64_LO;
    const TH = CRC64_HI;
    let lo = this.lo;
    let hi = this.hi;
    const len = buf.length;
    let i = 0;
    while (i + 8 <= len) {
      const a = lo ^ (buf[i] | (buf[i + 1] << 8) | (buf[i + 2] << 16) | (buf[i + 3] << 24));
      const b = hi ^ (buf[i + 4] | (buf[i + 5] << 8) | (buf[i + 6] << 16) | (buf[i + 7] << 24));
      const i7 = 1792 + (a & 0xff);
      const i6 = 1536 + ((a >>> 8) & 0xff);
      const i5 = 1280 + ((a >>> 16) & 0xff);
      const i4 = 1024 + (a >>> 24);
      const i3 = 768 + (b & 0xff);
      const i2 = 512 + ((b >>> 8) & 0xff);
      const i1 = 256 + ((b >>> 16) & 0xff);
      const i0 = b >>> 24;
      lo = TL[i7] ^ TL[i6] ^ TL[i5] ^ TL[i4] ^ TL[i3] ^ TL[i2] ^ TL[i1] ^ TL[i0];
      hi = TH[i7] ^ TH[i6] ^ TH[i5] ^ TH[i4] ^ TH[i3] ^ TH[i2] ^ TH[i1] ^ TH[i0];
      i += 8;
    }
    while (i < len) {
      const idx = (lo ^ buf[i++]) & 0xff;
      lo = ((lo >>> 8) | (hi << 24)) ^ TL[idx];
      hi = (hi >>> 8) ^ TH[idx];
    }
    this.lo = lo >>> 0;
    this.hi = hi >>> 0;
  }
  digest(): Buffer {
    const out = Buffer.allocUnsafe(8);
    out.writeUInt32BE((this.hi ^ 0xffffffff) >>> 0, 0);
    out.writeUInt32BE((this.lo ^ 0xffffffff) >>> 0, 4);
    return out;
  }
}

/** CRC-64/NVME of `data` as a bigint. */
export function crc64nvme(data: Uint8Array): bigint {
  const h = new Crc64NvmeHasher();
  h.update(data);
  return h.digest().readBigUInt64BE(0);
}

class NodeHasher implements Hasher {
  private readonly hash: Hash;
  constructor(algorithm: 'sha1' | 'sha256' | 'md5') {
    this.hash = createHash(algorithm);
  }
  update(data: Uint8Array): void {
    this.hash.update(data);
  }
  digest(): Buffer {
    return this.hash.digest();
  }
}

export function createChecksum(algorithm: ChecksumAlgorithm): Hasher {
  switch (algorithm) {
    case 'CRC32':
      return new Crc32Hasher(CRC32_TABLES);
    case 'CRC32C':
      return new Crc32Hasher(CRC32C_TABLES);
    case 'CRC64NVME':
      return new Crc64NvmeHasher();
    case 'SHA1':
      return new NodeHasher('sha1');
    case 'SHA256':
      return new NodeHasher('sha256');
  }
}

/** The `x-amz-checksum-<alg>` value of `data`. */
export function checksumBase64(algorithm: ChecksumAlgorithm, data: Uint8Array | string): string {
  const h = createChecksum(algorithm);
  h.update(typeof data === 'string' ? Buffer.from(data, 'utf8') : data);
  return h.digest().toString('base64');
}

// --- What the request declares ----------------------------------------------------------------

export interface DeclaredChecksum {
  algorithm: ChecksumAlgorithm;
  /** The expected base64 value; undefined when it comes later in a trailer. */
  value?: string;
  /** Where it was declared: the header `x-amz-checksum-*` or a trailer of that name. */
  source: 'header' | 'trailer';
}

export interface BodyVerifierOptions {
  /** Content-MD5 (base64 of 16 bytes), checked → BadDigest. */
  contentMd5?: string;
  /** Declared x-amz-content-sha256 (hex), checked → XAmzContentSHA256Mismatch. */
  contentSha256Hex?: string;
  /** The one flexible checksum, checked → BadDigest. */
  checksum?: DeclaredChecksum;
  /** Supplies a trailer checksum's value at the end of the body (e.g. from the decoder). */
  resolveChecksumValue?: () => string | undefined;
  /** Further checksums to compute (for storing them), beside the declared one. */
  computeChecksums?: readonly ChecksumAlgorithm[];
  /** Compute the MD5 (the ETag of a single-part object). Default true. */
  md5?: boolean;
  /**
   * The body's SHA-256 and MD5 are computed downstream, by whoever stores the bytes (the state
   * writer hashes every byte it stores), and handed to `BodyVerifier.check` at the end: neither
   * is computed here (nor a SHA256 checksum, the same digest), and the end of this stream
   * checks nothing. Each byte is hashed once.
   */
  hashedDownstream?: boolean;
}

/** `x-amz-checksum-*` names that are not checksum values. */
const CHECKSUM_CONTROL_HEADERS = new Set([
  'x-amz-checksum-mode',
  'x-amz-checksum-type',
  'x-amz-checksum-algorithm',
]);

/**
 * Reads the integrity declarations of a request. `trailerNames` are the names declared in
 * `x-amz-trailer` (aws-chunked bodies only); `contentSha256Hex` the declared payload hash.
 */
export function integrityFromHeaders(
  headers: HeaderMap,
  opts: { contentSha256Hex?: string; trailerNames?: readonly string[] } = {},
): Result<BodyVerifierOptions> {
  const out: BodyVerifierOptions = {};
  if (opts.contentSha256Hex !== undefined) out.contentSha256Hex = opts.contentSha256Hex;

  const md5 = singleHeader(headers, 'content-md5');
  if (!md5.ok) return md5;
  if (md5.value !== undefined) {
    const bytes = /^[A-Za-z0-9+/]{22}==$/.test(md5.value) ? Buffer.from(md5.value, 'base64') : null;
    if (!bytes || bytes.length !== 16 || bytes.toString('base64') !== md5.value) {
      return fail('InvalidArgument', 'The Content-MD5 you specified is not valid.');
    }
    out.contentMd5 = md5.value;
  }

  const declared: DeclaredChecksum[] = [];
  for (const name of Object.keys(headers)) {
    if (!name.startsWith('x-amz-checksum-') || CHECKSUM_CONTROL_HEADERS.has(name)) continue;
    if (headerLines(headers, name).length === 0) continue;
    const algorithm = checksumAlgorithmOfHeader(name);
    if (!algorithm) {
      return fail('InvalidRequest', `The checksum header ${name} is not supported.`);
    }
    const value = singleHeader(headers, name);
    if (!value.ok) return value;
    if (!isValidChecksumValue(algorithm, value.value ?? '')) {
      return fail('InvalidRequest', `Value for ${name} header is invalid.`);
    }
    declared.push({ algorithm, value: value.value, source: 'header' });
  }
  for (const name of opts.trailerNames ?? []) {
    const algorithm = checksumAlgorithmOfHeader(name);
    if (!algorithm) {
      return fail(
        'InvalidRequest',
        'The value specified in the x-amz-trailer header is not supported',
      );
    }
    declared.push({ algorithm, source: 'trailer' });
  }
  if (declared.length > 1) {
    return fail(
      'InvalidRequest',
      'Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed.',
    );
  }

  const sdkAlgorithm = singleHeader(headers, 'x-amz-sdk-checksum-algorithm');
  if (!sdkAlgorithm.ok) return sdkAlgorithm;
  if (sdkAlgorithm.value !== undefined) {
    const algorithm = parseChecksumAlgorithm(sdkAlgorithm.value);
    if (!algorithm) {
      return fail('InvalidRequest', 'Value for x-amz-sdk-checksum-algorithm header is invalid.');
    }
    if (declared.length === 0) {
      return fail(
        'InvalidRequest',
        'x-amz-sdk-checksum-algorithm specified, but no corresponding x-amz-checksum-* or x-amz-trailer headers were found.',
      );
    }
    if (declared[0].algorithm !== algorithm) {
      return fail(
        'InvalidRequest',
        `x-amz-sdk-checksum-algorithm ${algorithm} does not match the ${declared[0].algorithm} checksum sent.`,
      );
    }
  }
  if (declared.length === 1) out.checksum = declared[0];
  return ok(out);
}

// --- Digests and their check ------------------------------------------------------------------

export interface BodyDigests {
  length: number;
  /** MD5 of the body (undefined when not computed). */
  md5?: Buffer;
  sha256Hex?: string;
  /** base64 values of every checksum computed. */
  checksums: Partial<Record<ChecksumAlgorithm, string>>;
}

/** Accumulates the digests a `BodyVerifierOptions` asks for. */
export class BodyDigester {
  private length = 0;
  private readonly md5?: Hash;
  private readonly sha256?: Hash;
  private readonly hashers = new Map<ChecksumAlgorithm, Hasher>();

  constructor(opts: BodyVerifierOptions) {
    const later = opts.hashedDownstream === true;
    if (!later && (opts.md5 !== false || opts.contentMd5 !== undefined)) {
      this.md5 = createHash('md5');
    }
    if (!later && opts.contentSha256Hex !== undefined) this.sha256 = createHash('sha256');
    for (const a of [
      ...(opts.checksum ? [opts.checksum.algorithm] : []),
      ...(opts.computeChecksums ?? []),
    ]) {
      if (later && a === 'SHA256') continue;
      if (!this.hashers.has(a)) this.hashers.set(a, createChecksum(a));
    }
  }

  update(data: Uint8Array): void {
    this.length += data.length;
    this.md5?.update(data);
    this.sha256?.update(data);
    for (const h of this.hashers.values()) h.update(data);
  }

  finish(): BodyDigests {
    const checksums: Partial<Record<ChecksumAlgorithm, string>> = {};
    for (const [a, h] of this.hashers) checksums[a] = h.digest().toString('base64');
    return {
      length: this.length,
      md5: this.md5?.digest(),
      sha256Hex: this.sha256?.digest('hex'),
      checksums,
    };
  }
}

/** The S3 error for digests that do not match what was declared (undefined when all match). */
export function checkDigests(
  digests: BodyDigests,
  opts: BodyVerifierOptions,
  checksumValue: string | undefined = opts.checksum?.value,
): S3Error | undefined {
  if (
    opts.contentSha256Hex !== undefined &&
    digests.sha256Hex !== opts.contentSha256Hex.toLowerCase()
  ) {
    return new S3Error(
      'XAmzContentSHA256Mismatch',
      "The provided 'x-amz-content-sha256' header does not match what was computed.",
    );
  }
  if (opts.contentMd5 !== undefined && digests.md5?.toString('base64') !== opts.contentMd5) {
    return new S3Error(
      'BadDigest',
      'The Content-MD5 you specified did not match what we received.',
    );
  }
  if (opts.checksum) {
    const a = opts.checksum.algorithm;
    if (checksumValue === undefined) {
      return new S3Error('InvalidRequest', `The ${checksumHeaderName(a)} trailer is missing.`);
    }
    if (!isValidChecksumValue(a, checksumValue)) {
      return new S3Error(
        'InvalidRequest',
        `Value for ${checksumHeaderName(a)} trailing header is invalid.`,
      );
    }
    if (digests.checksums[a] !== checksumValue) {
      return new S3Error(
        'BadDigest',
        `The ${a} you specified did not match the calculated checksum.`,
      );
    }
  }
  return undefined;
}

/**
 * Pass-through Transform that hashes the body and fails at its end on a mismatch — or, with
 * `hashedDownstream`, keeps what it computed and checks it all in `check`, given the SHA-256
 * and MD5 computed downstream.
 */
export class BodyVerifier extends Transform {
  private readonly digester: BodyDigester;
  /** Set once the whole body went through and matched every declaration. */
  digests: BodyDigests | undefined;
  /** `hashedDownstream`: this stream's own digests and the checksum value, once it ended. */
  private ended?: { digests: BodyDigests; value: string | undefined };

  constructor(private readonly opts: BodyVerifierOptions) {
    super();
    this.digester = new BodyDigester(opts);
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.digester.update(chunk);
    cb(null, chunk);
  }

  override _flush(cb: TransformCallback): void {
    const digests = this.digester.finish();
    let value = this.opts.checksum?.value;
    if (this.opts.checksum?.source === 'trailer') {
      try {
        value = this.opts.resolveChecksumValue?.();
      } catch (e) {
        cb(e as Error);
        return;
      }
    }
    if (this.opts.hashedDownstream) {
      this.ended = { digests, value };
      cb();
      return;
    }
    const error = checkDigests(digests, this.opts, value);
    if (error) {
      cb(error);
      return;
    }
    this.digests = digests;
    cb();
  }

  /**
   * `hashedDownstream`: every declaration checked (in the order the end of the stream checks
   * them otherwise), the body's SHA-256 and MD5 (hex) being `downstream`'s. Answers the error,
   * or undefined when all match.
   */
  check(downstream: { sha256: string; md5: string }): S3Error | undefined {
    if (!this.ended) throw new Error('the body has not gone through the verifier');
    const { digests: own, value } = this.ended;
    const sha256 = Buffer.from(downstream.sha256, 'hex');
    const digests: BodyDigests = {
      ...own,
      md5: Buffer.from(downstream.md5, 'hex'),
      sha256Hex: downstream.sha256,
      checksums: { ...own.checksums },
    };
    const wantsSha256 =
      this.opts.checksum?.algorithm === 'SHA256' || this.opts.computeChecksums?.includes('SHA256');
    if (wantsSha256) digests.checksums.SHA256 = sha256.toString('base64');
    const error = checkDigests(digests, this.opts, value);
    if (!error) this.digests = digests;
    return error;
  }
}
