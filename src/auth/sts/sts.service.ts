import { Inject, Injectable, OnModuleInit } from '@nestjs/common';
import { randomBytes, randomUUID } from 'node:crypto';
import { AuditService } from '../../audit/audit.service';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { SharedSecrets } from '../../database/shared-secrets.service';
import { Principal } from '../principal';
import { verifySessionToken, VerifiedClaims } from '../tokens/jwt';
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

/**
 * Issues short-lived S3 credentials and, for the S3 door, turns an access key id and session
 * token back into a principal and the secret to check the signature with — on any replica,
 * with no session table.
 */
@Injectable()
export class StsService implements OnModuleInit {
  private hmacKeys = new Map<string, Buffer>();
  private lastLoad = 0;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly secrets: SharedSecrets,
    private readonly keys: SigningKeys,
    private readonly audit: AuditService,
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
    const kid = this.config.sts.kid;
    const key = this.hmacKeys.get(kid) as Buffer;
    const sessionId = newSessionId();
    const ttl = this.config.sts.ttlSeconds;
    const claims: Record<string, unknown> = { sid: sessionId };
    if (principal.email) claims.email = principal.email;
    if (principal.groups && principal.groups.length > 0) claims.groups = principal.groups;
    const token = await this.keys.sign(claims, principal.subject, ['s3'], ttl, randomUUID());
    this.audit.record({
      type: 'auth.s3_credentials_issued',
      actor: principal.subject,
      outcome: 'success',
      details: { key_id: kid, ttl_seconds: ttl },
    });
    return {
      Version: 1,
      AccessKeyId: accessKeyId(kid, sessionId),
      SecretAccessKey: deriveSecretAccessKey(key, sessionId),
      SessionToken: token,
      Expiration: new Date(Date.now() + ttl * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z'),
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
    return key ? deriveSecretAccessKey(key, parsed.sessionId) : undefined;
  }

  /** The principal behind a session token that belongs to `accessKey`; throws TokenRejected. */
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
    return {
      claims,
      principal: principalFromIdentity(
        { subject: claims.sub, email: claims.email, groups: claims.groups },
        's3-signature',
      ),
    };
  }
}
