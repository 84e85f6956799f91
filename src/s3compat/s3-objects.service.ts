import { Inject, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import type { Request } from 'express';
import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { DomainError } from '../common/errors';
import type { Principal } from '../common/principal';
import { objectKey } from '../common/s3-keys';
import { APP_CONFIG, AppConfig } from '../config/config';
import { MAX_LOCK_INFO_BYTES } from '../state/locks/lock-info';
import { LocksService } from '../state/locks/locks.service';
import { StateReader } from '../state/state-reader';
import { StateWriter } from '../state/state-writer';
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
import { resolveObject } from './object-key';
import type { ReplayGuard } from './replay-guard.service';
import { openRequestBody, openStateBody } from './request-body';
import { S3Error } from './s3-errors';
import { describeS3Request, S3RequestHead } from './s3-headers';
import { quoted, S3Reply, sse, xml } from './s3-replies';
import { httpDate, isoDate, parseRange, readAllLimited, virtualHostedBucket } from './s3-request';
import { el, S3_NS } from './s3-xml';
import type { SigningContext } from './sigv4';

const MAX_BUCKET_CONFIGURATION_BYTES = 64 * 1024;

/**
 * The S3 door's buckets and objects — ListBuckets, CreateBucket, the bucket queries, listings,
 * and GetObject / HeadObject / PutObject / DeleteObject on states and their lock objects —
 * translated onto the state and lock services: the door adds no rule of its own beyond S3's
 * wire format and the key mapping. Multipart uploads are `S3MultipartService`'s.
 */
@Injectable()
export class S3ObjectsService implements OnApplicationBootstrap {
  private readonly logger = new Logger('s3');
  /** The host names of this server's base URLs (to recognise virtual-hosted-style requests). */
  private readonly selfHosts: string[];

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly reader: StateReader,
    private readonly writer: StateWriter,
    private readonly locks: LocksService,
    private readonly buckets: BucketRepository,
  ) {
    this.selfHosts = [config.publicUrl, ...config.aliases].map((u) =>
      new URL(u).hostname.toLowerCase(),
    );
  }

  /** The configured buckets are served from now on: their creation time, if not recorded yet. */
  async onApplicationBootstrap(): Promise<void> {
    try {
      await this.buckets.recordServed(this.config.s3Door.buckets);
    } catch (e) {
      this.logger.warn({ err: e }, 'could not record when the S3 buckets were first served');
    }
  }

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
      openRequestBody(req, signing, false).stream,
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

  async getObject(
    principal: Principal,
    key: string,
    req: IncomingMessage,
    headOnly: boolean,
  ): Promise<S3Reply> {
    const { kind, addr } = resolveObject(key, this.config.s3Door.workspacePrefixes);
    if (kind === 'lock') {
      const lock = await this.locks.holder(principal, addr);
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
        conditional(describeS3Request(req), v.md5) ?? {
          status: 200,
          headers: this.stateHeaders(v.md5, v.size, v.createdAt),
        }
      );
    }
    const rangeHeader = describeS3Request(req).range;
    const opened = await this.reader.openForRead(principal, addr, (size) =>
      parseRange(rangeHeader, size),
    );
    const v = opened.version;
    const refused = conditional(describeS3Request(req), v.md5);
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
    req: IncomingMessage,
    signing: SigningContext,
    guard?: ReplayGuard,
  ): Promise<S3Reply> {
    const head = describeS3Request(req);
    if (head.copySource !== undefined) {
      throw new S3Error(
        'NotImplemented',
        'CopyObject (PutObject with x-amz-copy-source) is not supported by this server: a state is written whole, with its own bytes, and keeps no metadata of its own to change. rclone copies an object onto itself to set its modification time: run it with --update --use-server-modtime (or --checksum)',
      );
    }
    const { kind, addr } = resolveObject(key, this.config.s3Door.workspacePrefixes);
    if (kind === 'lock') {
      const body = openRequestBody(req, signing, false);
      // Terraform sends If-None-Match: * — a lock is only ever created, never overwritten, and
      // the locks module's insert-if-absent is what decides (412 when someone holds it).
      const info = await readAllLimited(body.stream, MAX_LOCK_INFO_BYTES, 'the lock object');
      await this.locks.acquire(principal, addr, info, {
        generateId: false,
        door: 's3',
        inTransaction: guard?.claim,
        inStatement: guard?.inStatement,
      });
      return {
        status: 200,
        headers: { ETag: quoted(createHash('md5').update(info).digest('hex')), ...sse(head) },
      };
    }
    const { ifNoneMatch, ifMatch } = head;
    // Hashed once, by the writer as it stores the bytes (SHA-256 and MD5).
    const body = openStateBody(req, signing);
    const result = await this.writer.write({
      ...addr,
      principal,
      door: 's3',
      body: body.stream,
      contentLength: body.declaredLength,
      verify: body.verify,
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
    return { status: 200, headers: { ETag: quoted(result.version.md5), ...sse(head) } };
  }

  async deleteObject(
    principal: Principal,
    key: string,
    req: IncomingMessage,
    guard?: ReplayGuard,
  ): Promise<S3Reply> {
    const { kind, addr } = resolveObject(key, this.config.s3Door.workspacePrefixes);
    const { ifMatch } = describeS3Request(req);
    if (kind === 'lock') {
      // Terraform compares the lock's ID itself, then deletes unconditionally; a client that
      // sends If-Match gets the check done here, in the release's transaction.
      await this.locks.unlockAsPrincipal(principal, addr, 's3', {
        inTransaction: guard?.claim,
        inStatement: guard?.inStatement,
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
function conditional(head: S3RequestHead, md5: string): S3Reply | undefined {
  const { ifMatch, ifNoneMatch } = head;
  if (ifMatch !== undefined && !etagMatches(ifMatch, md5)) {
    throw new S3Error(
      'PreconditionFailed',
      'At least one of the pre-conditions you specified did not hold',
    );
  }
  if (ifNoneMatch !== undefined && etagMatches(ifNoneMatch, md5)) {
    return { status: 304, headers: { ETag: quoted(md5) } };
  }
  return undefined;
}
