import {
  Inject,
  Injectable,
  Logger,
  OnApplicationBootstrap,
  BeforeApplicationShutdown,
  OnModuleInit,
} from '@nestjs/common';
import type { Request } from 'express';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { Readable, Transform, TransformCallback } from 'node:stream';
import type { Principal } from '../common/principal';
import { APP_CONFIG, AppConfig } from '../config/config';
import { DomainError } from '../common/errors';
import { headerValue } from '../common/raw-body';
import { feed } from '../common/streams';
import { MAX_LOCK_INFO_BYTES } from '../state/locks/lock-info';
import { LocksService } from '../state/locks/locks.service';
import { StateAccess } from '../state/state-access';
import { StateReader } from '../state/state-reader';
import type { StateAddress } from '../state/state-types';
import { StateWriter } from '../state/state-writer';
import { BLOB_STORE, BlobStore } from '../storage/blob-store';
import { deleteBlobs } from '../storage/delete-blobs';
import { COMPLETE_XML_LIMITS, parseCompleteMultipartXml } from './complete-multipart-xml';
import { BucketRepository } from './bucket.repository';
import {
  ListedObject,
  listBucketResultV1,
  listBucketResultV2,
  listPage,
  ListRequest,
  listRequestV1,
  listRequestV2,
  sortForListing,
} from './listing';
import { bodyTransforms, planRequestBody } from './request-body';
import { MultipartRepository } from './multipart.repository';
import type { ReplayGuard } from './replay-guard.service';
import { S3Error } from './s3-errors';
import { objectKey, resolveKey } from '../common/s3-keys';
import { encodeKeyPath } from './s3-uri';
import {
  decodedBody,
  headersOf,
  httpDate,
  isoDate,
  parseRange,
  readAllLimited,
  s3BaseOf,
  virtualHostedBucket,
} from './s3-request';
import { el, S3_NS, XML_HEADER } from './s3-xml';
import type { SigningContext } from './sigv4';

/** What the door sends back. */
export interface S3Reply {
  status: number;
  headers?: Record<string, string>;
  body?: string | Buffer | Readable;
}

const MAX_BUCKET_CONFIGURATION_BYTES = 64 * 1024;
const MIN_PART_BYTES = 5 * 1024 * 1024;
const MAX_PARTS = COMPLETE_XML_LIMITS.maxParts;
const STALE_UPLOAD_SECONDS = 24 * 3600;

const quoted = (md5Hex: string): string => `"${md5Hex}"`;

/**
 * The S3 operations of the `/s3` door, translated onto the state and lock services: the door
 * adds no rule of its own beyond S3's wire format and the key mapping.
 */
