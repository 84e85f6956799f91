import { Inject, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { DataSource } from 'typeorm';
import { AuditService } from '../audit/audit.service';
import { APP_CONFIG, AppConfig } from '../config/config';
import { DomainError } from '../common/errors';
import { holdUntilStarted } from '../common/startup';
import { CredentialVerifier, SecretDigest } from './credential-verifier';
import { BOOTSTRAP_ADMIN, Principal } from '../common/principal';
import { insertSettingIfAbsent, putSetting, readSetting } from '../database/settings.repository';
import { ADVISORY_LOCK, transaction, withAdvisoryLock } from '../database/transaction';

export const BOOTSTRAP_TOKEN_PREFIX = 'shb_';
const SETTING = 'bootstrap_token_sha256';
const DISABLED = 'disabled';

function sha256(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

/**
 * The break-glass `bootstrap-admin` credential: STATEHOUSE_BOOTSTRAP_TOKEN when configured,
 * otherwise a token generated on the first start (under its own advisory lock, so replicas agree),
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
    // Replicas starting together: one generates the token, the others find its hash.
    await withAdvisoryLock(this.db, ADVISORY_LOCK.bootstrapToken, async (runner) => {
      if ((await readSetting(runner, SETTING)) !== undefined) return;
      const token = BOOTSTRAP_TOKEN_PREFIX + randomBytes(32).toString('base64url');
      if (!(await insertSettingIfAbsent(runner, SETTING, sha256(token).toString('hex')))) return;
      this.announce(token);
      this.audit.record({
        type: 'auth.bootstrap_token_generated',
        actor: 'system',
        outcome: 'success',
        door: 'system',
      });
    });
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

  async verify(secret: string, digest?: SecretDigest): Promise<Principal | null> {
    const hashed = (): Buffer => (digest ? digest() : sha256(secret));
    let ok = false;
    if (this.configured) {
      ok = timingSafeEqual(hashed(), this.configured);
      // With a configured token, a generated one (from an earlier start) no longer counts.
      if (!ok && !secret.startsWith(BOOTSTRAP_TOKEN_PREFIX)) return null;
    } else {
      if (!secret.startsWith(BOOTSTRAP_TOKEN_PREFIX)) return null;
      const stored = await readSetting(this.db, SETTING);
      ok =
        stored !== undefined &&
        stored !== DISABLED &&
        timingSafeEqual(hashed(), Buffer.from(stored, 'hex'));
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
    await transaction(this.db, async (m) => {
      await putSetting(m, SETTING, DISABLED);
      await this.audit.recordIn(m, {
        type: 'auth.bootstrap_token_disabled',
        actor,
        outcome: 'success',
        details: { configured_token_still_set: this.configured !== undefined },
      });
    });
  }
}
