import { All, Controller, Req, Res, UseFilters } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import { RawBody } from '../common/body-parsing';
import type { Request, Response } from 'express';
import { SelfAuthenticated } from '../common/route-auth';
import { ThroughDoor } from '../common/request-context';
import { S3AuthService, S3Caller } from './s3-auth.service';
import { ReplayGuard, ReplayGuardService } from './replay-guard.service';
import { S3Error } from './s3-errors';
import { S3ExceptionFilter } from './s3-exception.filter';
import { parseTarget, s3BaseOf, S3Target, UNSUPPORTED_SUB_RESOURCES } from './s3-request';
import { S3MultipartService } from './s3-multipart.service';
import { S3ObjectsService } from './s3-objects.service';
import { S3Reply, sendS3Reply } from './s3-replies';

/**
 * The S3-compatible door at `/s3/{bucket}/{key…}` (path-style), for Terraform's `backend "s3"`,
 * the AWS CLI and SDKs — and, with STATEHOUSE_S3_PORT, at `/{bucket}/{key…}` on a listener of
 * its own (s3-listener.ts). Every request is authenticated here (SigV4 + session token, over the
 * path as received) before anything else is looked at. Documented in the README (not in the
 * OpenAPI spec).
 */
@ApiExcludeController()
@ThroughDoor('s3')
@SelfAuthenticated()
@RawBody()
@UseFilters(S3ExceptionFilter)
@Controller()
export class S3Controller {
  constructor(
    private readonly auth: S3AuthService,
    private readonly s3: S3ObjectsService,
    private readonly multipart: S3MultipartService,
    private readonly replay: ReplayGuardService,
  ) {}

  @All(['s3', 's3/*path'])
  async handle(@Req() req: Request, @Res() res: Response): Promise<void> {
    const target = parseTarget(req.originalUrl, s3BaseOf(req));
    this.s3.assertPathStyle(req.headers.host);
    const caller = await this.auth.authenticate(req, target);
    // Every signed write is accepted once (see ReplayGuardService).
    const reply = await this.replay.guarded(caller.principal, req.method, caller.signing, (guard) =>
      this.dispatch(caller, target, req, guard),
    );
    await sendS3Reply(res, reply, req.method === 'HEAD');
  }

  private async dispatch(
    { principal, signing }: S3Caller,
    t: S3Target,
    req: Request,
    guard: ReplayGuard | undefined,
  ): Promise<S3Reply> {
    const method = req.method.toUpperCase();
    const q = t.query;
    if (t.bucket === undefined) {
      if (method === 'GET') return this.s3.listBuckets(principal);
      throw notImplemented(method, 'the service');
    }
    // CreateBucket: a PUT on the bucket itself, no sub-resource (?versioning, ?acl …) named.
    if (t.key === undefined && method === 'PUT' && [...q.keys()].every((k) => k === 'x-id')) {
      return this.s3.createBucket(t.bucket, req, signing);
    }
    this.s3.assertBucket(t.bucket);
    if (t.key === undefined) {
      switch (method) {
        case 'HEAD':
          return { status: 200, headers: { 'x-amz-bucket-region': 'us-east-1' } };
        case 'GET':
          if (q.has('location')) return this.s3.bucketLocation();
          if (q.has('versioning')) return this.s3.bucketVersioning();
          if (q.has('uploads')) throw notImplemented(method, 'ListMultipartUploads');
          if (hasSubResource(q)) throw notImplemented(method, 'this bucket sub-resource');
          if (!q.has('list-type')) return this.s3.listObjects(principal, t.bucket, q);
          if (q.get('list-type') === '2') return this.s3.listObjectsV2(principal, t.bucket, q);
          throw new S3Error(
            'InvalidArgument',
            'list-type must be 2 (ListObjectsV2), or absent (ListObjects)',
          );
        default:
          throw notImplemented(method, 'the bucket');
      }
    }
    const key = t.key;
    switch (method) {
      case 'GET':
        if (q.has('uploadId')) return this.multipart.listParts(principal, t.bucket, key, q);
        rejectUnsupported(q, method);
        return this.s3.getObject(principal, key, req, false);
      case 'HEAD':
        rejectUnsupported(q, method);
        return this.s3.getObject(principal, key, req, true);
      case 'PUT':
        if (q.has('uploadId'))
          return this.multipart.uploadPart(principal, key, q, req, signing, guard);
        rejectUnsupported(q, method);
        return this.s3.putObject(principal, key, req, signing, guard);
      case 'POST':
        if (q.has('uploads'))
          return this.multipart.createMultipart(principal, t.bucket, key, req, guard);
        if (q.has('uploadId'))
          return this.multipart.completeMultipart(principal, t.bucket, key, q, req, signing, guard);
        throw notImplemented(method, 'this object operation');
      case 'DELETE':
        if (q.has('uploadId')) return this.multipart.abortMultipart(principal, key, q, guard);
        rejectUnsupported(q, method);
        return this.s3.deleteObject(principal, key, req, guard);
      default:
        throw new S3Error(
          'MethodNotAllowed',
          `The method ${method} is not allowed against this resource`,
        );
    }
  }
}

function hasSubResource(q: Map<string, string>): boolean {
  return [...q.keys()].some((k) => UNSUPPORTED_SUB_RESOURCES.includes(k));
}

function rejectUnsupported(q: Map<string, string>, method: string): void {
  const sub = [...q.keys()].find((k) => UNSUPPORTED_SUB_RESOURCES.includes(k));
  if (sub) throw notImplemented(method, `the ?${sub} sub-resource`);
}

function notImplemented(method: string, what: string): S3Error {
  return new S3Error('NotImplemented', `${method} on ${what} is not implemented by this server`);
}
