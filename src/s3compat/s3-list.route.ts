import { Injectable } from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import type { LeanRoute } from '../common/lean-route';
import { S3AuthService } from './s3-auth.service';
import { answerS3Error } from './s3-exception.filter';
import { hasNoBody, isPlainListingRequest, S3Message, urlOf } from './s3-lean-request';
import { S3ObjectsService } from './s3-objects.service';
import { S3Reply, sendS3Reply } from './s3-replies';
import { parseTarget, s3BaseOf } from './s3-request';

/**
 * ListObjectsV2 of the S3 door — the listing of the workspaces that every `terraform plan` of
 * `backend "s3"` asks for — served below Express (`LeanRoute`). The steps are the controller's
 * for this operation, in its order, with its services: the path-style check, SigV4 and the
 * session token, the bucket, then `S3ObjectsService.listObjectsV2` (RBAC: the states the caller
 * may read); a GET has no replay guard. Errors are the door's filter's answers. It takes only a
 * request the controller would dispatch there: `isPlainListingRequest`, and no body.
 */
@Injectable()
export class S3ListRoute implements LeanRoute {
  readonly door = 's3' as const;

  constructor(
    private readonly auth: S3AuthService,
    private readonly s3: S3ObjectsService,
  ) {}

  accepts(req: S3Message): boolean {
    return req.method === 'GET' && hasNoBody(req) && isPlainListingRequest(req);
  }

  /** `accepts` takes nothing else (`s3Operation` names it so too). */
  operation(): string {
    return 'ListObjectsV2';
  }

  async serve(req: S3Message, res: ServerResponse): Promise<void> {
    try {
      await sendS3Reply(res, await this.list(req), false);
    } catch (e) {
      answerS3Error(e, req, res);
    }
  }

  private async list(req: S3Message): Promise<S3Reply> {
    const target = parseTarget(urlOf(req), s3BaseOf(req));
    this.s3.assertPathStyle(req.headers.host);
    const { principal } = await this.auth.authenticate(req, target);
    // `accepts` saw a bucket.
    const bucket = target.bucket as string;
    this.s3.assertBucket(bucket);
    return this.s3.listObjectsV2(principal, bucket, target.query);
  }
}
