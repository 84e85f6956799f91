import { Inject, Injectable, OnModuleInit } from '@nestjs/common';
import { randomBytes, randomUUID } from 'node:crypto';
import { AuditService } from '../../audit/audit.service';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { DomainError } from '../../common/errors';
import { SharedSecrets } from '../../database/shared-secrets.service';
import { BOOTSTRAP_ADMIN, Principal } from '../../common/principal';
import { derivedExpiry, epochSeconds, formatParent } from '../revocation/credential-parent';
import { CredentialRevocations } from '../revocation/credential-revocations.service';
import { TokenRejected, verifySessionToken, VerifiedClaims } from '../tokens/jwt';
import { SigningKeys } from '../tokens/signing-keys.service';
import { principalFromIdentity } from '../tokens/token.service';
import {
  accessKeyId,
  deriveSecretAccessKey,
  newSessionId,
  parseAccessKeyId,
  ProcessCredentials,
} from './sts-credentials';

const SECRET_PREFIX = 'sts_hmac:';
/** How many derived secrets `secretFor` keeps (all dropped when full: each is one HMAC). */
const MAX_DERIVED_SECRETS = 10_000;

/**
 * Issues short-lived S3 credentials and, for the S3 door, turns an access key id and session
 * token back into a principal and the secret to check the signature with — on any replica,
 * with no session table. The session token names the API token or login session it was minted
 * with (`parent`) and expires with it at the latest; revoking that revokes the credentials.
 */
@Injectable()
export class StsService implements OnModuleInit {
  private hmacKeys = new Map<string, Buffer>();
  private lastLoad = 0;
  /** Secret access keys as derived, by access key id, with the key they were derived from. */
  private readonly derived = new Map<string, { from: Buffer; secret: string }>();

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly secrets: SharedSecrets,
    private readonly keys: SigningKeys,
    private readonly audit: AuditService,
    private readonly revocations: CredentialRevocations,
  ) {}

  async onModuleInit(): Promise<void> {
    const active = this.config.sts.kid;
    if (!this.config.sts.hmacKeys.has(active)) {
      await this.secrets.getOrCreate(SECRET_PREFIX + active, () =>
        randomBytes(32).toString('base64url'),
      );
    }
    await this.loadKeys();
  }

  private async loadKeys(): Promise<void> {
    this.lastLoad = Date.now();
    const keys = new Map<string, Buffer>();
    for (const [kid, value] of await this.secrets.list(SECRET_PREFIX))
      keys.set(kid, Buffer.from(value, 'base64url'));
    // Configured secrets win over generated ones of the same kid.
    for (const [kid, secret] of this.config.sts.hmacKeys)
      keys.set(kid, Buffer.from(secret.reveal(), 'base64url'));
    this.hmacKeys = keys;
  }

  async issue(principal: Principal): Promise<ProcessCredentials> {
    if (principal.kind === 'bootstrap') {
      throw new DomainError(
        'forbidden',
        `${principal.subject} is the break-glass account for the management API and mints no S3 credentials: create an API token (POST /v1/auth/tokens with subject "svc:<name>", or statehouse token create) and get credentials with that`,
      );
    }
    const from = principal.credential;
    if (!from) {
      throw new DomainError(
        'forbidden',
        'S3 credentials are minted with an API token or a login’s access token',
      );
    }
    const kid = this.config.sts.kid;
    const key = this.hmacKeys.get(kid) as Buffer;
    const sessionId = newSessionId();
    const now = epochSeconds();
    const exp = derivedExpiry(now, this.config.sts.ttlSeconds, from.notAfter);
    const claims: Record<string, unknown> = { sid: sessionId, parent: formatParent(from.parent) };
    if (principal.email) claims.email = principal.email;
    if (principal.groups && principal.groups.length > 0) claims.groups = principal.groups;
    const token = await this.keys.sign(claims, principal.subject, ['s3'], exp, randomUUID());
    this.audit.record({
      type: 'auth.s3_credentials_issued',
      actor: principal.subject,
      outcome: 'success',
      details: { key_id: kid, ttl_seconds: exp - now, parent: from.parent.kind },
    });
    return {
      Version: 1,
      AccessKeyId: accessKeyId(kid, sessionId),
      SecretAccessKey: deriveSecretAccessKey(key, sessionId),
      SessionToken: token,
      Expiration: new Date(exp * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z'),
    };
  }

  /**
   * For the S3 door: the secret access key of `accessKey` (undefined when it is not one of
   * ours or its key id is unknown). Derived, never stored.
   */
  async secretFor(accessKey: string): Promise<string | undefined> {
    const parsed = parseAccessKeyId(accessKey);
    if (!parsed) return undefined;
    let key = this.hmacKeys.get(parsed.kid);
    if (!key && Date.now() - this.lastLoad > 10_000) {
      await this.loadKeys(); // a key id another replica generated since we started
      key = this.hmacKeys.get(parsed.kid);
    }
    if (!key) return undefined;
    // Derived once per access key (an HMAC), while its key id keeps the same key.
    const kept = this.derived.get(accessKey);
    if (kept?.from === key) return kept.secret;
    const secret = deriveSecretAccessKey(key, parsed.sessionId);
    if (this.derived.size >= MAX_DERIVED_SECRETS) this.derived.clear();
    this.derived.set(accessKey, { from: key, secret });
    return secret;
  }

  /**
   * The principal behind a session token that belongs to `accessKey`; throws TokenRejected,
   * also when the credential it was minted from has been revoked (the database is asked, or a
   * cache that every revocation drops; an unreachable database is an error, never an allow).
   */
  async principalFor(
    accessKey: string,
    sessionToken: string,
  ): Promise<{ principal: Principal; claims: VerifiedClaims }> {
    const parsed = parseAccessKeyId(accessKey);
    const claims = await verifySessionToken(
      sessionToken,
      this.keys.keys,
      { issuer: this.config.publicUrl },
      parsed?.sessionId ?? '',
    );
    if (claims.sub === BOOTSTRAP_ADMIN) {
      throw new TokenRejected('missing_claim', 'bootstrap-admin has no S3 credentials');
    }
    if (claims.parent && (await this.revocations.isRevoked(claims.parent))) {
      throw new TokenRejected(
        'revoked',
        'the API token or login session these credentials were minted with has been revoked',
      );
    }
    return {
      claims,
      principal: principalFromIdentity(
        { subject: claims.sub, email: claims.email, groups: claims.groups },
        's3-signature',
      ),
    };
  }
}
