import { Injectable } from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import type { LeanRoute } from '../common/lean-route';
import { S3AuthService } from './s3-auth.service';
import { answerS3Error } from './s3-exception.filter';
import { S3ObjectsService } from './s3-objects.service';
import { s3Operation } from './s3-operation';
import { sendS3Reply } from './s3-replies';
import { parseTarget, s3BaseOf } from './s3-request';
import { hasNoBody, isPlainObjectRequest, S3Message, urlOf } from './s3-lean-request';

/**
 * GetObject and HeadObject of the S3 door — what `terraform plan` asks of `backend "s3"` — served
 * below Express (`LeanRoute`). The steps are the controller's for these two operations, in its
 * order, with its services: the path-style check, SigV4 and the session token, the bucket, then
 * `S3ObjectsService.getObject` (RBAC, the read, its audit event); errors are the door's filter's
 * answers. It takes only a request the controller would dispatch to those two operations: a
 * decodable `/<bucket>/<key>` path, no query parameter but the presigning ones, no body.
 */
@Injectable()
export class S3ReadRoute implements LeanRoute {
  readonly door = 's3' as const;

  constructor(
    private readonly auth: S3AuthService,
    private readonly s3: S3ObjectsService,
  ) {}

  accepts(req: S3Message): boolean {
    return (
      (req.method === 'GET' || req.method === 'HEAD') && hasNoBody(req) && isPlainObjectRequest(req)
    );
  }

  operation(req: S3Message): string {
    return s3Operation(req.method ?? '', urlOf(req));
  }

  async serve(req: S3Message, res: ServerResponse): Promise<void> {
    const headOnly = req.method === 'HEAD';
    try {
      const target = parseTarget(urlOf(req), s3BaseOf(req));
      this.s3.assertPathStyle(req.headers.host);
      const { principal } = await this.auth.authenticate(req, target);
      // `accepts` saw a bucket and a key.
      this.s3.assertBucket(target.bucket as string);
      const reply = await this.s3.getObject(principal, target.key as string, req, headOnly);
      await sendS3Reply(res, reply, headOnly);
    } catch (e) {
      answerS3Error(e, req, res);
    }
  }
}
