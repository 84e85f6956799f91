import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  S3Client,
  S3ServiceException,
} from '@aws-sdk/client-s3';
import type { S3ClientConfig } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { Readable } from 'node:stream';
import { trimBoth } from '../common/trim';

import { assertBlobKey, assertByteRange, chunkToBuffer, BlobNotFoundError } from './blob-store';
import type { BlobStore, ByteRange, PutResult } from './blob-store';

export interface S3BlobStoreOptions {
  bucket: string;
  /** Prepended to every key, joined with a `/` (leading and trailing slashes are ignored). */
  prefix?: string;
  /** Defaults to the SDK's region chain; `us-east-1` when only `endpoint` is given. */
  region?: string;
  /** For S3-compatible stores (MinIO, Ceph, R2, ...). */
  endpoint?: string;
  forcePathStyle?: boolean;
  /** Static credentials; without them the SDK's default provider chain is used. */
  credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
}

/** Multipart part size: bounds memory to about (queue size + 1) parts per put. */
export const S3_PART_SIZE = 8 * 1024 * 1024;
export const S3_QUEUE_SIZE = 2;

/**
 * Blobs as objects in one bucket. A put streams through a multipart upload (a single
 * PutObject when the body fits in one part), so the object only appears once the upload
 * completes; on failure the multipart upload is aborted. Configure an
 * AbortIncompleteMultipartUpload lifecycle rule on the bucket for uploads a crash leaves
 * behind.
 */
export class S3BlobStore implements BlobStore {
  readonly driver = 's3' as const;
  private readonly client: S3Client;
  private readonly bucket: string;
  private readonly prefix: string;

  constructor(options: S3BlobStoreOptions) {
    if (!options.bucket) throw new TypeError('S3BlobStore needs a bucket');
    this.bucket = options.bucket;
    const prefix = trimBoth(options.prefix ?? '', '/');
    this.prefix = prefix ? `${prefix}/` : '';
    // Checksums only where S3 requires them: several S3-compatible stores refuse the SDK's
    // default CRC32 trailers, and blob integrity is checked by our own sha256 anyway.
    const config: S3ClientConfig = {
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    };
    const region = options.region ?? (options.endpoint ? 'us-east-1' : undefined);
    if (region) config.region = region;
    if (options.endpoint) config.endpoint = options.endpoint;
    if (options.forcePathStyle !== undefined) config.forcePathStyle = options.forcePathStyle;
    if (options.credentials) config.credentials = { ...options.credentials };
    this.client = new S3Client(config);
  }

  async put(key: string, body: Readable): Promise<PutResult> {
    let size = 0;
    let sourceFailed = false;
    let sourceError: unknown;
    // Counts the bytes and records the source's own error: when the source fails after a
    // multipart upload began, Upload aborts it and may then report the abort's outcome instead.
    async function* tap(): AsyncGenerator<Buffer> {
      try {
        for await (const chunk of body) {
          const data = chunkToBuffer(chunk);
          size += data.length;
          yield data;
        }
      } catch (err) {
        sourceFailed = true;
        sourceError = err;
        throw err;
      }
    }
    const source = Readable.from(tap(), { objectMode: false });
    try {
      const upload = new Upload({
        client: this.client,
        params: {
          Bucket: this.bucket,
          Key: this.objectKey(key),
          Body: source,
          ContentType: 'application/octet-stream',
        },
        partSize: S3_PART_SIZE,
        queueSize: S3_QUEUE_SIZE,
        leavePartsOnError: false,
      });
      await upload.done();
      return { size };
    } catch (err) {
      const failedBySource = sourceFailed;
      if (!body.destroyed) body.destroy();
      if (!source.destroyed) source.destroy();
      throw failedBySource ? sourceError : err;
    }
  }

