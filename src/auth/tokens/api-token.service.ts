import { Injectable } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import { AuditService } from '../../audit/audit.service';
import { DomainError } from '../../common/errors';
import { AuthorizationService } from '../../rbac/authorization.service';
import { CredentialVerifier } from '../credential-verifier';
import { ApiTokenRow, IdentityRepository } from '../identity.repository';
import { BOOTSTRAP_ADMIN, Principal } from '../principal';
import { principalFromIdentity, sha256Hex } from './token.service';

/** A fixed, recognisable prefix, so secret scanners can find leaked tokens. */
export const API_TOKEN_PREFIX = 'sht_';
const SERVICE_SUBJECT = /^svc:[a-z0-9][a-z0-9._-]{0,62}$/;

export interface ApiTokenInfo {
  id: string;
  name: string;
  subject: string;
  createdBy: string;
  createdAt: string;
  expiresAt: string | null;
  lastUsedAt: string | null;
  revokedAt: string | null;
}

function info(row: ApiTokenRow): ApiTokenInfo {
  const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);
  return {
    id: row.id,
    name: row.name,
    subject: row.subject,
    createdBy: row.created_by,
    createdAt: new Date(row.created_at).toISOString(),
    expiresAt: iso(row.expires_at),
    lastUsedAt: iso(row.last_used_at),
    revokedAt: iso(row.revoked_at),
  };
}

/**
 * Long-lived tokens for CI and automation: `sht_` + 256 random bits, stored as sha256, acting
 * as their creator or as a named service principal `svc:<name>`.
 */
@Injectable()
export class ApiTokenService implements CredentialVerifier {
  constructor(
    private readonly repo: IdentityRepository,
    private readonly authz: AuthorizationService,
    private readonly audit: AuditService,
  ) {}

  async create(
    principal: Principal,
    request: { name: string; subject?: string; expiresAt?: Date },
  ): Promise<ApiTokenInfo & { token: string }> {
    const subject = request.subject ?? principal.subject;
    if (subject !== principal.subject) {
      if (!SERVICE_SUBJECT.test(subject)) {
        throw new DomainError(
          'invalid_request',
          'subject must be a service principal "svc:<name>" (lower-case letters, digits, . _ -), or omitted to act as yourself',
        );
      }
      await this.authz.authorize(principal, 'token.manage', { unit: '*' });
    } else if (subject === BOOTSTRAP_ADMIN) {
      throw new DomainError(
        'invalid_request',
        'bootstrap-admin cannot hand out its own rights as a token; create one for a service principal (subject svc:<name>)',
      );
    }
    if (request.expiresAt && request.expiresAt.getTime() <= Date.now()) {
      throw new DomainError('invalid_request', 'expiresAt must be in the future');
    }
    const token = API_TOKEN_PREFIX + randomBytes(32).toString('base64url');
    const acting = subject === principal.subject;
    const row = await this.repo.transaction(async (m) => {
      const inserted = await this.repo.insertApiToken(m, {
        name: request.name,
        token_hash: sha256Hex(token),
        subject,
        email: acting ? (principal.email ?? null) : null,
        groups: acting ? (principal.groups ?? []) : [],
        created_by: principal.subject,
        expires_at: request.expiresAt ?? null,
      });
      await this.audit.recordIn(m, {
        type: 'auth.api_token_created',
        actor: principal.subject,
        outcome: 'success',
        action: subject === principal.subject ? undefined : 'token.manage',
        details: { token_id: inserted.id, subject, name: request.name },
      });
      return inserted;
    });
    return { ...info(row), token };
  }

  /** Your tokens (acting as you or created by you); every token with `token.manage`. */
  async list(principal: Principal): Promise<ApiTokenInfo[]> {
    const all = await this.authz.can(principal, 'token.manage', { unit: '*' });
    return (await this.repo.listApiTokens(all ? undefined : principal.subject)).map(info);
  }

  async revoke(principal: Principal, id: string): Promise<void> {
    const row = /^[0-9a-f-]{36}$/i.test(id) ? await this.repo.findApiToken(id) : undefined;
    const mine = row && (row.subject === principal.subject || row.created_by === principal.subject);
    if (!row || (!mine && !(await this.authz.can(principal, 'token.manage', { unit: '*' })))) {
      throw new DomainError('not_found', `API token ${id} does not exist`);
    }
    await this.repo.transaction(async (m) => {
      await this.repo.revokeApiToken(m, row.id);
      await this.audit.recordIn(m, {
        type: 'auth.api_token_revoked',
        actor: principal.subject,
        outcome: 'success',
        details: { token_id: row.id, subject: row.subject },
      });
    });
  }

  async verify(secret: string): Promise<Principal | null> {
    if (!secret.startsWith(API_TOKEN_PREFIX)) return null;
    const row = await this.repo.findApiTokenByHash(sha256Hex(secret));
    if (!row) throw new DomainError('unauthenticated', 'API token rejected: unknown token');
    if (row.revoked_at)
      throw new DomainError('unauthenticated', 'API token rejected: it was revoked');
    if (row.expires_at && new Date(row.expires_at).getTime() <= Date.now()) {
      throw new DomainError('unauthenticated', 'API token rejected: it has expired');
    }
    await this.repo.touchApiToken(row.id);
    return principalFromIdentity(
      { subject: row.subject, email: row.email ?? undefined, groups: row.groups },
      'api-token',
    );
  }
}
