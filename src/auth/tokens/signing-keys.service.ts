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
import { MIGRATION_LOCK_KEY } from '../../database/migrator';
import { sqlRows } from '../../database/sql';

type Query = (sql: string, params?: unknown[]) => Promise<unknown>;

interface KeyRow {
  kid: string;
  private_pem: string | null;
  public_jwk: JWK;
  created_at: Date;
  retired_at: Date | null;
}

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
    await this.withLock((query) => this.ensureSigningKey(query));
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

  /** Runs under the migration lock; `query` is that lock's own connection (embedded: the only one). */
  private async ensureSigningKey(query: Query): Promise<void> {
    const configured = this.config.tokens.privateKeyPem;
    if (configured) {
      const key = createPrivateKey(configured.reveal());
      const jwk = publicJwk(createPublicKey(key));
      const kid = this.config.tokens.kid ?? (await calculateJwkThumbprint(jwk)).slice(0, 16);
      // Only the public half goes to the database, so other replicas can verify during rollouts.
      await query(
        `INSERT INTO signing_keys (kid, private_pem, public_jwk) VALUES ($1, NULL, $2)
         ON CONFLICT (kid) DO UPDATE SET retired_at = NULL`,
        [kid, JSON.stringify(jwk)],
      );
      await query(
        'UPDATE signing_keys SET retired_at = now() WHERE kid <> $1 AND retired_at IS NULL',
        [kid],
      );
      this.signing = { kid, key };
      return;
    }
    const rows = (await query(
      `SELECT * FROM signing_keys WHERE private_pem IS NOT NULL AND retired_at IS NULL
        ORDER BY created_at DESC LIMIT 1`,
    )) as KeyRow[];
    if (rows.length > 0) {
      this.signing = { kid: rows[0].kid, key: createPrivateKey(rows[0].private_pem as string) };
      return;
    }
    const { privateKey, publicKey } = generateKeyPairSync('ed25519');
    const jwk = publicJwk(publicKey);
    const kid = this.config.tokens.kid ?? (await calculateJwkThumbprint(jwk)).slice(0, 16);
    await query('INSERT INTO signing_keys (kid, private_pem, public_jwk) VALUES ($1, $2, $3)', [
      kid,
      privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
      JSON.stringify(jwk),
    ]);
    // Keys from an earlier configured file stop signing but keep verifying for a while.
    await query(
      'UPDATE signing_keys SET retired_at = now() WHERE kid <> $1 AND retired_at IS NULL',
      [kid],
    );
    this.logger.log(`generated access-token signing key ${kid}`);
    this.signing = { kid, key: privateKey };
  }

  private async reload(): Promise<void> {
    this.lastReload = Date.now();
    // A retired key verifies for as long as a token it signed can live (plus tolerance).
    const graceSeconds =
      Math.max(this.config.tokens.accessTtlSeconds, this.config.sts.ttlSeconds) + 300;
    const rows = await sqlRows<KeyRow>(
      this.db.manager,
      `SELECT * FROM signing_keys
        WHERE retired_at IS NULL OR retired_at > now() - make_interval(secs => $1)`,
      [graceSeconds],
    );
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

  private async withLock(work: (query: Query) => Promise<void>): Promise<void> {
    const runner = this.db.createQueryRunner();
    await runner.connect();
    try {
      await runner.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
      try {
        await work((sql, params) => runner.query(sql, params) as Promise<unknown>);
      } finally {
        await runner.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]);
      }
    } finally {
      await runner.release();
    }
  }
}

function publicJwk(key: KeyObject): JWK {
  const jwk = key.export({ format: 'jwk' });
  return { kty: jwk.kty as string, crv: jwk.crv, x: jwk.x };
}