@Injectable()
export class S3Service implements OnModuleInit, OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('s3');
  private sweeper?: NodeJS.Timeout;
  /** The host names of this server's base URLs (to recognise virtual-hosted-style requests). */
  private readonly selfHosts: string[];

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly reader: StateReader,
    private readonly writer: StateWriter,
    private readonly access: StateAccess,
    private readonly locks: LocksService,
    private readonly uploads: MultipartRepository,
    private readonly buckets: BucketRepository,
    @Inject(BLOB_STORE) private readonly blobs: BlobStore,
  ) {
    this.selfHosts = [config.publicUrl, ...config.aliases].map((u) =>
      new URL(u).hostname.toLowerCase(),
    );
  }

  onModuleInit(): void {
    // Multipart uploads abandoned by their clients (or completed by a process that then died).
    this.sweeper = setInterval(() => void this.sweepStaleUploads(), 3600_000);
    this.sweeper.unref();
  }

  /** The configured buckets are served from now on: their creation time, if not recorded yet. */
  async onApplicationBootstrap(): Promise<void> {
    try {
      await this.buckets.recordServed(this.config.s3Door.buckets);
    } catch (e) {
      this.logger.warn({ err: e }, 'could not record when the S3 buckets were first served');
    }
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

  // ------------------------------------------------------------------ service and bucket

  /** ListBuckets: each configured bucket, created when the server first served it. */
  async listBuckets(principal: Principal): Promise<S3Reply> {
    const names = this.config.s3Door.buckets;
    let created = await this.buckets.firstServed(names);
    if (names.some((b) => !created.has(b))) {
      // Not recorded at start (the database was not answering then): recorded now.
      await this.buckets.recordServed(names);
      created = await this.buckets.firstServed(names);
    }
    const list = names
      .map(
        (b) =>
          `<Bucket>${el('Name', b)}${el('CreationDate', isoDate(created.get(b) ?? new Date()))}</Bucket>`,
      )
      .join('');
    return xml(
      200,
      `<ListAllMyBucketsResult xmlns="${S3_NS}"><Owner>${el('ID', principal.subject)}${el('DisplayName', principal.subject)}</Owner><Buckets>${list}</Buckets></ListAllMyBucketsResult>`,
    );
  }

  assertBucket(bucket: string): void {
    if (!this.config.s3Door.buckets.includes(bucket)) {
      throw new S3Error(
        'NoSuchBucket',
        `The specified bucket does not exist: ${bucket} (this server answers for ${this.config.s3Door.buckets.join(', ')})`,
      );
    }
  }

  /**
   * Refuses a virtual-hosted-style request (`Host: tfstate.<this server>`), which would
   * otherwise be read path-style — its key taken for a bucket — and answered misleadingly.
   */
  assertPathStyle(host: string | undefined): void {
    const bucket = virtualHostedBucket(host, this.config.s3Door.buckets, this.selfHosts);
    if (bucket === undefined) return;
    throw new S3Error(
      'InvalidRequest',
      `Virtual-hosted-style requests are not supported (the Host "${host}" names the bucket ${bucket} as a subdomain): address buckets path-style, /${bucket}/<key> — s3cmd: host_bucket = host_base; AWS CLI: addressing_style = path; Terraform: use_path_style = true; rclone: force_path_style = true`,
    );
  }

  /**
   * CreateBucket: the configured buckets exist already and belong to every caller, so creating
   * one answers as S3 (us-east-1) does for a bucket you own — 200 — after reading the body (a
   * CreateBucketConfiguration, checked against its signed hash and otherwise ignored). Any other
   * name cannot be created here.
   */
  async createBucket(bucket: string, req: Request, signing: SigningContext): Promise<S3Reply> {
    if (!this.config.s3Door.buckets.includes(bucket)) {
      throw new S3Error(
        'AccessDenied',
        `Buckets cannot be created here: this server answers for ${this.config.s3Door.buckets.join(', ')} (STATEHOUSE_S3_DOOR_BUCKETS)`,
      );
    }
    await readAllLimited(
      this.body(req, signing, false).stream,
      MAX_BUCKET_CONFIGURATION_BYTES,
      'the bucket configuration',
    );
    return { status: 200, headers: { Location: `/${bucket}` } };
  }

  bucketLocation(): S3Reply {
    return xml(200, `<LocationConstraint xmlns="${S3_NS}"></LocationConstraint>`);
  }

  bucketVersioning(): S3Reply {
    // Every write is kept as a version (by Statehouse's own numbering).
    return xml(
      200,
      `<VersioningConfiguration xmlns="${S3_NS}">${el('Status', 'Enabled')}</VersioningConfiguration>`,
    );
  }

  /** ListObjects (v1, paged by marker) over the states the caller may read. */
  async listObjects(
    principal: Principal,
    bucket: string,
    q: Map<string, string>,
  ): Promise<S3Reply> {
    const r = listRequestV1(q);
    return xml(
      200,
      listBucketResultV1(bucket, r, listPage(await this.objects(principal, r), r), q),
    );
  }

  /** ListObjectsV2 (paged by continuation token) over the states the caller may read. */
  async listObjectsV2(
    principal: Principal,
    bucket: string,
    q: Map<string, string>,
  ): Promise<S3Reply> {
    const r = listRequestV2(q);
    return xml(
      200,
      listBucketResultV2(bucket, r, listPage(await this.objects(principal, r), r), q),
    );
  }

  /** The objects of the caller's readable states under the listing's prefix, in listing order. */
  private async objects(principal: Principal, r: ListRequest): Promise<ListedObject[]> {
    const objects: ListedObject[] = [];
    for (const s of await this.reader.listReadableStates(principal)) {
      const keys =
        s.workspace === 'default'
          ? [objectKey(s, '')]
          : this.config.s3Door.workspacePrefixes.map((p) => objectKey(s, p));
      for (const key of keys)
        if (key.startsWith(r.prefix))
          objects.push({ key, size: s.size, md5: s.md5, modified: s.modified });
    }
    return sortForListing(objects);
  }

  // ------------------------------------------------------------------ objects

  /** Resolves a key to a state or its lock object; a key that can name neither is refused. */
  resolve(key: string): { kind: 'state' | 'lock'; addr: StateAddress } {
    const r = resolveKey(key, this.config.s3Door.workspacePrefixes);
    if (r.kind === 'invalid')
      throw new S3Error('InvalidArgument', `Invalid state key: ${r.reason}`);
    return { kind: r.kind, addr: r.ref };
  }

  async getObject(
    principal: Principal,
    key: string,
    req: Request,
    headOnly: boolean,
  ): Promise<S3Reply> {
    const { kind, addr } = this.resolve(key);
    if (kind === 'lock') {
      const lock = await this.locks.holder(addr, principal);
      const body = Buffer.from(lock.infoJson, 'utf8');
      return {
        status: 200,
        headers: {
          'Content-Type': 'application/json',
          'Content-Length': String(body.length),
          ETag: quoted(createHash('md5').update(body).digest('hex')),
          'Last-Modified': httpDate(new Date(lock.createdAt)),
        },
        body: headOnly ? undefined : body,
      };
    }
    if (headOnly) {
      const v = await this.reader.describeForRead(principal, addr);
      return (
        conditional(req, v.md5) ?? {
          status: 200,
          headers: this.stateHeaders(v.md5, v.size, v.createdAt),
        }
      );
    }
    const rangeHeader = headerValue(req.headers['range']);
    const opened = await this.reader.openForRead(principal, addr, (size) =>
      parseRange(rangeHeader, size),
    );
    const v = opened.version;
    const refused = conditional(req, v.md5);
    if (refused) {
      opened.body.destroy();
      return refused;
    }
    const headers = this.stateHeaders(v.md5, v.size, v.createdAt);
    if (opened.range) {
      headers['Content-Length'] = String(opened.range.end - opened.range.start + 1);
      headers['Content-Range'] = `bytes ${opened.range.start}-${opened.range.end}/${v.size}`;
      return { status: 206, headers, body: opened.body };
    }
    return { status: 200, headers, body: opened.body };
  }

  private stateHeaders(md5: string, size: number, createdAt: string): Record<string, string> {
    return {
      'Content-Type': 'application/json',
      'Content-Length': String(size),
      ETag: quoted(md5),
      'Last-Modified': httpDate(new Date(createdAt)),
      'Accept-Ranges': 'bytes',
    };
  }

  async putObject(
    principal: Principal,
    key: string,
    req: Request,
    signing: SigningContext,
    guard?: ReplayGuard,
  ): Promise<S3Reply> {
    if (headerValue(req.headers['x-amz-copy-source']) !== undefined) {
      throw new S3Error(
        'NotImplemented',
        'CopyObject (PutObject with x-amz-copy-source) is not supported by this server: a state is written whole, with its own bytes, and keeps no metadata of its own to change. rclone copies an object onto itself to set its modification time: run it with --update --use-server-modtime (or --checksum)',
      );
    }
    const { kind, addr } = this.resolve(key);
    const body = this.body(req, signing, false);
    if (kind === 'lock') {
      // Terraform sends If-None-Match: * — a lock is only ever created, never overwritten, and
      // the locks module's insert-if-absent is what decides (412 when someone holds it).
      const info = await readAllLimited(body.stream, MAX_LOCK_INFO_BYTES, 'the lock object');
      await this.locks.acquire(addr, principal, info, {
        generateId: false,
        door: 's3',
        inTransaction: guard?.claim,
      });
      return {
        status: 200,
        headers: { ETag: quoted(createHash('md5').update(info).digest('hex')), ...sse(req) },
      };
    }
    const ifNoneMatch = headerValue(req.headers['if-none-match']);
    const ifMatch = headerValue(req.headers['if-match']);
    const result = await this.writer.write({
      ...addr,
      principal,
      door: 's3',
      body: body.stream,
      contentLength: body.declaredLength,
      inTransaction: guard?.claim,
      // Conditional writes, decided inside the write's transaction (no check-then-write).
      precondition: (current) => {
        if (ifNoneMatch?.trim() === '*' && current !== null) {
          throw new DomainError(
            'precondition_failed',
            'At least one of the pre-conditions you specified did not hold (the object exists)',
          );
        }
        if (ifMatch !== undefined && !etagMatches(ifMatch, current?.md5)) {
          throw new DomainError(
            'precondition_failed',
            'At least one of the pre-conditions you specified did not hold (If-Match)',
          );
        }
      },
    });
    return { status: 200, headers: { ETag: quoted(result.version.md5), ...sse(req) } };
  }

  async deleteObject(
    principal: Principal,
    key: string,
    req: Request,
    guard?: ReplayGuard,
  ): Promise<S3Reply> {
    const { kind, addr } = this.resolve(key);
    const ifMatch = headerValue(req.headers['if-match']);
    if (kind === 'lock') {
      // Terraform compares the lock's ID itself, then deletes unconditionally; a client that
      // sends If-Match gets the check done here, in the release's transaction.
      await this.locks.unlockAsPrincipal(addr, principal, 's3', {
        inTransaction: guard?.claim,
        precondition:
          ifMatch === undefined
            ? undefined
            : (holder) => {
                const etag = holder
                  ? createHash('md5').update(holder.infoJson, 'utf8').digest('hex')
                  : undefined;
                if (!etagMatches(ifMatch, etag)) throw ifMatchFailed();
              },
      });
      return { status: 204 };
    }
    try {
      await this.writer.deleteState(principal, addr, 's3', undefined, {
        inTransaction: guard?.claim,
        precondition:
          ifMatch === undefined
            ? undefined
            : (current) => {
                if (!etagMatches(ifMatch, current?.md5)) throw ifMatchFailed();
              },
      });
    } catch (e) {
      // Deleting what is not there is a success in S3.
      if (!(
        e instanceof DomainError &&
        (e.code === 'state_not_found' || e.code === 'unit_not_found')
      ))
        throw e;
    }
    return { status: 204 };
  }

  // ------------------------------------------------------------------ multipart

  async createMultipart(
    principal: Principal,
    bucket: string,
    key: string,
    req: Request,
    guard?: ReplayGuard,
  ): Promise<S3Reply> {
    const { kind, addr } = this.resolve(key);
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
      sse(req),
    );
  }

  private async upload(principal: Principal, key: string, uploadId: string | undefined) {
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
    const upload = await this.upload(principal, key, q.get('uploadId'));
    const partRaw = q.get('partNumber') ?? '';
    const partNumber = Number(partRaw);
    if (!/^\d+$/.test(partRaw) || partNumber < 1 || partNumber > MAX_PARTS) {
      throw new S3Error(
        'InvalidArgument',
        'Part number must be an integer between 1 and 10000, inclusive',
      );
    }
    const body = this.body(req, signing, true);
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
    return { status: 200, headers: { ETag: quoted(md5), ...sse(req) } };
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
    const upload = await this.upload(principal, key, q.get('uploadId'));
    const requested = parseCompleteMultipartXml(
      await readAllLimited(
        this.body(req, signing, false).stream,
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
      sse(req),
    );
  }

  async abortMultipart(
    principal: Principal,
    key: string,
    q: Map<string, string>,
    guard?: ReplayGuard,
  ): Promise<S3Reply> {
    const upload = await this.upload(principal, key, q.get('uploadId'));
    await this.deleteBlobs((await this.uploads.remove(upload.upload_id, guard?.claim)) ?? []);
    return { status: 204 };
  }

  async listParts(
    principal: Principal,
    bucket: string,
    key: string,
    q: Map<string, string>,
  ): Promise<S3Reply> {
    const upload = await this.upload(principal, key, q.get('uploadId'));
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

  // ------------------------------------------------------------------ helpers

  /** The request body, decoded (aws-chunked) and checked (payload hash, checksums, Content-MD5). */
  private body(req: Request, signing: SigningContext, md5: boolean) {
    const plan = planRequestBody(headersOf(req), signing);
    if (!plan.ok) throw plan.error;
    const { transforms, verifier } = bodyTransforms({
      ...plan.value,
      integrity: { ...plan.value.integrity, md5 },
    });
    const decodedLength =
      headerValue(req.headers['x-amz-decoded-content-length']) ??
      headerValue(req.headers['content-length']);
    return {
      stream: decodedBody(req, transforms),
      verifier,
      declaredLength:
        decodedLength !== undefined && /^\d+$/.test(decodedLength)
          ? Number(decodedLength)
          : undefined,
    };
  }

  private deleteBlobs(keys: string[]): Promise<void> {
    return deleteBlobs(this.blobs, keys, this.logger, 'could not delete a multipart part');
  }
}

function xml(status: number, body: string, headers: Record<string, string> = {}): S3Reply {
  return {
    status,
    headers: { 'Content-Type': 'application/xml', ...headers },
    body: XML_HEADER + body,
  };
}

/** Echoes a requested server-side encryption: at rest, encryption is the storage's business. */
function sse(req: Request): Record<string, string> {
  const v = headerValue(req.headers['x-amz-server-side-encryption']);
  return v ? { 'x-amz-server-side-encryption': v } : {};
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

function ifMatchFailed(): S3Error {
  return new S3Error(
    'PreconditionFailed',
    'At least one of the pre-conditions you specified did not hold (If-Match)',
  );
}

/** Whether an If-Match / If-None-Match list names this ETag (or `*` and the object exists). */
function etagMatches(list: string, md5: string | undefined): boolean {
  if (md5 === undefined) return false;
  return list.split(',').some((t) => {
    const tag = t.trim().replace(/^W\//, '');
    return tag === '*' || tag.replace(/^"|"$/g, '').toLowerCase() === md5;
  });
}

/** S3's conditional GET/HEAD: 412 when If-Match fails, 304 when If-None-Match matches. */
function conditional(req: Request, md5: string): S3Reply | undefined {
  const ifMatch = headerValue(req.headers['if-match']);
  if (ifMatch !== undefined && !etagMatches(ifMatch, md5)) {
    throw new S3Error(
      'PreconditionFailed',
      'At least one of the pre-conditions you specified did not hold',
    );
  }
  const ifNoneMatch = headerValue(req.headers['if-none-match']);
  if (ifNoneMatch !== undefined && etagMatches(ifNoneMatch, md5)) {
    return { status: 304, headers: { ETag: quoted(md5) } };
  }
  return undefined;
}
