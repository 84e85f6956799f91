import { Injectable, Logger, BeforeApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { AuditService } from '../audit/audit.service';
import type { Principal } from '../common/principal';
import type { StatementStep, TransactionStep } from '../database/sql';
import { DomainError } from '../common/errors';
import { S3_ERRORS, S3Error, s3CodeOf } from './s3-errors';
import type { SigningContext } from './sigv4';
import { UsedSignatureRepository } from './used-signature.repository';

/** Methods whose signed requests are accepted once (the writes). */
const GUARDED_METHODS = new Set(['PUT', 'POST', 'DELETE']);
const SWEEP_EVERY_MS = 10 * 60_000;
/** Records are kept this much past their expiry: replicas' clocks may differ a little. */
const SWEEP_MARGIN_MS = 5 * 60_000;

/** The refusal of a signed write that was already accepted once. */
export class ReplayedRequestError extends S3Error {
  constructor() {
    super(
      'AccessDenied',
      'This signed request was already accepted once and cannot be sent again: sign a new request (AWS SDKs sign each retry anew)',
    );
  }
}

/**
 * One request's replay guard. `claim` runs inside the operation's own transaction: the
 * signature is recorded only if the operation commits, so a request that failed (the database
 * was unreachable, say) can still be sent again as it is.
 */
export interface ReplayGuard {
  claim: TransactionStep;
  /** `claim` inside an operation done by one statement: refused the same way. */
  inStatement: StatementStep;
  /**
   * After the operation refused the request (a 4xx): records the signature on its own, so a
   * refused request cannot be replayed later, when the refusal might no longer hold (a lock PUT
   * refused with 412 would otherwise take the lock once it is free).
   */
  claimAfterRefusal(): Promise<void>;
}

/**
 * Replay protection of the S3 door: every signed PUT, POST or DELETE is accepted once. A SigV4
 * signature stays valid for 15 minutes (a presigned URL until it expires), and nothing in it
 * says "once": a captured `DeleteObject` of a `.tflock` replayed after the next run took the
 * lock would release that newer lock. So the SHA-256 of each accepted write's signature is
 * recorded until the request could no longer verify, and the primary key in the database —
 * shared by every replica — refuses a second use. SDK retries sign again (the time and the
 * `amz-sdk-request` attempt header change), so honest retries carry new signatures.
 */
@Injectable()
export class ReplayGuardService implements OnModuleInit, BeforeApplicationShutdown {
  private readonly logger = new Logger('s3');
  private sweeper?: NodeJS.Timeout;

  constructor(
    private readonly signatures: UsedSignatureRepository,
    private readonly audit: AuditService,
  ) {}

  onModuleInit(): void {
    this.sweeper = setInterval(() => void this.sweep(), SWEEP_EVERY_MS);
    this.sweeper.unref();
  }

  beforeApplicationShutdown(): void {
    clearInterval(this.sweeper);
  }

  /** The guard of a verified request; undefined for reads (GET, HEAD), which change nothing. */
  guardFor(principal: Principal, method: string, signing: SigningContext): ReplayGuard | undefined {
    if (!GUARDED_METHODS.has(method.toUpperCase())) return undefined;
    const key = createHash('sha256').update(signing.seedSignature).digest('hex');
    const expiresAt = new Date(signing.validUntil);
    const refuse = (): never => {
      this.audit.record({
        type: 'auth.failed',
        actor: principal.subject,
        outcome: 'denied',
        door: 's3',
        details: { code: 'AccessDenied', reason: 'a signed request was sent again (replay)' },
      });
      throw new ReplayedRequestError();
    };
    return {
      claim: async (m) => {
        if (!(await this.signatures.claim(m, key, expiresAt))) refuse();
      },
      inStatement: {
        insert: (params, when) => this.signatures.claimFragment(params, key, expiresAt, when),
        failed: (e) => {
          if (this.signatures.isUsedBefore(e)) refuse();
          throw e;
        },
      },
      claimAfterRefusal: async () => {
        try {
          await this.signatures.claimAlone(key, expiresAt);
        } catch (e) {
          this.logger.warn({ err: e }, 'could not record a refused request’s signature');
        }
      },
    };
  }

  /**
   * Runs a verified request's operation under its replay guard (none for reads): the operation
   * gets the guard to claim the signature in its own transaction; when it refuses the request
   * (a 4xx), the signature is recorded anyway (`claimAfterRefusal`). The controller and the
   * write routes below Express (`S3WriteRoute`) both go through here.
   */
  async guarded<T>(
    principal: Principal,
    method: string,
    signing: SigningContext,
    operation: (guard: ReplayGuard | undefined) => Promise<T>,
  ): Promise<T> {
    const guard = this.guardFor(principal, method, signing);
    try {
      return await operation(guard);
    } catch (e) {
      if (guard && isRefusal(e)) await guard.claimAfterRefusal();
      throw e;
    }
  }

  async sweep(now = Date.now()): Promise<number> {
    try {
      return await this.signatures.sweep(new Date(now - SWEEP_MARGIN_MS));
    } catch (e) {
      this.logger.warn({ err: e }, 'could not sweep expired S3 request signatures');
      return 0;
    }
  }
}

/**
 * Whether an operation refused the request (a 4xx: a precondition, a conflict, a bad body) —
 * after which its signature is recorded anyway — rather than failing (a 5xx: it may be sent
 * again as it is) or being refused as a replay (recorded already).
 */
function isRefusal(e: unknown): boolean {
  if (e instanceof ReplayedRequestError) return false;
  const status =
    e instanceof S3Error
      ? e.status
      : e instanceof DomainError
        ? S3_ERRORS[s3CodeOf(e.code)]
        : undefined;
  return status !== undefined && status >= 400 && status < 500;
}
