import { Injectable } from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import type { LeanRoute } from '../common/lean-route';
import { ReplayGuardService } from './replay-guard.service';
import { S3AuthService } from './s3-auth.service';
import { answerS3Error } from './s3-exception.filter';
import { hasNoBody, isPlainObjectRequest, S3Message, urlOf } from './s3-lean-request';
import { S3ObjectsService } from './s3-objects.service';
import { s3Operation } from './s3-operation';
import { sendS3Reply } from './s3-replies';
import { parseTarget, s3BaseOf } from './s3-request';

/**
 * PutObject and DeleteObject of the S3 door — the `.tflock` object that every `terraform plan`
 * and `apply` of `backend "s3"` with `use_lockfile` creates and deletes, and the state an apply
 * writes — served below Express (`LeanRoute`). The steps are the controller's for these two
 * operations, in its order, with its services: the path-style check, SigV4 and the session
 * token, the replay guard (`ReplayGuardService.guarded`), the bucket, then
 * `S3ObjectsService.putObject` or `deleteObject` (RBAC, the body read, decoded and checked as it
 * streams — aws-chunked, x-amz-content-sha256, Content-MD5, x-amz-checksum-* — the lock or the
 * write, its audit event); errors are the door's filter's answers. It takes only a request the
 * controller would dispatch to those two operations: a decodable `/<bucket>/<key>` path, no
 * query parameter but the presigning ones (no `uploadId`, no sub-resource), and for a delete no
 * body.
 */
@Injectable()
export class S3WriteRoute implements LeanRoute {
  readonly door = 's3' as const;

  constructor(
    private readonly auth: S3AuthService,
    private readonly s3: S3ObjectsService,
    private readonly replay: ReplayGuardService,
  ) {}

  accepts(req: S3Message): boolean {
    if (req.method === 'PUT') return isPlainObjectRequest(req);
    return req.method === 'DELETE' && hasNoBody(req) && isPlainObjectRequest(req);
  }

  operation(req: S3Message): string {
    return s3Operation(req.method ?? '', urlOf(req));
  }

  async serve(req: S3Message, res: ServerResponse): Promise<void> {
    try {
      const target = parseTarget(urlOf(req), s3BaseOf(req));
      this.s3.assertPathStyle(req.headers.host);
      const { principal, signing } = await this.auth.authenticate(req, target);
      const method = req.method as string;
      const reply = await this.replay.guarded(principal, method, signing, (guard) => {
        // `accepts` saw a bucket and a key.
        this.s3.assertBucket(target.bucket as string);
        const key = target.key as string;
        return method === 'PUT'
          ? this.s3.putObject(principal, key, req, signing, guard)
          : this.s3.deleteObject(principal, key, req, guard);
      });
      await sendS3Reply(res, reply, false);
    } catch (e) {
      answerS3Error(e, req, res);
    }
  }
}
