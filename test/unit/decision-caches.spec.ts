/**
 * The caches in front of authorization decisions (RBAC rules, the credential revocation list)
 * with their database replaced: an answer read before an invalidation but arriving after it is
 * not kept (else a revocation whose NOTIFY overtook a slow read would be forgotten until the
 * next change), and nothing is cached while change notifications cannot be heard.
 */
import { CredentialRevocations } from '../../src/auth/revocation/credential-revocations.service';
import { RevocationRepository } from '../../src/auth/revocation/revocation.repository';
import { loadConfig } from '../../src/config/config';
import { AuthorizationService } from '../../src/rbac/authorization.service';
import { RbacCache } from '../../src/rbac/rbac-cache';
import { RbacRepository, RuleRow } from '../../src/rbac/rbac.repository';
import { RecordingAudit } from '../support/services';

const PARENT = { kind: 'api_token' as const, id: '00000000-0000-4000-8000-000000000001' };
const embedded = () => loadConfig({ NODE_ENV: 'test', STATEHOUSE_STORAGE: 'memory' });

/** A lookup whose answers the test hands out one by one. */
function controlled<T>() {
  const pending: ((v: T) => void)[] = [];
  const fn = jest.fn(() => new Promise<T>((resolve) => pending.push(resolve)));
  /** Answers the next lookup; fails when none comes (the answer was taken from the cache). */
  const answer = async (v: T) => {
    const deadline = Date.now() + 1000;
    while (pending.length === 0) {
      if (Date.now() > deadline) throw new Error('the database was not asked');
      await new Promise((r) => setImmediate(r));
    }
    (pending.shift() as (v: T) => void)(v);
  };
  return { fn, answer };
}

describe('the credential revocation cache', () => {
  function build(config = embedded()) {
    const lookup = controlled<boolean>();
    const repo = { isRevoked: lookup.fn } as unknown as RevocationRepository;
    const cache = new RbacCache(config);
    return { lookup, revocations: new CredentialRevocations(config, repo, cache), cache };
  }

  it('keeps an answer: the second question does not reach the database', async () => {
    const { lookup, revocations } = build();
    const first = revocations.isRevoked(PARENT);
    await lookup.answer(false);
    expect(await first).toBe(false);
    expect(await revocations.isRevoked(PARENT)).toBe(false);
    expect(lookup.fn).toHaveBeenCalledTimes(1);
  });

  it('an answer read before a revocation but arriving after its notification is not kept', async () => {
    const { lookup, revocations } = build();
    const slow = revocations.isRevoked(PARENT); // reads "not revoked"…
    revocations.changed(); // …while the revocation commits and is announced
    await lookup.answer(false);
    expect(await slow).toBe(false);
    const next = revocations.isRevoked(PARENT); // asks again, sees the revocation
    await lookup.answer(true);
    expect(await next).toBe(true);
    expect(lookup.fn).toHaveBeenCalledTimes(2);
  });

  it('caches nothing while the notification connection is down (PostgreSQL, not listening)', async () => {
    const config = loadConfig({
      NODE_ENV: 'test',
      STATEHOUSE_STORAGE: 'memory',
      DATABASE_URL: 'postgres://u:p@127.0.0.1:9/db',
    });
    const { lookup, revocations, cache } = build(config);
    expect(cache.enabled).toBe(false);
    for (const v of [false, true, false]) {
      const asked = revocations.isRevoked(PARENT);
      await lookup.answer(v);
      expect(await asked).toBe(v);
    }
    expect(lookup.fn).toHaveBeenCalledTimes(3);
  });
});

describe('the RBAC decision cache', () => {
  it('rules read before an RBAC change but arriving after its invalidation are not kept', async () => {
    const rules = controlled<RuleRow[]>();
    const repo = {
      isInitialised: jest.fn(() => Promise.resolve(true)),
      rulesFor: rules.fn,
    } as unknown as RbacRepository;
    const cache = new RbacCache(embedded());
    const authz = new AuthorizationService(repo, cache, new RecordingAudit());
    const p = { subject: 'svc:x', kind: 'service' as const };
    const grant: RuleRow = {
      id: 'r1',
      effect: 'allow',
      actions: ['unit.read'],
      resources: ['**'],
      workspaces: null,
      role: 'reader',
      permission: 'read',
    };

    const slow = authz.can(p, 'unit.read', { unit: 'a' }); // reads the grant…
    await new Promise((r) => setImmediate(r));
    cache.invalidate(); // …while it is revoked and announced
    await rules.answer([grant]);
    expect(await slow).toBe(true);
    const next = authz.can(p, 'unit.read', { unit: 'a' }); // asks again
    await rules.answer([]);
    expect(await next).toBe(false);
    expect(rules.fn).toHaveBeenCalledTimes(2);
    // and an undisturbed answer is kept
    expect(await authz.can(p, 'unit.read', { unit: 'a' })).toBe(false);
    expect(rules.fn).toHaveBeenCalledTimes(2);
  });
});
