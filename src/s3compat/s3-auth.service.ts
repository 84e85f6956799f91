import { Injectable } from '@nestjs/common';
import type { IncomingMessage } from 'node:http';
import { AuditService } from '../audit/audit.service';
import type { Principal } from '../common/principal';
import { StsService } from '../auth/sts/sts.service';
import { TokenRejected } from '../auth/tokens/jwt';
import { S3Error } from './s3-errors';
import { describeS3Request } from './s3-headers';
import type { S3Target } from './s3-request';
import {
  parseAccessKeyFromRequest,
  parseSigV4,
  SigningContext,
  SigV4Request,
  verifySigV4,
} from './sigv4';

export interface S3Caller {
  principal: Principal;
  signing: SigningContext;
}

/**
 * Authenticates a request of the S3 door: SigV4 (header or presigned) with the secret derived
 * from the access key id, then the session token — a JWT with audience `s3` only whose `sid`
 * is the session id inside that access key id. Its subject is the principal.
 */
@Injectable()
export class S3AuthService {
  constructor(
    private readonly sts: StsService,
    private readonly audit: AuditService,
  ) {}

  async authenticate(req: IncomingMessage, target: S3Target): Promise<S3Caller> {
    try {
      return await this.verify(req, target);
    } catch (e) {
      if (e instanceof S3Error) {
        // The message names the failed check; it never contains a signature or token.
        this.audit.record({
          type: 'auth.failed',
          actor: 'anonymous',
          outcome: 'denied',
          door: 's3',
          details: { code: e.code, reason: e.message },
        });
      }
      throw e;
    }
  }

  private async verify(req: IncomingMessage, target: S3Target): Promise<S3Caller> {
    const request: SigV4Request = {
      method: req.method ?? '',
      rawPath: target.rawPath,
      rawQuery: target.rawQuery,
      headers: describeS3Request(req).lines,
    };
    if (req.headers.authorization === undefined && !target.query.has('X-Amz-Credential')) {
      throw new S3Error(
        'AccessDenied',
        'Anonymous access is not allowed: sign requests with credentials from `statehouse creds --json`',
      );
    }
    const accessKey = parseAccessKeyFromRequest(request);
    if (!accessKey.ok) throw accessKey.error;
    const secret = await this.sts.secretFor(accessKey.value);
    if (secret === undefined) {
      throw new S3Error(
        'InvalidAccessKeyId',
        'The access key id is not one this server issued (get credentials with `statehouse creds --json`)',
      );
    }
    const parsed = parseSigV4(request);
    if (!parsed.ok) throw parsed.error;
    const verified = verifySigV4(parsed.value, secret, Date.now());
    if (!verified.ok) throw verified.error;
    const token = parsed.value.sessionToken;
    if (token === undefined || token === '') {
      throw new S3Error(
        'AccessDenied',
        'Statehouse credentials need their session token (X-Amz-Security-Token)',
      );
    }
    try {
      const { principal } = await this.sts.principalFor(accessKey.value, token);
      return { principal, signing: verified.value };
    } catch (e) {
      if (e instanceof TokenRejected) {
        if (e.reason === 'expired')
          throw new S3Error('ExpiredToken', 'The provided token has expired.');
        throw new S3Error(
          'AccessDenied',
          `The session token was refused: ${e.message} (${e.reason})`,
        );
      }
      throw e;
    }
  }
}
