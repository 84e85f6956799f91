import { Inject, Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { RbacCache } from '../../rbac/rbac-cache';
import { CLOCK_TOLERANCE_SECONDS } from '../tokens/jwt';
import type { CredentialParent } from '../../common/principal';
import { formatParent } from './credential-parent';
import { RevocationRepository, REVOCATIONS_CHANNEL } from './revocation.repository';

/** Slack for a credential minted while its parent was being revoked (the mint had checked it). */
const IN_FLIGHT_MINT_SECONDS = 60;
const MAX_CACHED = 10_000;

/**
 * Revocation of derived credentials. Access tokens and S3 session tokens stay stateless
 * (signed, verified without a session table), but each names its parent credential; revoking
 * the parent (an API token; a login session, by logout or refresh-token reuse) puts it on a
 * short list that every use of a derived credential checks.
 *
 * The answers are cached exactly like RBAC decisions — on the same LISTEN connection, dropped
 * on every replica by a NOTIFY sent in the revoking transaction, not cached at all while that
 * connection is down — and a lookup that cannot reach the database fails (503), never allows.
 */
@Injectable()
export class CredentialRevocations {
  private readonly known = new Map<string, boolean>();
  private generation = 0;
  /** Other caches of credential state that must be dropped with these answers (`follow`). */
  private readonly followers: (() => void)[] = [];

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly repo: RevocationRepository,
    private readonly notifications: RbacCache,
  ) {
    notifications.watch(REVOCATIONS_CHANNEL, () => this.drop());
  }

  /** Whether answers may be kept at all: only while every replica's revocation reaches us. */
  get cachingAllowed(): boolean {
    return this.notifications.enabled;
  }

  /**
   * Changes with every revocation heard of (here or by NOTIFY) and every loss of the channel.
   * Read it before a database read and keep what was read only if it has not changed since.
   */
  get changes(): number {
    return this.generation;
  }

  /**
   * Keeps another cache of credential state (the API tokens' rows) exactly like these answers:
   * `drop` runs on every revocation this replica makes or hears of, and whenever the NOTIFY
   * connection is lost or comes back.
   */
  follow(drop: () => void): void {
    this.followers.push(drop);
  }

  async isRevoked(parent: CredentialParent): Promise<boolean> {
    const key = formatParent(parent);
    if (this.notifications.enabled) {
      const cached = this.known.get(key);
      if (cached !== undefined) return cached;
    }
    const generation = this.generation;
    const revoked = await this.repo.isRevoked(parent);
    // An answer read before a revocation whose NOTIFY arrived meanwhile is not kept.
    if (this.notifications.enabled && generation === this.generation) {
      if (this.known.size >= MAX_CACHED) this.known.clear();
      this.known.set(key, revoked);
    }
    return revoked;
  }

  /**
   * Revokes everything derived from `parent`, in the caller's transaction; call `changed()`
   * once it has committed. The entry is kept while anything derived from the parent could still
   * verify: the longest lifetime of a derived credential (plus the verifiers' clock tolerance
   * and a credential minted in flight), and never past the parent's own expiry.
   */
  async revokeIn(
    m: EntityManager,
    parent: CredentialParent,
    parentExpiresAt: Date | null,
  ): Promise<void> {
    const longest = Math.max(this.config.tokens.accessTtlSeconds, this.config.sts.ttlSeconds);
    const keep = longest + CLOCK_TOLERANCE_SECONDS + IN_FLIGHT_MINT_SECONDS;
    await this.repo.revoke(m, parent, keep, parentExpiresAt, CLOCK_TOLERANCE_SECONDS);
  }

  /** After a revocation committed: this replica drops its answers now, the others on the NOTIFY. */
  changed(): void {
    this.drop();
  }

  private drop(): void {
    this.generation++;
    this.known.clear();
    for (const drop of this.followers) drop();
  }
}
