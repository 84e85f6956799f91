import { createHash, Hash } from 'node:crypto';
import { Transform, TransformCallback } from 'node:stream';
import { trimOws } from '../common/trim';
import { checksumAlgorithmOfHeader } from './checksums';
import { S3Error, S3ErrorCode } from './s3-errors';
import {
  AwsChunkedEncoding,
  PayloadMode,
  STREAMING_AWS4_HMAC_SHA256_PAYLOAD,
  STREAMING_AWS4_HMAC_SHA256_PAYLOAD_TRAILER,
  STREAMING_UNSIGNED_PAYLOAD_TRAILER,
} from './sigv4';
import {
  EMPTY_SHA256,
  HeaderMap,
  Result,
  fail,
  hmacSha256,
  macEqualsHex,
  ok,
  singleHeader,
} from './wire';

/**
 * Streaming decoder for `Content-Encoding: aws-chunked` request bodies.
 *
 * Wire form (S3 SigV4 "chunked upload" and its trailer variants):
 *
 *   <hex size>[;chunk-signature=<64 hex>]\r\n<size bytes>\r\n      … repeated
 *   0[;chunk-signature=<64 hex>]\r\n                                the final, empty chunk
 *   [<trailer-name>:<value>\r\n …][x-amz-trailer-signature:<64 hex>\r\n]
 *   \r\n
 *
 * Modes (from x-amz-content-sha256):
 * - STREAMING-UNSIGNED-PAYLOAD-TRAILER (Terraform and the AWS SDKs over https): no signatures,
 *   trailers as declared in `x-amz-trailer` (`0\r\nx-amz-checksum-sha256:<b64>\r\n\r\n`);
 * - STREAMING-AWS4-HMAC-SHA256-PAYLOAD: every chunk signed, no trailers. Chunk n's signature is
 *   HMAC(kSigning, "AWS4-HMAC-SHA256-PAYLOAD\n<amz date>\n<scope>\n<signature n-1>\n
 *   <sha256("")>\n<sha256(chunk n)>"), chained from the seed (the request's own signature);
 * - STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER: as above, then the trailers and
 *   `x-amz-trailer-signature` = HMAC(kSigning, "AWS4-HMAC-SHA256-TRAILER\n<amz date>\n<scope>\n
 *   <signature of the final chunk>\n<sha256(trailer lines as "name:value\n")>").
 *
 * Guarantees: the decoded bytes add up to exactly `x-amz-decoded-content-length`; the input may
 * be split anywhere (inside a size, a signature, a CRLF); memory stays bounded by the line
 * limits — data is never buffered: each input piece's data bytes are handed on as views of it,
 * and a chunk's signature is checked as soon as its last byte went through. A consumer must
 * therefore treat the body as valid only once the stream ended without error (it has to anyway:
 * a trailing checksum is only known at the very end). Trailers must be exactly those declared
 * (each once); `trailers` holds them, lower-case names, once the body ended.
 *
 * Errors (S3Error): truncated body or fewer bytes than declared → IncompleteBody; malformed
 * framing (bad hex, missing CRLF, over-long line, chunk beyond the declared length, bytes after
 * the end) → InvalidArgument; wrong or missing chunk/trailer signature → SignatureDoesNotMatch;
 * undeclared, repeated, missing or malformed trailers → InvalidRequest.
 *
 * `AwsChunkedParser` is the pure incremental core (push bytes, get data views back);
 * `AwsChunkedDecoder` wraps it as a Transform; `awsChunkedOptionsFromRequest` reads the options
 * from the request headers and the verified signing context.
 */

export interface ChunkSigning {
  signingKey: Buffer;
  amzDate: string;
  scope: string;
  /** The verified signature of the request (the first "previous signature"). */
  seedSignature: string;
}

