import { CanActivate, ExecutionContext, Inject, Injectable } from '@nestjs/common';
import type { Request } from 'express';
import { createHash, timingSafeEqual } from 'node:crypto';
import { AuditService } from '../audit/audit.service';
import { presentedSecret } from '../auth/auth.guard';
import { DomainError } from '../common/errors';
import { APP_CONFIG, AppConfig } from '../config/config';

function sha256(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

/**
 * `/metrics` is public unless STATEHOUSE_METRICS_TOKEN is set; then it answers only
 * `Authorization: Bearer <that token>` (compared in constant time, as digests of equal length).
 * A refusal is a 401 in the API's JSON and an `auth.failed` security event, like any other.
 */
@Injectable()
export class MetricsTokenGuard implements CanActivate {
  private readonly expected: Buffer | undefined;

  constructor(
    @Inject(APP_CONFIG) config: AppConfig,
    private readonly audit: AuditService,
  ) {
    this.expected = config.metricsToken && sha256(config.metricsToken.reveal());
  }

  canActivate(context: ExecutionContext): boolean {
    if (!this.expected) return true;
    const req = context.switchToHttp().getRequest<Request>();
    const presented = presentedSecret(req.headers.authorization, false);
    if (presented === undefined) {
      this.refuse(
        'authentication required: send Authorization: Bearer <the metrics token> (STATEHOUSE_METRICS_TOKEN)',
      );
    }
    if (!timingSafeEqual(sha256(presented), this.expected)) {
      this.refuse('the metrics token is not valid');
    }
    return true;
  }

  private refuse(reason: string): never {
    this.audit.record({
      type: 'auth.failed',
      actor: 'anonymous',
      outcome: 'denied',
      details: { endpoint: 'metrics', reason },
    });
    throw new DomainError('unauthenticated', reason);
  }
}
