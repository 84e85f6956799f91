import {
  BeforeApplicationShutdown,
  Inject,
  Injectable,
  Logger,
  OnModuleInit,
} from '@nestjs/common';
import type { Request } from 'express';
import { randomBytes, randomUUID } from 'node:crypto';
import { Readable, Transform, TransformCallback } from 'node:stream';
import type { Principal } from '../common/principal';
import { feed } from '../common/streams';
import { APP_CONFIG, AppConfig } from '../config/config';
import { StateAccess } from '../state/state-access';
import { StateWriter } from '../state/state-writer';
import { BLOB_STORE, BlobStore } from '../storage/blob-store';
import { deleteBlobs } from '../storage/delete-blobs';
import { COMPLETE_XML_LIMITS, parseCompleteMultipartXml } from './complete-multipart-xml';
import { MultipartRepository } from './multipart.repository';
import { resolveObject } from './object-key';
import type { ReplayGuard } from './replay-guard.service';
import { openRequestBody } from './request-body';
import { S3Error } from './s3-errors';
import { describeS3Request } from './s3-headers';
import { quoted, S3Reply, sse, xml } from './s3-replies';
import { isoDate, readAllLimited, s3BaseOf } from './s3-request';
import { encodeKeyPath } from './s3-uri';
import { el, S3_NS } from './s3-xml';
import type { SigningContext } from './sigv4';

const MIN_PART_BYTES = 5 * 1024 * 1024;
const MAX_PARTS = COMPLETE_XML_LIMITS.maxParts;
const STALE_UPLOAD_SECONDS = 24 * 3600;

/**
 * S3 multipart uploads of states: create, upload a part, complete (one ordinary state write,
 * streamed part by part), abort, list the parts, and the hourly sweep of abandoned uploads.
 * An upload belongs to the principal that created it; nothing is a version until completed.
 */
