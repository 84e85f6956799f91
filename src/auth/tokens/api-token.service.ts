import { Injectable } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import { AuditService } from '../../audit/audit.service';
import { DomainError } from '../../common/errors';
import { AuthorizationService } from '../../rbac/authorization.service';
import { CredentialVerifier, SecretDigest } from '../credential-verifier';
import { ApiTokenRow, ApiTokenWithLogin, IdentityRepository } from '../identity.repository';
import { BOOTSTRAP_ADMIN, Principal } from '../../common/principal';
import { epochSeconds } from '../revocation/credential-parent';
import { CredentialRevocations } from '../revocation/credential-revocations.service';
import { Identity, principalFromIdentity, sha256Hex } from './token.service';
import { tokenVerifications } from './verification-counts';

/** A fixed, recognisable prefix, so secret scanners can find leaked tokens. */
export const API_TOKEN_PREFIX = 'sht_';
/** How often a token's last use is written (identity.repository.ts's touchApiToken agrees). */
const TOUCH_EVERY_MS = 60_000;
const SERVICE_SUBJECT = /^svc:[a-z0-9][a-z0-9._-]{0,62}$/;
/** At most this many service tokens' rows are kept (then all are dropped and read again). */
const MAX_KEPT = 10_000;

/** A service token's row kept between uses, and when this process last wrote its use. */
interface KeptToken {
  row: ApiTokenWithLogin;
  lastUsedMs: number | undefined;
}

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
 *
 * A token acting as a person carries that person's groups and verified email as their most
 * recent login gave them, for one refresh-token lifetime after that login (each login renews
 * them; logout does not remove them) — so an IdP dropping a group takes effect on the person's
 * tokens at their next login, or at the latest when that lifetime ends. A `svc:` token carries
 * no groups: only the rights given to the `svc:` subject itself.
 */
@Injectable()
export class ApiTokenService implements CredentialVerifier {
  /**
   * The rows of `svc:` tokens in use, by hash, so that a request costs no lookup: dropped with
   * the revocation answers (`CredentialRevocations.follow`) — on every replica by the NOTIFY a
   * revocation sends, and while that channel is down nothing is kept. The expiry is checked on
   * every use. A person's token is read every time: it carries their groups from their latest
   * login, which changes without a NOTIFY.
   */
  private readonly kept = new Map<string, KeptToken>();

  constructor(
    private readonly repo: IdentityRepository,
    private readonly authz: AuthorizationService,
    private readonly audit: AuditService,
    private readonly revocations: CredentialRevocations,
  ) {
    revocations.follow(() => this.kept.clear());
  }

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
    const row = await this.repo.transaction(async (m) => {
      const inserted = await this.repo.insertApiToken(m, {
        name: request.name,
        token_hash: sha256Hex(token),
        subject,
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

  /**
   * A token for a person who has just signed in through the OpenID provider on this server
   * (`terraform login`): their login is recorded as any login is (groups and verified email,
   * carried by their tokens until `loginExpiresAt`), and the token acts as them. One
   * transaction: no token without its login, no login recorded for a token not made.
   */
  async issueForLogin(
    identity: Identity,
    request: { name: string; loginExpiresAt: Date; via: string },
  ): Promise<ApiTokenInfo & { token: string }> {
    const token = API_TOKEN_PREFIX + randomBytes(32).toString('base64url');
    const row = await this.repo.transaction(async (m) => {
      await this.repo.recordLogin(m, {
        subject: identity.subject,
        email: identity.email ?? null,
        groups: identity.groups ?? [],
        expires_at: request.loginExpiresAt,
      });
      const inserted = await this.repo.insertApiToken(m, {
        name: request.name,
        token_hash: sha256Hex(token),
        subject: identity.subject,
        created_by: identity.subject,
        expires_at: null,
      });
      await this.audit.recordIn(m, {
        type: 'auth.login',
        actor: identity.subject,
        outcome: 'success',
        details: { via: request.via },
      });
      await this.audit.recordIn(m, {
        type: 'auth.api_token_created',
        actor: identity.subject,
        outcome: 'success',
        details: { token_id: inserted.id, subject: identity.subject, name: request.name },
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
    // The token stops at once (it is read on every use); what was minted from it — S3
    // credentials — stops through the revocation list, on every replica.
    try {
      await this.repo.transaction(async (m) => {
        await this.repo.revokeApiToken(m, row.id);
        await this.revocations.revokeIn(m, { kind: 'api_token', id: row.id }, row.expires_at);
        await this.audit.recordIn(m, {
          type: 'auth.api_token_revoked',
          actor: principal.subject,
          outcome: 'success',
          details: { token_id: row.id, subject: row.subject },
        });
      });
    } finally {
      this.revocations.changed();
    }
  }

  async verify(secret: string, digest?: SecretDigest): Promise<Principal | null> {
    if (!secret.startsWith(API_TOKEN_PREFIX)) return null;
    const hash = digest ? digest().toString('hex') : sha256Hex(secret);
    const allowed = this.revocations.cachingAllowed;
    let kept = allowed ? this.kept.get(hash) : undefined;
    const reused = kept !== undefined;
    if (!kept) {
      const changes = this.revocations.changes;
      const row = await this.repo.findApiTokenByHash(hash);
      if (!row) throw refused('unknown token');
      if (row.revoked_at) throw refused('it was revoked');
      kept = {
        row,
        lastUsedMs: row.last_used_at ? new Date(row.last_used_at).getTime() : undefined,
      };
      // Kept only if no revocation was heard of while it was read (it may be this one's).
      if (allowed && row.subject.startsWith('svc:') && changes === this.revocations.changes) {
        if (this.kept.size >= MAX_KEPT) this.kept.clear();
        this.kept.set(hash, kept);
      }
    }
    const row = kept.row;
    if (row.expires_at && new Date(row.expires_at).getTime() <= Date.now()) {
      this.kept.delete(hash);
      throw refused('it has expired');
    }
    tokenVerifications.api_token[reused ? 'reused' : 'verified']++;
    // Last use is kept to the minute (the UPDATE itself refuses anything finer): a token used
    // again within it costs no write, which on the embedded database would also end what the
    // state reads keep in memory.
    if (kept.lastUsedMs === undefined || Date.now() - kept.lastUsedMs >= TOUCH_EVERY_MS) {
      kept.lastUsedMs = Date.now();
      await this.repo.touchApiToken(row.id);
    }
    const identity: Identity = { subject: row.subject };
    // Credentials minted with this token end with it, and with the login whose groups they carry.
    const ends: number[] = [];
    if (row.expires_at) ends.push(epochSeconds(new Date(row.expires_at).getTime()));
    const person = !row.subject.startsWith('svc:');
    if (person && row.login_expires_at) {
      if (row.login_email) identity.email = row.login_email;
      identity.groups = row.login_groups ?? [];
      if (identity.email || identity.groups.length > 0) {
        ends.push(epochSeconds(new Date(row.login_expires_at).getTime()));
      }
    }
    return principalFromIdentity(identity, 'api-token', {
      parent: { kind: 'api_token', id: row.id },
      ...(ends.length > 0 ? { notAfter: Math.min(...ends) } : {}),
    });
  }
}

/** A refused API token, counted. */
function refused(why: string): DomainError {
  tokenVerifications.api_token.refused++;
  return new DomainError('unauthenticated', `API token rejected: ${why}`);
}
