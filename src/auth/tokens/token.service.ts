import { Inject, Injectable, Logger } from '@nestjs/common';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { EntityManager } from 'typeorm';
import { AuditService } from '../../audit/audit.service';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { DomainError } from '../../common/errors';
import { CredentialVerifier } from '../credential-verifier';
import { IdentityRepository } from '../identity.repository';
import { BOOTSTRAP_ADMIN, CredentialParent, Principal } from '../../common/principal';
import { derivedExpiry, epochSeconds, formatParent } from '../revocation/credential-parent';
import { CredentialRevocations } from '../revocation/credential-revocations.service';
import { SigningKeys } from './signing-keys.service';
import { TokenRejected, verifyStatehouseJwt } from './jwt';

export const REFRESH_TOKEN_PREFIX = 'shr_';

/** Who a token speaks for. */
export interface Identity {
  subject: string;
  email?: string;
  groups?: string[];
}

/** OAuth 2.0 token response field names. */
export interface TokenResponse {
  access_token: string;
  refresh_token: string;
  token_type: 'Bearer';
  expires_in: number;
}

export function sha256Hex(value: string): string {
  return createHash('sha256').update(value, 'utf8').digest('hex');
}

/** A login session: the refresh-token family its access tokens derive from, and its end. */
export interface Session {
  familyId: string;
  expiresAt: Date;
}

export function principalFromIdentity(
  identity: Identity,
  via: Principal['via'],
  credential?: Principal['credential'],
): Principal {
  return {
    subject: identity.subject,
    kind: identity.subject.startsWith('svc:')
      ? 'service'
      : identity.subject === BOOTSTRAP_ADMIN
        ? 'bootstrap'
        : 'user',
    via,
    ...(identity.email ? { email: identity.email } : {}),
    ...(identity.groups && identity.groups.length > 0 ? { groups: identity.groups } : {}),
    ...(credential ? { credential } : {}),
  };
}

/**
 * Access tokens (Ed25519 JWTs, audience `api`) and refresh tokens (opaque, stored as hashes,
 * rotated on every use; a reused one revokes its whole family; each family ends after
 * STATEHOUSE_TOKENS_REFRESH_TTL so group changes at the IdP take effect). An access token names
 * its family (`parent`) and never outlives it: logout or reuse revokes the family's access
 * tokens too, through the revocation list.
 */
