import { Inject, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { DataSource } from 'typeorm';
import { AuditService } from '../audit/audit.service';
import { APP_CONFIG, AppConfig } from '../config/config';
import { DomainError } from '../common/errors';
import { holdUntilStarted } from '../common/startup';
import { MIGRATION_LOCK_KEY } from '../database/migrator';
import { CredentialVerifier } from './credential-verifier';
import { BOOTSTRAP_ADMIN, Principal } from './principal';

export const BOOTSTRAP_TOKEN_PREFIX = 'shb_';
const SETTING = 'bootstrap_token_sha256';
const DISABLED = 'disabled';

function sha256(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

/**
 * The break-glass `bootstrap-admin` credential: STATEHOUSE_BOOTSTRAP_TOKEN when configured,
 * otherwise a token generated on the first start (under the migration lock, so replicas agree),
 * of which only the sha256 is kept. Every use is audited.
 */
@Injectable()
export class BootstrapTokenService implements CredentialVerifier, OnModuleInit {
  private readonly logger = new Logger('bootstrap');
  private readonly configured?: Buffer;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly db: DataSource,
    private readonly audit: AuditService,
  ) {
    if (config.bootstrapToken) this.configured = sha256(config.bootstrapToken.reveal());
  }

  async onModuleInit(): Promise<void> {
    if (this.configured || this.config.authDisabled) return;
    const runner = this.db.createQueryRunner();
    await runner.connect();
    try {
      await runner.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
      try {
        const rows = (await runner.query('SELECT value FROM settings WHERE key = $1', [
          SETTING,
        ])) as { value: string }[];
        if (rows.length > 0) return;
        const token = BOOTSTRAP_TOKEN_PREFIX + randomBytes(32).toString('base64url');
        await runner.query('INSERT INTO settings (key, value) VALUES ($1, $2)', [
          SETTING,
          sha256(token).toString('hex'),
        ]);
        this.announce(token);
        this.audit.record({
          type: 'auth.bootstrap_token_generated',
          actor: 'system',
          outcome: 'success',
          door: 'system',
        });
      } finally {
        await runner.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]);
      }
    } finally {
      await runner.release();
    }
  }

  /**
   * Printed once on stderr, outside the structured log (so it is not shipped with every log
   * line), after "listening on …" (so it does not scroll away among the start-up lines).
   */
  private announce(token: string): void {
    holdUntilStarted(
      [
        '',
        '================================================================================',
        ' Statehouse generated a bootstrap token (bootstrap-admin). It is shown only now:',
        '',
        `   ${token}`,
        '',
        ' Keep it in a secret store. Only its hash is kept. Set STATEHOUSE_BOOTSTRAP_TOKEN',
        ' to use your own instead, or disable it with DELETE /v1/auth/bootstrap.',
        '================================================================================',
        '',
      ].join('\n') + '\n',
    );
    this.logger.warn('generated a bootstrap token: printed once on stderr when start-up is done');
  }

  async verify(secret: string): Promise<Principal | null> {
    let ok = false;
    if (this.configured) {
      ok = timingSafeEqual(sha256(secret), this.configured);
      // With a configured token, a generated one (from an earlier start) no longer counts.
      if (!ok && !secret.startsWith(BOOTSTRAP_TOKEN_PREFIX)) return null;
    } else {
      if (!secret.startsWith(BOOTSTRAP_TOKEN_PREFIX)) return null;
      const rows = await this.db.query<{ value: string }[]>(
        'SELECT value FROM settings WHERE key = $1',
        [SETTING],
      );
      const stored = rows[0]?.value;
      ok =
        stored !== undefined &&
        stored !== DISABLED &&
        timingSafeEqual(sha256(secret), Buffer.from(stored, 'hex'));
    }
    if (!ok) throw new DomainError('unauthenticated', 'invalid bootstrap token');
    this.audit.record({
      type: 'auth.bootstrap_token_used',
      actor: BOOTSTRAP_ADMIN,
      outcome: 'success',
    });
    return { subject: BOOTSTRAP_ADMIN, kind: 'bootstrap', via: 'bootstrap-token' };
  }

  /** Disables the generated token for good (a configured one is removed from the environment). */
  async disableGenerated(actor: string): Promise<void> {
    await this.db.transaction(async (m) => {
      await m.query(
        `INSERT INTO settings (key, value) VALUES ($1, $2)
         ON CONFLICT (key) DO UPDATE SET value = $2, updated_at = now()`,
        [SETTING, DISABLED],
      );
      await this.audit.recordIn(m, {
        type: 'auth.bootstrap_token_disabled',
        actor,
        outcome: 'success',
        details: { configured_token_still_set: this.configured !== undefined },
      });
    });
  }
}