  async get(key: string, range?: ByteRange): Promise<Readable> {
    const objectKey = this.objectKey(key);
    if (range) assertByteRange(range);
    try {
      const res = await this.client.send(
        new GetObjectCommand({
          Bucket: this.bucket,
          Key: objectKey,
          Range: range ? `bytes=${range.start}-${range.end}` : undefined,
        }),
      );
      if (!(res.Body instanceof Readable)) {
        throw new Error(`GetObject ${objectKey} returned no readable body`);
      }
      return range ? exactRange(res.Body, range, res.ContentRange, res.ContentLength) : res.Body;
    } catch (err) {
      if (isNotFound(err)) throw new BlobNotFoundError(key);
      if (range && httpStatus(err) === 416) {
        throw new RangeError(
          `byte range ${range.start}-${range.end} is not satisfiable for blob ${key}`,
        );
      }
      throw err;
    }
  }

  async stat(key: string): Promise<number | undefined> {
    const objectKey = this.objectKey(key);
    try {
      const res = await this.client.send(
        new HeadObjectCommand({ Bucket: this.bucket, Key: objectKey }),
      );
      return res.ContentLength ?? 0;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async delete(key: string): Promise<void> {
    // DeleteObject succeeds for a missing key.
    await this.client.send(
      new DeleteObjectCommand({ Bucket: this.bucket, Key: this.objectKey(key) }),
    );
  }

  async ping(): Promise<void> {
    await this.client.send(new HeadBucketCommand({ Bucket: this.bucket }));
  }

  close(): Promise<void> {
    this.client.destroy();
    return Promise.resolve();
  }

  private objectKey(key: string): string {
    assertBlobKey(key);
    return this.prefix + key;
  }
}

/** A missing object (not a missing bucket, which is a configuration error worth surfacing). */
function isNotFound(err: unknown): boolean {
  const name = err instanceof Error ? err.name : undefined;
  if (name === 'NoSuchKey') return true;
  return httpStatus(err) === 404 && name !== 'NoSuchBucket';
}

function httpStatus(err: unknown): number | undefined {
  if (err instanceof S3ServiceException) return err.$metadata.httpStatusCode;
  if (typeof err === 'object' && err !== null && '$metadata' in err) {
    const metadata = (err as { $metadata?: { httpStatusCode?: unknown } }).$metadata;
    return typeof metadata?.httpStatusCode === 'number' ? metadata.httpStatusCode : undefined;
  }
  return undefined;
}

/**
 * Makes sure the body is exactly the requested range. Some S3-compatible servers get ranges
 * wrong (s3rver 3.7.1 answers `bytes=0-0` with the whole object, since it tests `end` for
 * truthiness); when the served bytes cover the request, the extra bytes are cut off here.
 */
function exactRange(
  body: Readable,
  range: ByteRange,
  contentRange: string | undefined,
  contentLength: number | undefined,
): Readable {
  const match = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(contentRange ?? '');
  // Without Content-Range the server ignored the Range header and sent the whole object.
  const servedStart = match ? Number(match[1]) : 0;
  const servedEnd = match ? Number(match[2]) : (contentLength ?? 0) - 1;
  const total = match && match[3] !== '*' ? Number(match[3]) : servedEnd + 1;
  const wantedEnd = Math.min(range.end, total - 1);
  if (wantedEnd < range.start) {
    body.destroy();
    throw new RangeError(`byte range ${range.start}-${range.end} is not satisfiable`);
  }
  if (servedStart === range.start && servedEnd === wantedEnd) return body;
  if (servedStart > range.start || servedEnd < wantedEnd) {
    body.destroy();
    throw new Error(
      `S3 served bytes ${servedStart}-${servedEnd} for a request of ${range.start}-${range.end}`,
    );
  }
  let skip = range.start - servedStart;
  let remaining = wantedEnd - range.start + 1;
  async function* window(): AsyncGenerator<Buffer> {
    // Leaving the loop early destroys `body`, so the surplus is not downloaded.
    for await (const chunk of body) {
      let data = chunkToBuffer(chunk);
      if (skip > 0) {
        const skipped = Math.min(skip, data.length);
        skip -= skipped;
        data = data.subarray(skipped);
      }
      if (data.length > remaining) data = data.subarray(0, remaining);
      if (data.length > 0) {
        remaining -= data.length;
        yield data;
      }
      if (remaining === 0) return;
    }
    throw new Error(`S3 body ended ${remaining} bytes short of the requested range`);
  }
  return Readable.from(window(), { objectMode: false });
}