export interface AwsChunkedOptions {
  encoding: AwsChunkedEncoding;
  /** x-amz-decoded-content-length: the exact number of data bytes. */
  decodedContentLength: number;
  /** Trailer names declared in x-amz-trailer (lower-case). */
  declaredTrailers: readonly string[];
  /** Required by the two signed encodings. */
  signing?: ChunkSigning;
  /** Longest chunk-size line, without its CRLF (default 1024). */
  maxChunkLineLength?: number;
  /** Longest trailer line, without its CRLF (default 4096). */
  maxTrailerLineLength?: number;
}

const DEFAULT_MAX_CHUNK_LINE = 1024;
const DEFAULT_MAX_TRAILER_LINE = 4096;
const TRAILER_SIGNATURE = 'x-amz-trailer-signature';
const TOKEN = /^[a-z0-9!#$%&'*+.^_`|~-]+$/;

enum State {
  SizeLine,
  Data,
  DataCr,
  DataLf,
  Trailer,
  Done,
  Failed,
}

function error(code: S3ErrorCode, message: string): S3Error {
  return new S3Error(code, message);
}

/** The pure incremental aws-chunked parser (see the file header). */
export class AwsChunkedParser {
  private state = State.SizeLine;
  private readonly signed: boolean;
  private readonly trailerMode: boolean;
  private readonly maxChunkLine: number;
  private readonly maxTrailerLine: number;
  private readonly declared: ReadonlySet<string>;
  private remaining: number;
  private chunkRemaining = 0;
  private chunkHash: Hash | undefined;
  private chunkSignature = '';
  private previousSignature: string;
  private line: Buffer;
  private lineLength = 0;
  private readonly received = new Map<string, string>();
  private canonicalTrailers = '';
  private trailerSigned = false;
  private failure: S3Error | undefined;

  constructor(private readonly opts: AwsChunkedOptions) {
    this.signed = opts.encoding !== STREAMING_UNSIGNED_PAYLOAD_TRAILER;
    this.trailerMode = opts.encoding !== STREAMING_AWS4_HMAC_SHA256_PAYLOAD;
    if (this.signed && !opts.signing) {
      throw new TypeError(`${opts.encoding} needs the signing context`);
    }
    if (!Number.isSafeInteger(opts.decodedContentLength) || opts.decodedContentLength < 0) {
      throw new TypeError('decodedContentLength must be a non-negative safe integer');
    }
    this.maxChunkLine = opts.maxChunkLineLength ?? DEFAULT_MAX_CHUNK_LINE;
    this.maxTrailerLine = opts.maxTrailerLineLength ?? DEFAULT_MAX_TRAILER_LINE;
    this.declared = new Set(opts.declaredTrailers.map((t) => t.toLowerCase()));
    this.remaining = opts.decodedContentLength;
    this.previousSignature = opts.signing?.seedSignature.toLowerCase() ?? '';
    this.line = Buffer.allocUnsafe(Math.max(this.maxChunkLine, this.maxTrailerLine) + 2);
  }

  /** True once the terminating empty line was read. */
  get finished(): boolean {
    return this.state === State.Done;
  }

  /** The trailers read (lower-case names; the trailer signature is not among them). */
  get trailers(): Readonly<Record<string, string>> {
    return Object.fromEntries(this.received);
  }

  /**
   * Feeds the next bytes; returns the data bytes they carried, as views of `input` (copy them
   * if `input` is reused). Throws an S3Error on the first problem, and again on every later call.
   */
  push(input: Uint8Array): Buffer[] {
    if (this.failure) throw this.failure;
    const buf = Buffer.isBuffer(input)
      ? input
      : Buffer.from(input.buffer, input.byteOffset, input.byteLength);
    const out: Buffer[] = [];
    try {
      this.consume(buf, out);
    } catch (e) {
      this.state = State.Failed;
      this.failure =
        e instanceof S3Error ? e : error('InvalidArgument', 'The aws-chunked body is malformed.');
      throw this.failure;
    }
    return out;
  }

  /** Signals the end of the input; throws IncompleteBody unless the body was complete. */
  end(): Readonly<Record<string, string>> {
    if (this.failure) throw this.failure;
    if (this.state !== State.Done) {
      this.state = State.Failed;
      this.failure = error(
        'IncompleteBody',
        'The request body terminated unexpectedly (the aws-chunked body is incomplete).',
      );
      throw this.failure;
    }
    return this.trailers;
  }

  private consume(buf: Buffer, out: Buffer[]): void {
    let pos = 0;
    const len = buf.length;
    while (pos < len) {
      switch (this.state) {
        case State.SizeLine:
        case State.Trailer: {
          const limit = this.state === State.SizeLine ? this.maxChunkLine : this.maxTrailerLine;
          const lf = buf.indexOf(0x0a, pos);
          const end = lf < 0 ? len : lf;
          const piece = end - pos;
          // +1: the CR of the CRLF is part of what is collected before the LF.
          if (this.lineLength + piece > limit + 1) {
            throw error(
              'InvalidArgument',
              this.state === State.SizeLine
                ? `An aws-chunked chunk header line is longer than ${limit} bytes.`
                : `An aws-chunked trailer line is longer than ${limit} bytes.`,
            );
          }
          if (lf < 0) {
            buf.copy(this.line, this.lineLength, pos, len);
            this.lineLength += piece;
            pos = len;
            break;
          }
          let line: Buffer;
          if (this.lineLength === 0) {
            line = buf.subarray(pos, lf);
          } else {
            buf.copy(this.line, this.lineLength, pos, lf);
            line = this.line.subarray(0, this.lineLength + piece);
          }
          this.lineLength = 0;
          pos = lf + 1;
          if (line.length === 0 || line[line.length - 1] !== 0x0d) {
            throw error('InvalidArgument', 'An aws-chunked line does not end with CRLF.');
          }
          const text = line.toString('latin1', 0, line.length - 1);
          if (this.state === State.SizeLine) this.onSizeLine(text);
          else this.onTrailerLine(text);
          break;
        }
        case State.Data: {
          const n = Math.min(this.chunkRemaining, len - pos);
          const data = buf.subarray(pos, pos + n);
          out.push(data);
          this.chunkHash?.update(data);
          this.chunkRemaining -= n;
          pos += n;
          if (this.chunkRemaining === 0) {
            if (this.signed) this.verifyChunk(this.chunkHash?.digest('hex') ?? EMPTY_SHA256);
            this.state = State.DataCr;
          }
          break;
        }
        case State.DataCr:
        case State.DataLf: {
          const want = this.state === State.DataCr ? 0x0d : 0x0a;
          if (buf[pos] !== want) {
            throw error('InvalidArgument', 'An aws-chunked chunk is not followed by CRLF.');
          }
          pos++;
          this.state = this.state === State.DataCr ? State.DataLf : State.SizeLine;
          break;
        }
        case State.Done:
          throw error('InvalidArgument', 'There are bytes after the end of the aws-chunked body.');
        case State.Failed:
          throw this.failure ?? error('InvalidArgument', 'The aws-chunked body is malformed.');
      }
    }
  }

  private onSizeLine(text: string): void {
    const m = this.signed
      ? /^([0-9a-fA-F]{1,16});chunk-signature=([0-9a-fA-F]{64})$/.exec(text)
      : /^([0-9a-fA-F]{1,16})$/.exec(text);
    if (!m) {
      throw error(
        'InvalidArgument',
        this.signed
          ? 'An aws-chunked chunk header is not "<hex size>;chunk-signature=<signature>".'
          : 'An aws-chunked chunk header is not a hexadecimal size.',
      );
    }
    const hex = m[1].replace(/^0+(?=.)/, '');
    const size = hex.length > 13 ? Infinity : parseInt(hex, 16);
    if (size > this.remaining) {
      throw error(
        'InvalidArgument',
        'The aws-chunked chunk sizes add up to more than x-amz-decoded-content-length.',
      );
    }
    this.chunkSignature = m[2]?.toLowerCase() ?? '';
    if (size === 0) {
      if (this.remaining > 0) {
        throw error(
          'IncompleteBody',
          `The aws-chunked body ended ${this.remaining} bytes short of x-amz-decoded-content-length.`,
        );
      }
      if (this.signed) this.verifyChunk(EMPTY_SHA256);
      this.state = State.Trailer;
      return;
    }
    this.remaining -= size;
    this.chunkRemaining = size;
    this.chunkHash = this.signed ? createHash('sha256') : undefined;
    this.state = State.Data;
  }

  private verifyChunk(dataSha256Hex: string): void {
    const s = this.opts.signing;
    if (!s)
      throw error('SignatureDoesNotMatch', 'No signing context for a signed aws-chunked body.');
    const toSign = `AWS4-HMAC-SHA256-PAYLOAD\n${s.amzDate}\n${s.scope}\n${this.previousSignature}\n${EMPTY_SHA256}\n${dataSha256Hex}`;
    if (!macEqualsHex(hmacSha256(s.signingKey, toSign), this.chunkSignature)) {
      throw error(
        'SignatureDoesNotMatch',
        'The chunk signature we calculated does not match the signature you provided.',
      );
    }
    this.previousSignature = this.chunkSignature;
    this.chunkHash = undefined;
  }

  private onTrailerLine(text: string): void {
    if (text === '') {
      if (this.signed && this.trailerMode && !this.trailerSigned) {
        throw error('SignatureDoesNotMatch', 'The x-amz-trailer-signature trailer is missing.');
      }
      for (const name of this.declared) {
        if (!this.received.has(name)) {
          throw error(
            'InvalidRequest',
            `The ${name} trailer declared in x-amz-trailer is missing.`,
          );
        }
      }
      this.state = State.Done;
      return;
    }
    if (!this.trailerMode) {
      throw error(
        'InvalidArgument',
        'The final aws-chunked chunk is not followed by CRLF (no trailers with this encoding).',
      );
    }
    if (this.trailerSigned) {
      throw error('InvalidRequest', 'x-amz-trailer-signature must be the last trailer.');
    }
    const colon = text.indexOf(':');
    const name = colon < 0 ? '' : text.slice(0, colon).trim().toLowerCase();
    if (!TOKEN.test(name)) {
      throw error('InvalidRequest', 'An aws-chunked trailer is not "<name>:<value>".');
    }
    const value = trimOws(text.slice(colon + 1));
    if (name === TRAILER_SIGNATURE) {
      if (!this.signed) {
        throw error(
          'InvalidRequest',
          'x-amz-trailer-signature is not expected with an unsigned payload.',
        );
      }
      this.verifyTrailerSignature(value);
      this.trailerSigned = true;
      return;
    }
    if (!this.declared.has(name)) {
      throw error('InvalidRequest', `The trailer ${name} was not declared in x-amz-trailer.`);
    }
    if (this.received.has(name)) {
      throw error('InvalidRequest', `The trailer ${name} appears more than once.`);
    }
    this.received.set(name, value);
    this.canonicalTrailers += `${name}:${value}\n`;
  }

  private verifyTrailerSignature(given: string): void {
    const s = this.opts.signing;
    if (!s)
      throw error('SignatureDoesNotMatch', 'No signing context for a signed aws-chunked body.');
    const trailerHash = createHash('sha256').update(this.canonicalTrailers, 'latin1').digest('hex');
    const toSign = `AWS4-HMAC-SHA256-TRAILER\n${s.amzDate}\n${s.scope}\n${this.previousSignature}\n${trailerHash}`;
    if (!macEqualsHex(hmacSha256(s.signingKey, toSign), given)) {
      throw error(
        'SignatureDoesNotMatch',
        'The trailer signature we calculated does not match the signature you provided.',
      );
    }
  }
}

/** `AwsChunkedParser` as a Transform: aws-chunked bytes in, decoded bytes out. */
export class AwsChunkedDecoder extends Transform {
  private readonly parser: AwsChunkedParser;
  /** The trailers (lower-case names), once the body ended without error. */
  trailers: Readonly<Record<string, string>> | undefined;

  constructor(opts: AwsChunkedOptions) {
    super();
    this.parser = new AwsChunkedParser(opts);
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    let parts: Buffer[];
    try {
      parts = this.parser.push(chunk);
    } catch (e) {
      cb(e as Error);
      return;
    }
    for (const p of parts) this.push(p);
    cb();
  }

  override _flush(cb: TransformCallback): void {
    try {
      this.trailers = this.parser.end();
    } catch (e) {
      cb(e as Error);
      return;
    }
    this.emit('trailers', this.trailers);
    cb();
  }
}

/** x-amz-trailer → the declared names (lower-case, at most one, each a checksum header). */
export function parseTrailerHeader(value: string | undefined): Result<string[]> {
  if (value === undefined || value.trim() === '') return ok([]);
  const names = value.split(',').map((n) => n.trim().toLowerCase());
  if (names.some((n) => checksumAlgorithmOfHeader(n) === undefined)) {
    return fail(
      'InvalidRequest',
      'The value specified in the x-amz-trailer header is not supported',
    );
  }
  if (names.length > 1) {
    return fail(
      'InvalidRequest',
      'Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed.',
    );
  }
  return ok(names);
}

/**
 * The decoder options of a request whose payload mode is aws-chunked (undefined for a plain
 * body). `context` is the verified signing context (`verifySigV4`).
 */
export function awsChunkedOptionsFromRequest(
  headers: HeaderMap,
  context: {
    payload: PayloadMode;
    signingKey: Buffer;
    amzDate: string;
    scope: string;
    seedSignature: string;
  },
): Result<AwsChunkedOptions | undefined> {
  const encodingHeader = singleHeader(headers, 'content-encoding');
  if (!encodingHeader.ok) return encodingHeader;
  const codings = (encodingHeader.value ?? '')
    .split(',')
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== '');
  const trailerHeader = singleHeader(headers, 'x-amz-trailer');
  if (!trailerHeader.ok) return trailerHeader;

  if (context.payload.kind !== 'aws-chunked') {
    if (codings.includes('aws-chunked')) {
      return fail(
        'InvalidRequest',
        'Content-Encoding aws-chunked needs x-amz-content-sha256 set to a STREAMING-* value.',
      );
    }
    if (trailerHeader.value !== undefined) {
      return fail('InvalidRequest', 'x-amz-trailer is only allowed with an aws-chunked body.');
    }
    return ok(undefined);
  }
  const encoding = context.payload.encoding;

  const decoded = singleHeader(headers, 'x-amz-decoded-content-length');
  if (!decoded.ok) return decoded;
  if (decoded.value === undefined) {
    return fail('MissingContentLength', 'An aws-chunked body needs x-amz-decoded-content-length.');
  }
  if (!/^\d{1,15}$/.test(decoded.value)) {
    return fail('InvalidArgument', 'x-amz-decoded-content-length must be a number of bytes.');
  }

  const trailers = parseTrailerHeader(trailerHeader.value);
  if (!trailers.ok) return trailers;
  if (encoding === STREAMING_AWS4_HMAC_SHA256_PAYLOAD && trailers.value.length > 0) {
    return fail('InvalidRequest', `x-amz-trailer is not allowed with ${encoding}.`);
  }
  if (encoding === STREAMING_AWS4_HMAC_SHA256_PAYLOAD_TRAILER && trailers.value.length === 0) {
    return fail('InvalidRequest', `${encoding} needs an x-amz-trailer header.`);
  }

  return ok({
    encoding,
    decodedContentLength: Number(decoded.value),
    declaredTrailers: trailers.value,
    signing:
      encoding === STREAMING_UNSIGNED_PAYLOAD_TRAILER
        ? undefined
        : {
            signingKey: context.signingKey,
            amzDate: context.amzDate,
            scope: context.scope,
            seedSignature: context.seedSignature,
          },
  });
}
