import { CanActivate, ExecutionContext, Inject, Injectable, Optional } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { Request } from 'express';
import { AuditService } from '../audit/audit.service';
import { APP_CONFIG, AppConfig } from '../config/config';
import { DomainError } from '../common/errors';
import { Door, DOOR_KEY, setRequestDoor } from '../common/request-context';
import { MetricsService } from '../metrics/metrics.service';
import { ALLOW_BASIC_AUTH, IS_PUBLIC, SELF_AUTHENTICATED } from '../common/route-auth';
import { CREDENTIAL_VERIFIERS, CredentialVerifier, secretDigest } from './credential-verifier';
import { ANONYMOUS_ADMIN, Principal, PRINCIPAL_KEY } from '../common/principal';

/** The bearer secret of a request: `Bearer <token>`, or where allowed the basic-auth password. */
export function presentedSecret(
  header: string | undefined,
  allowBasic: boolean,
): string | undefined {
  if (!header) return undefined;
  const space = header.indexOf(' ');
  if (space < 0) return undefined;
  const scheme = header.slice(0, space).toLowerCase();
  const value = header.slice(space + 1).trim();
  if (scheme === 'bearer') return value === '' ? undefined : value;
  if (scheme === 'basic' && allowBasic) {
    const decoded = Buffer.from(value, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    // Terraform only sends basic auth when a username is set; any non-empty one is accepted.
    if (colon <= 0) return undefined;
    const password = decoded.slice(colon + 1);
    return password === '' ? undefined : password;
  }
  return undefined;
}

/**
 * Who a request's `Authorization` header names, for the routes that are not self-authenticated:
 * the global guard's decision, and that of the routes served below the router (`LeanRoute`).
 * The verifiers are asked in turn; the first that recognises the secret decides. A refusal is
 * audited (never with the secret); a request that presents nothing is only counted.
 */
@Injectable()
export class RequestAuthenticator {
  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @Inject(CREDENTIAL_VERIFIERS) private readonly verifiers: CredentialVerifier[],
    private readonly audit: AuditService,
    @Optional() private readonly metrics?: MetricsService,
  ) {}

  async principalOf(
    authorization: string | undefined,
    door: Door,
    allowBasic: boolean,
  ): Promise<Principal> {
    if (this.config.authDisabled) {
      return { subject: ANONYMOUS_ADMIN, kind: 'bootstrap', via: 'auth-disabled' };
    }
    const secret = presentedSecret(authorization, allowBasic);
    if (secret === undefined) {
      // Not audited (nothing was presented), but counted.
      this.metrics?.credentialsMissing(door);
      throw new DomainError(
        'unauthenticated',
        allowBasic
          ? 'authentication required: send a token as Bearer, or as the basic-auth password with any user name'
          : 'authentication required: send Authorization: Bearer <token>',
      );
    }
    // The secret is hashed at most once, whichever verifiers look at its hash.
    const digest = secretDigest(secret);
    try {
      for (const verifier of this.verifiers) {
        const principal = await verifier.verify(secret, digest);
        if (principal) return principal;
      }
      throw new DomainError('unauthenticated', 'the token is not valid');
    } catch (e) {
      if (e instanceof DomainError && e.code === 'unauthenticated') {
        // The reason names the failed check; messages never contain the presented secret.
        this.audit.record({
          type: 'auth.failed',
          actor: 'anonymous',
          outcome: 'denied',
          details: { reason: e.message },
        });
      }
      throw e;
    }
  }
}

/** Deny by default: every route needs a principal unless it is marked `@Public()`. */
@Injectable()
export class AuthGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    private readonly authenticator: RequestAuthenticator,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const targets = [context.getHandler(), context.getClass()];
    // The route is known from here on: every audit event of the request names its door.
    const door = this.reflector.getAllAndOverride<Door>(DOOR_KEY, targets) ?? 'api';
    setRequestDoor(door);
    if (this.reflector.getAllAndOverride<boolean>(IS_PUBLIC, targets)) return true;
    if (this.reflector.getAllAndOverride<boolean>(SELF_AUTHENTICATED, targets)) return true;
    const req = context.switchToHttp().getRequest<Request & { [PRINCIPAL_KEY]?: Principal }>();
    const allowBasic =
      this.reflector.getAllAndOverride<boolean>(ALLOW_BASIC_AUTH, targets) ?? false;
    req[PRINCIPAL_KEY] = await this.authenticator.principalOf(
      req.headers.authorization,
      door,
      allowBasic,
    );
    return true;
  }
}