@Injectable()
export class S3MultipartService implements OnModuleInit, BeforeApplicationShutdown {
  private readonly logger = new Logger('s3');
  private sweeper?: NodeJS.Timeout;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly writer: StateWriter,
    private readonly access: StateAccess,
    private readonly uploads: MultipartRepository,
    @Inject(BLOB_STORE) private readonly blobs: BlobStore,
  ) {}

  onModuleInit(): void {
    // Multipart uploads abandoned by their clients (or completed by a process that then died).
    this.sweeper = setInterval(() => void this.sweepStaleUploads(), 3600_000);
    this.sweeper.unref();
  }

  beforeApplicationShutdown(): void {
    clearInterval(this.sweeper);
  }

  async sweepStaleUploads(): Promise<void> {
    try {
      for (const id of await this.uploads.stale(STALE_UPLOAD_SECONDS)) {
        await this.deleteBlobs((await this.uploads.remove(id)) ?? []);
      }
    } catch (e) {
      this.logger.warn({ err: e }, 'could not sweep stale multipart uploads');
    }
  }

  async createMultipart(
    principal: Principal,
    bucket: string,
    key: string,
    req: Request,
    guard?: ReplayGuard,
  ): Promise<S3Reply> {
    const { kind, addr } = resolveObject(key, this.config.s3Door.workspacePrefixes);
    if (kind === 'lock')
      throw new S3Error('InvalidRequest', 'lock objects are written with PutObject');
    await this.access.authorizeWrite(principal, addr);
    const uploadId = randomBytes(24).toString('base64url');
    await this.uploads.create(
      {
        upload_id: uploadId,
        bucket,
        object_key: key,
        unit: addr.unit,
        workspace: addr.workspace,
        principal: principal.subject,
      },
      guard?.claim,
    );
    return xml(
      200,
      `<InitiateMultipartUploadResult xmlns="${S3_NS}">${el('Bucket', bucket)}${el('Key', key)}${el('UploadId', uploadId)}</InitiateMultipartUploadResult>`,
      sse(describeS3Request(req)),
    );
  }

  /** The upload `?uploadId=` names, if it is the caller's upload of this key. */
  private async upload(principal: Principal, key: string, q: Map<string, string>) {
    const uploadId = q.get('uploadId');
    const upload = uploadId ? await this.uploads.find(uploadId) : undefined;
    // Someone else's upload is answered like a missing one: ids are not to be probed.
    if (!upload || upload.object_key !== key || upload.principal !== principal.subject) {
      throw new S3Error(
        'NoSuchUpload',
        'The specified multipart upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed.',
      );
    }
    return upload;
  }

  async uploadPart(
    principal: Principal,
    key: string,
    q: Map<string, string>,
    req: Request,
    signing: SigningContext,
    guard?: ReplayGuard,
  ): Promise<S3Reply> {
    const upload = await this.upload(principal, key, q);
    const partRaw = q.get('partNumber') ?? '';
    const partNumber = Number(partRaw);
    if (!/^\d+$/.test(partRaw) || partNumber < 1 || partNumber > MAX_PARTS) {
      throw new S3Error(
        'InvalidArgument',
        'Part number must be an integer between 1 and 10000, inclusive',
      );
    }
    const body = openRequestBody(req, signing, true);
    const limit = new ByteLimit(this.config.maxStateBytes);
    const blobKey = `parts/${randomUUID()}`;
    let size: number;
    try {
      ({ size } = await this.blobs.put(blobKey, feed(body.stream, limit)));
    } catch (e) {
      await this.deleteBlobs([blobKey]);
      throw e;
    }
    const md5 = body.verifier.digests?.md5?.toString('hex');
    if (md5 === undefined) {
      await this.deleteBlobs([blobKey]);
      throw new S3Error('IncompleteBody', 'the part body ended early');
    }
    let replaced: string | undefined;
    try {
      replaced = await this.uploads.putPart(
        {
          upload_id: upload.upload_id,
          part_number: partNumber,
          blob_key: blobKey,
          size: String(size),
          md5,
        },
        guard?.claim,
      );
    } catch (e) {
      await this.deleteBlobs([blobKey]); // refused (a replay) or failed: the part is not kept
      throw e;
    }
    if (replaced) await this.deleteBlobs([replaced]);
    return { status: 200, headers: { ETag: quoted(md5), ...sse(describeS3Request(req)) } };
  }

  async completeMultipart(
    principal: Principal,
    bucket: string,
    key: string,
    q: Map<string, string>,
    req: Request,
    signing: SigningContext,
    guard?: ReplayGuard,
  ): Promise<S3Reply> {
    const upload = await this.upload(principal, key, q);
    const requested = parseCompleteMultipartXml(
      await readAllLimited(
        openRequestBody(req, signing, false).stream,
        COMPLETE_XML_LIMITS.maxBytes,
        'the part list',
      ),
    );
    const stored = new Map(
      (await this.uploads.parts(upload.upload_id)).map((p) => [p.part_number, p]),
    );
    const chosen = requested.map((r, i) => {
      const part = stored.get(r.partNumber);
      if (!part || part.md5 !== r.etag) {
        throw new S3Error(
          'InvalidPart',
          `Part ${r.partNumber} was not uploaded or its ETag does not match`,
        );
      }
      if (i < requested.length - 1 && Number(part.size) < MIN_PART_BYTES) {
        throw new S3Error(
          'EntityTooSmall',
          `Part ${r.partNumber} is smaller than the 5 MiB minimum of all but the last part`,
        );
      }
      return part;
    });
    const total = chosen.reduce((n, p) => n + Number(p.size), 0);
    const blobs = this.blobs;
    async function* concatenated(): AsyncGenerator<Buffer> {
      for (const part of chosen)
        for await (const chunk of await blobs.get(part.blob_key)) yield chunk as Buffer;
    }
    // Only now does the upload become a version: one ordinary state write, streamed part by part.
    const written = await this.writer.write({
      unit: upload.unit,
      workspace: upload.workspace,
      principal,
      door: 's3',
      body: Readable.from(concatenated()),
      contentLength: total,
      inTransaction: guard?.claim,
    });
    await this.deleteBlobs((await this.uploads.remove(upload.upload_id)) ?? []);
    // The ETag every later HEAD, GET and listing will show: the MD5 of the stored state.
    const etag = quoted(written.version.md5);
    return xml(
      200,
      `<CompleteMultipartUploadResult xmlns="${S3_NS}">${el('Location', `${s3BaseOf(req)}/${bucket}/${encodeKeyPath(key)}`)}${el('Bucket', bucket)}${el('Key', key)}${el('ETag', etag)}</CompleteMultipartUploadResult>`,
      sse(describeS3Request(req)),
    );
  }

  async abortMultipart(
    principal: Principal,
    key: string,
    q: Map<string, string>,
    guard?: ReplayGuard,
  ): Promise<S3Reply> {
    const upload = await this.upload(principal, key, q);
    await this.deleteBlobs((await this.uploads.remove(upload.upload_id, guard?.claim)) ?? []);
    return { status: 204 };
  }

  async listParts(
    principal: Principal,
    bucket: string,
    key: string,
    q: Map<string, string>,
  ): Promise<S3Reply> {
    const upload = await this.upload(principal, key, q);
    const parts = (await this.uploads.parts(upload.upload_id))
      .map(
        (p) =>
          `<Part>${el('PartNumber', p.part_number)}${el('LastModified', isoDate(new Date(p.created_at)))}${el('ETag', quoted(p.md5))}${el('Size', p.size)}</Part>`,
      )
      .join('');
    return xml(
      200,
      `<ListPartsResult xmlns="${S3_NS}">${el('Bucket', bucket)}${el('Key', key)}${el('UploadId', upload.upload_id)}${el('IsTruncated', false)}${parts}</ListPartsResult>`,
    );
  }

  private deleteBlobs(keys: string[]): Promise<void> {
    return deleteBlobs(this.blobs, keys, this.logger, 'could not delete a multipart part');
  }
}

/** Fails a stream once more than `max` bytes went through (parts of an oversized state). */
class ByteLimit extends Transform {
  private seen = 0;
  constructor(private readonly max: number) {
    super();
  }
  override _transform(chunk: Buffer, _e: BufferEncoding, cb: TransformCallback): void {
    this.seen += chunk.length;
    if (this.seen > this.max)
      cb(
        new S3Error(
          'EntityTooLarge',
          `Your proposed upload exceeds the maximum allowed size of ${this.max} bytes`,
        ),
      );
    else cb(null, chunk);
  }
}