@Injectable()
export class TokenService implements CredentialVerifier {
  private readonly logger = new Logger('tokens');
  /** Access-token verifications done (for the "once per request" check and benchmarks). */
  verifications = 0;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly keys: SigningKeys,
    private readonly repo: IdentityRepository,
    private readonly audit: AuditService,
    private readonly revocations: CredentialRevocations,
  ) {}

  /** An access token of `session`: it expires with the session at the latest. */
  async issueAccessToken(
    identity: Identity,
    session: Session,
  ): Promise<{ token: string; expiresIn: number }> {
    if (identity.subject === BOOTSTRAP_ADMIN) {
      // The break-glass account authenticates with its own token only; nothing derives from it.
      throw new DomainError('forbidden', 'bootstrap-admin cannot be given access tokens');
    }
    const now = epochSeconds();
    const exp = derivedExpiry(
      now,
      this.config.tokens.accessTtlSeconds,
      epochSeconds(session.expiresAt.getTime()),
    );
    const parent: CredentialParent = { kind: 'refresh_family', id: session.familyId };
    const claims: Record<string, unknown> = { parent: formatParent(parent) };
    if (identity.email) claims.email = identity.email;
    if (identity.groups && identity.groups.length > 0) claims.groups = identity.groups;
    const token = await this.keys.sign(claims, identity.subject, ['api'], exp, randomUUID());
    return { token, expiresIn: Math.max(0, exp - now) };
  }

  /**
   * A new login session: an access token and the first refresh token of a new family. The
   * login's groups and verified email become the subject's latest login, which that person's
   * API tokens carry until the session's absolute end (unless a newer login renews them).
   */
  async startSession(identity: Identity): Promise<TokenResponse> {
    const refresh = REFRESH_TOKEN_PREFIX + randomBytes(32).toString('base64url');
    const session: Session = {
      familyId: randomUUID(),
      expiresAt: new Date(Date.now() + this.config.tokens.refreshTtlSeconds * 1000),
    };
    const access = await this.issueAccessToken(identity, session);
    await this.repo.transaction(async (m) => {
      await this.repo.insertRefreshToken(m, {
        family_id: session.familyId,
        token_hash: sha256Hex(refresh),
        subject: identity.subject,
        email: identity.email ?? null,
        groups: identity.groups ?? [],
        family_expires_at: session.expiresAt,
      });
      await this.repo.recordLogin(m, {
        subject: identity.subject,
        email: identity.email ?? null,
        groups: identity.groups ?? [],
        expires_at: session.expiresAt,
      });
    });
    return {
      access_token: access.token,
      refresh_token: refresh,
      token_type: 'Bearer',
      expires_in: access.expiresIn,
    };
  }

  /** Exchanges a refresh token for a new pair. Reuse of a consumed token revokes the family. */
  async refresh(refreshToken: string): Promise<TokenResponse> {
    if (!refreshToken.startsWith(REFRESH_TOKEN_PREFIX)) {
      throw new DomainError(
        'unauthenticated',
        'refresh token rejected: not a Statehouse refresh token',
      );
    }
    const next = REFRESH_TOKEN_PREFIX + randomBytes(32).toString('base64url');
    const outcome = await this.repo.transaction(async (m) => {
      const row = await this.repo.lockRefreshToken(m, sha256Hex(refreshToken));
      if (!row) return { kind: 'unknown' as const };
      if (row.revoked_at || (await this.repo.familyRevoked(m, row.family_id))) {
        return { kind: 'revoked' as const, row };
      }
      if (row.used_at) {
        // Two holders of one token: the legitimate client and a thief. End the session for both.
        await this.endSession(m, row);
        return { kind: 'reused' as const, row };
      }
      if (row.family_expires_at.getTime() <= Date.now()) return { kind: 'expired' as const, row };
      await this.repo.markRefreshTokenUsed(m, row.id);
      await this.repo.insertRefreshToken(m, {
        family_id: row.family_id,
        token_hash: sha256Hex(next),
        subject: row.subject,
        email: row.email,
        groups: row.groups,
        family_expires_at: row.family_expires_at,
      });
      return { kind: 'rotated' as const, row };
    });
    if (outcome.kind === 'reused') this.revocations.changed();
    switch (outcome.kind) {
      case 'unknown':
        throw new DomainError('unauthenticated', 'refresh token rejected: unknown token');
      case 'revoked':
        throw new DomainError('unauthenticated', 'refresh token rejected: the session was revoked');
      case 'expired':
        throw new DomainError(
          'unauthenticated',
          'refresh token rejected: the session has expired; log in again',
        );
      case 'reused':
        this.audit.record({
          type: 'auth.refresh_reuse',
          actor: outcome.row.subject,
          outcome: 'denied',
          details: { family: outcome.row.family_id },
        });
        throw new DomainError(
          'unauthenticated',
          'refresh token rejected: it was already used, so the whole session has been revoked',
        );
      case 'rotated':
        break;
    }
    const identity: Identity = {
      subject: outcome.row.subject,
      ...(outcome.row.email ? { email: outcome.row.email } : {}),
      groups: outcome.row.groups,
    };
    const access = await this.issueAccessToken(identity, {
      familyId: outcome.row.family_id,
      expiresAt: outcome.row.family_expires_at,
    });
    return {
      access_token: access.token,
      refresh_token: next,
      token_type: 'Bearer',
      expires_in: access.expiresIn,
    };
  }

  /**
   * Ends the session the refresh token belongs to, and with it every access token (and S3
   * credential) derived from it. Unknown tokens are ignored (no oracle). The subject's latest
   * login stays: their API tokens keep its groups (a laptop logout must not break pipelines).
   */
  async logout(refreshToken: string): Promise<void> {
    try {
      await this.repo.transaction(async (m) => {
        const row = await this.repo.lockRefreshToken(m, sha256Hex(refreshToken));
        if (row) await this.endSession(m, row);
      });
    } finally {
      this.revocations.changed();
    }
  }

  private async endSession(
    m: EntityManager,
    row: { family_id: string; family_expires_at: Date },
  ): Promise<void> {
    await this.repo.revokeFamily(m, row.family_id);
    await this.revocations.revokeIn(
      m,
      { kind: 'refresh_family', id: row.family_id },
      row.family_expires_at,
    );
  }

  /** The guard's verifier for access tokens (anything shaped like a JWT). */
  async verify(secret: string): Promise<Principal | null> {
    if (secret.split('.').length !== 3) return null;
    this.verifications++;
    try {
      const claims = await this.verifyAccess(secret);
      const parent = claims.parent;
      if (parent?.kind !== 'refresh_family' || claims.sub === BOOTSTRAP_ADMIN) {
        throw new TokenRejected(
          'missing_claim',
          'the token names no login session it belongs to (parent)',
        );
      }
      if (await this.revocations.isRevoked(parent)) {
        throw new TokenRejected(
          'revoked',
          'the login session it belongs to has ended (logout, or a reused refresh token)',
        );
      }
      this.logger.debug({ msg: 'access token verified', sub: claims.sub });
      return principalFromIdentity(
        { subject: claims.sub, email: claims.email, groups: claims.groups },
        'access-token',
        { parent, notAfter: claims.exp },
      );
    } catch (e) {
      if (e instanceof TokenRejected) {
        throw new DomainError(
          'unauthenticated',
          `access token rejected: ${e.message} (${e.reason})`,
        );
      }
      throw e;
    }
  }

  private async verifyAccess(token: string) {
    const options = { issuer: this.config.publicUrl, audience: 'api' as const };
    try {
      return await verifyStatehouseJwt(token, this.keys.keys, options);
    } catch (e) {
      if (e instanceof TokenRejected && e.reason === 'unknown_key') {
        const kid = kidOf(token);
        if (kid && (await this.keys.reloadForUnknownKid(kid))) {
          return verifyStatehouseJwt(token, this.keys.keys, options);
        }
      }
      throw e;
    }
  }
}

export function kidOf(token: string): string | undefined {
  try {
    const header = JSON.parse(Buffer.from(token.split('.')[0], 'base64url').toString('utf8')) as {
      kid?: unknown;
    };
    return typeof header.kid === 'string' ? header.kid : undefined;
  } catch {
    return undefined;
  }
}
