import { Inject, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import {
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  JsonWebKey,
  KeyObject,
} from 'node:crypto';
import { calculateJwkThumbprint, JWK, SignJWT } from 'jose';
import { DataSource } from 'typeorm';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { ADVISORY_LOCK, withAdvisoryLock } from '../../database/transaction';
import {
  findSigningKey,
  findVerifyingKeys,
  insertGeneratedKey,
  putPublicKey,
  retireKeysOtherThan,
} from './signing-keys.repository';
import type { Queryable } from '../../database/sql';

/** Minimum seconds between two reloads triggered by an unknown `kid`. */
const RELOAD_COOLDOWN_MS = 10_000;

/**
 * The Ed25519 keys that sign and verify Statehouse's JWTs. The signing key is the configured
 * file (STATEHOUSE_TOKENS_PRIVATE_KEY_FILE) or one generated on the first start and kept in the
 * database, so every replica signs and verifies alike and restarts do not invalidate tokens.
 * Older keys keep verifying until tokens they signed have expired (rotation by `kid`).
 */
@Injectable()
export class SigningKeys implements OnModuleInit {
  private readonly logger = new Logger('signing-keys');
  private signing!: { kid: string; key: KeyObject };
  private verifying = new Map<string, KeyObject>();
  private publicJwks: JWK[] = [];
  private lastReload = 0;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly db: DataSource,
  ) {}

  async onModuleInit(): Promise<void> {
    await withAdvisoryLock(this.db, ADVISORY_LOCK.signingKeys, (runner) =>
      this.ensureSigningKey(runner),
    );
    await this.reload();
  }

  get kid(): string {
    return this.signing.kid;
  }

  /** Keys that verify, by kid. */
  get keys(): ReadonlyMap<string, KeyObject> {
    return this.verifying;
  }

  /** The public half of every verifying key (`/.well-known/jwks.json`). */
  jwks(): { keys: JWK[] } {
    return { keys: this.publicJwks };
  }

  /** A JWT for `subject` that expires at `expiresAt` (seconds since the epoch). */
  async sign(
    claims: Record<string, unknown>,
    subject: string,
    audience: string[],
    expiresAt: number,
    jti: string,
  ): Promise<string> {
    return new SignJWT(claims)
      .setProtectedHeader({ alg: 'EdDSA', kid: this.signing.kid, typ: 'JWT' })
      .setIssuer(this.config.publicUrl)
      .setSubject(subject)
      .setAudience(audience)
      .setIssuedAt()
      .setExpirationTime(expiresAt)
      .setJti(jti)
      .sign(this.signing.key);
  }

  /**
   * Called when a token names a kid we do not know: another replica may have rotated. Reloads
   * at most every few seconds, so forged kids cannot make us hammer the database.
   */
  async reloadForUnknownKid(kid: string): Promise<boolean> {
    if (this.verifying.has(kid) || Date.now() - this.lastReload < RELOAD_COOLDOWN_MS) {
      return this.verifying.has(kid);
    }
    await this.reload();
    return this.verifying.has(kid);
  }

  /** Runs under the signing-keys advisory lock; `q` is that lock's own connection (embedded: the only one). */
  private async ensureSigningKey(q: Queryable): Promise<void> {
    const configured = this.config.tokens.privateKeyPem;
    if (configured) {
      const key = createPrivateKey(configured.reveal());
      const jwk = publicJwk(createPublicKey(key));
      const kid = this.config.tokens.kid ?? (await calculateJwkThumbprint(jwk)).slice(0, 16);
      // Only the public half goes to the database, so other replicas can verify during rollouts.
      await putPublicKey(q, kid, jwk);
      await retireKeysOtherThan(q, kid);
      this.signing = { kid, key };
      return;
    }
    const current = await findSigningKey(q);
    if (current) {
      this.signing = { kid: current.kid, key: createPrivateKey(current.private_pem as string) };
      return;
    }
    const { privateKey, publicKey } = generateKeyPairSync('ed25519');
    const jwk = publicJwk(publicKey);
    const kid = this.config.tokens.kid ?? (await calculateJwkThumbprint(jwk)).slice(0, 16);
    await insertGeneratedKey(
      q,
      kid,
      privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
      jwk,
    );
    // Keys from an earlier configured file stop signing but keep verifying for a while.
    await retireKeysOtherThan(q, kid);
    this.logger.log(`generated access-token signing key ${kid}`);
    this.signing = { kid, key: privateKey };
  }

  private async reload(): Promise<void> {
    this.lastReload = Date.now();
    // A retired key verifies for as long as a token it signed can live (plus tolerance).
    const graceSeconds =
      Math.max(this.config.tokens.accessTtlSeconds, this.config.sts.ttlSeconds) + 300;
    const rows = await findVerifyingKeys(this.db, graceSeconds);
    const verifying = new Map<string, KeyObject>();
    const jwks: JWK[] = [];
    for (const row of rows) {
      verifying.set(row.kid, createPublicKey({ key: row.public_jwk as JsonWebKey, format: 'jwk' }));
      jwks.push({ ...row.public_jwk, kid: row.kid, alg: 'EdDSA', use: 'sig' });
    }
    verifying.set(this.signing.kid, createPublicKey(this.signing.key));
    this.verifying = verifying;
    this.publicJwks = jwks;
  }
}

function publicJwk(key: KeyObject): JWK {
  const jwk = key.export({ format: 'jwk' });
  return { kty: jwk.kty as string, crv: jwk.crv, x: jwk.x };
}
