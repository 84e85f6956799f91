import * as crypto from 'node:crypto';
import type { AuditService } from '../../src/audit/audit.service';
import { RequestAuthenticator } from '../../src/auth/auth.guard';
import { BootstrapTokenService } from '../../src/auth/bootstrap-token.service';
import type { ApiTokenWithLogin, IdentityRepository } from '../../src/auth/identity.repository';
import { CredentialRevocations } from '../../src/auth/revocation/credential-revocations.service';
import type { RevocationRepository } from '../../src/auth/revocation/revocation.repository';
import { ApiTokenService } from '../../src/auth/tokens/api-token.service';
import type { AppConfig } from '../../src/config/config';
import type { AuthorizationService } from '../../src/rbac/authorization.service';
import type { RbacCache } from '../../src/rbac/rbac-cache';
import type { DataSource } from 'typeorm';

/**
 * A request's bearer secret goes past every verifier in turn; the bootstrap token's (with
 * STATEHOUSE_BOOTSTRAP_TOKEN set) and the API tokens' both look at its sha256. It is hashed once.
 */

const SECRET = 'sht_service-token-secret';
const sha256Hex = (s: string) => crypto.createHash('sha256').update(s).digest('hex');

function authenticator() {
  const row: ApiTokenWithLogin = {
    id: 'id-svc',
    name: 'ci',
    token_hash: sha256Hex(SECRET),
    subject: 'svc:ci',
    created_by: 'alice',
    created_at: new Date(),
    expires_at: null,
    last_used_at: new Date(),
    revoked_at: null,
    login_email: null,
    login_groups: null,
    login_expires_at: null,
  };
  const repo = {
    findApiTokenByHash: (hash: string) =>
      Promise.resolve(hash === row.token_hash ? row : undefined),
    touchApiToken: () => Promise.resolve(),
  } as unknown as IdentityRepository;
  const notifications = {
    enabled: true,
    watch: () => undefined,
  } as unknown as RbacCache;
  const revocations = new CredentialRevocations(
    {} as AppConfig,
    {} as RevocationRepository,
    notifications,
  );
  const audit = { record: () => undefined } as unknown as AuditService;
  const config = {
    authDisabled: false,
    bootstrapToken: { reveal: () => 'a-configured-bootstrap-token-0123456789' },
  } as unknown as AppConfig;
  const verifiers = [
    new BootstrapTokenService(config, {} as DataSource, audit),
    new ApiTokenService(repo, {} as AuthorizationService, audit, revocations),
  ];
  return new RequestAuthenticator(config, verifiers, audit);
}

describe('the bearer secret of a request', () => {
  it('is hashed once, though the bootstrap token and the API tokens both compare its sha256', async () => {
    const auth = authenticator();
    // (createHash itself cannot be spied on: node:crypto's exports are not configurable.)
    const hashes = jest.spyOn(crypto.Hash.prototype, 'digest');
    try {
      for (let i = 0; i < 3; i++) {
        const before = hashes.mock.calls.length;
        const principal = await auth.principalOf(`Bearer ${SECRET}`, 'http', true);
        expect(principal.subject).toBe('svc:ci');
        expect(hashes.mock.calls.length - before).toBe(1);
      }
    } finally {
      hashes.mockRestore();
    }
  });
});
