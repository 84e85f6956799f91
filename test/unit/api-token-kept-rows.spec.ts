import type { AuditService } from '../../src/audit/audit.service';
import type { ApiTokenWithLogin, IdentityRepository } from '../../src/auth/identity.repository';
import { CredentialRevocations } from '../../src/auth/revocation/credential-revocations.service';
import type { RevocationRepository } from '../../src/auth/revocation/revocation.repository';
import { ApiTokenService } from '../../src/auth/tokens/api-token.service';
import { sha256Hex } from '../../src/auth/tokens/token.service';
import type { AppConfig } from '../../src/config/config';
import type { AuthorizationService } from '../../src/rbac/authorization.service';
import type { RbacCache } from '../../src/rbac/rbac-cache';

/**
 * A service token's row is kept between uses only while every replica's revocations reach this
 * one (the NOTIFY channel is up), and is dropped the moment one is heard of; a person's token is
 * read on every use. The database is a counted fake: what is asked of it is what is pinned.
 */

const SVC = 'sht_service-token-secret';
const PERSON = 'sht_person-token-secret';

function row(secret: string, subject: string, patch: Partial<ApiTokenWithLogin> = {}) {
  return {
    id: `id-${subject}`,
    name: subject,
    token_hash: sha256Hex(secret),
    subject,
    created_by: 'alice',
    created_at: new Date(),
    expires_at: null,
    last_used_at: new Date(), // used just now: no touch
    revoked_at: null,
    login_email: null,
    login_groups: null,
    login_expires_at: null,
    ...patch,
  } satisfies ApiTokenWithLogin;
}

function setup() {
  const rows = new Map<string, ApiTokenWithLogin>([
    [sha256Hex(SVC), row(SVC, 'svc:ci')],
    [sha256Hex(PERSON), row(PERSON, 'alice')],
  ]);
  let lookups = 0;
  const repo = {
    findApiTokenByHash: (hash: string) => {
      lookups++;
      return Promise.resolve(rows.get(hash));
    },
    touchApiToken: () => Promise.resolve(),
  } as unknown as IdentityRepository;
  const channel = { enabled: true, drop: () => undefined as void };
  const notifications = {
    get enabled() {
      return channel.enabled;
    },
    watch: (_name: string, drop: () => void) => (channel.drop = drop),
  } as unknown as RbacCache;
  const revocations = new CredentialRevocations(
    {} as AppConfig,
    {} as RevocationRepository,
    notifications,
  );
  const tokens = new ApiTokenService(
    repo,
    {} as AuthorizationService,
    {} as AuditService,
    revocations,
  );
  return { tokens, rows, channel, lookups: () => lookups };
}

describe('API tokens: the rows kept between uses', () => {
  it('looks a service token up once, then answers from the kept row', async () => {
    const { tokens, lookups } = setup();
    for (let i = 0; i < 5; i++) expect((await tokens.verify(SVC))?.subject).toBe('svc:ci');
    expect(lookups()).toBe(1);
  });

  it('drops the kept row when a revocation is heard of (the NOTIFY), and refuses the revoked token', async () => {
    const { tokens, rows, channel, lookups } = setup();
    await tokens.verify(SVC);
    rows.set(sha256Hex(SVC), row(SVC, 'svc:ci', { revoked_at: new Date() }));
    channel.drop(); // another replica's revocation arrives
    await expect(tokens.verify(SVC)).rejects.toThrow(/revoked/);
    expect(lookups()).toBe(2);
  });

  it('keeps nothing while the NOTIFY channel is down', async () => {
    const { tokens, channel, lookups } = setup();
    channel.enabled = false;
    for (let i = 0; i < 3; i++) await tokens.verify(SVC);
    expect(lookups()).toBe(3);
  });

  it('reads a person’s token on every use (its groups come from their latest login)', async () => {
    const { tokens, lookups } = setup();
    for (let i = 0; i < 3; i++) expect((await tokens.verify(PERSON))?.subject).toBe('alice');
    expect(lookups()).toBe(3);
  });

  it('refuses a kept token once it has expired, without asking the database', async () => {
    const { tokens, rows, lookups } = setup();
    rows.set(sha256Hex(SVC), row(SVC, 'svc:ci', { expires_at: new Date(Date.now() + 200) }));
    await tokens.verify(SVC);
    await new Promise((r) => setTimeout(r, 250));
    await expect(tokens.verify(SVC)).rejects.toThrow(/expired/);
    expect(lookups()).toBe(1);
  });
});
