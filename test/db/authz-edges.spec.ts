/**
 * Authorization edges on a real database (embedded PGlite, or PostgreSQL under
 * scripts/with-postgres.sh), RBAC initialised:
 *
 * - unit-wide actions (deleting, undeleting, purging a whole unit) against a deny scoped to one
 *   workspace, soft-deleted workspaces included, decided inside the transaction;
 * - a workspace's details (serial, size, times, lock) only for who may read that workspace, and
 *   refusals and lock conflicts that name nothing the caller cannot read;
 * - old versions guarded like the current state, and restores like writes;
 * - a restore racing a unit delete never leaves a live state under a deleted unit.
 */
import { Principal } from '../../src/common/principal';
import { DomainError } from '../../src/common/errors';
import { Action } from '../../src/rbac/actions';
import { RuleInput } from '../../src/rbac/rbac.service';
import { MemoryBlobStore } from '../../src/storage/memory-blob.store';
import { ON_POSTGRES, openTestDatabase, TestDatabase } from '../support/database';
import {
  ADMIN,
  body,
  buildServices,
  failure,
  readAll,
  Services,
  tfState,
} from '../support/services';

jest.setTimeout(120_000);

const svc = (name: string): Principal => ({
  subject: `svc:${name}`,
  kind: 'service',
  via: 'api-token',
});

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe(`authorization edges (${ON_POSTGRES ? 'PostgreSQL' : 'embedded PGlite'})`, () => {
  let db: TestDatabase;
  let s: Services;
  let n = 0;
  const unique = (label: string): string => `${label}-${++n}`;

  /** A permission with these rules, in a role assigned to `who`. */
  async function grant(who: Principal, rules: RuleInput[]): Promise<void> {
    const name = unique('p');
    await s.rbac.createPermission(ADMIN, name, '', rules);
    await s.rbac.createRole(ADMIN, name, '', [name]);
    await s.rbac.assign(ADMIN, name, { subject: who.subject });
  }

  const allow = (actions: Action[], resources: string[], workspaces?: string[]): RuleInput => ({
    effect: 'allow',
    actions,
    resources,
    workspaces,
  });
  const deny = (actions: Action[], resources: string[], workspaces?: string[]): RuleInput => ({
    effect: 'deny',
    actions,
    resources,
    workspaces,
  });

  const write = (unit: string, workspace: string, text: string) =>
    s.writer.write({ unit, workspace, principal: ADMIN, door: 'api', body: body(text) });

  /** A unit with states in default and prod (and a soft-deleted `old` when asked). */
  async function seedUnit(unit: string, opts: { old?: boolean } = {}): Promise<void> {
    await write(unit, 'default', tfState(1, 'l-default'));
    await write(unit, 'prod', tfState(7, 'l-prod', { endpoint: 'prod.example' }));
    if (opts.old) {
      await write(unit, 'old', tfState(1, 'l-old'));
      await s.writer.deleteState(ADMIN, { unit, workspace: 'old' }, 'api');
    }
  }

  /** What a unit looks like to bootstrap-admin. */
  const adminView = (unit: string) => s.units.getUnit(ADMIN, unit);

  beforeAll(async () => {
    db = await openTestDatabase();
    s = buildServices(db.dataSource, new MemoryBlobStore());
    await s.rbac.init(ADMIN, { subject: 'svc:admin' });
  });
  afterAll(async () => {
    await db?.close();
  });
  afterEach(() => {
    jest.restoreAllMocks();
  });

  describe('a deny scoped to one workspace covers the unit-wide actions (the scenario of the issue)', () => {
    // allowed unit.read/write/delete on team-c/**, denied them on team-c/<app> workspace prod
    const caller = svc('team-c-admin');
    const actions: Action[] = ['unit.read', 'unit.write', 'unit.delete', 'unit.purge'];
    let app: string;

    beforeAll(async () => {
      await grant(caller, [
        allow(actions, ['team-c/**']),
        deny(actions, ['team-c/app-*'], ['prod']),
        deny(actions, ['team-c/app-*'], ['old']),
      ]);
    });
    beforeEach(() => {
      app = unique('team-c/app');
    });

    it('deleting the prod state is refused, and so is deleting the whole unit: prod keeps its state', async () => {
      await seedUnit(app);
      const before = await adminView(app);
      expect(
        (await failure(s.writer.deleteState(caller, { unit: app, workspace: 'prod' }, 'api'))).code,
      ).toBe('forbidden');
      const e = await failure(s.units.deleteUnit(caller, app, 'api'));
      expect(e.code).toBe('forbidden');
      expect(e.message).toBe(
        `svc:team-c-admin may not unit.delete on ${app}: a rule denies it in one of its workspaces (remove that deny, or act on the workspaces one by one)`,
      );
      expect(e.message).not.toContain('prod');
      expect(await adminView(app)).toEqual(before);
      const prod = await s.reader.openCurrent(ADMIN, { unit: app, workspace: 'prod' });
      expect((await readAll(prod.body)).toString()).toBe(
        tfState(7, 'l-prod', { endpoint: 'prod.example' }),
      );
      expect(s.audit.events.filter((ev) => ev.type === 'authz.denied').at(-1)).toMatchObject({
        type: 'authz.denied',
        action: 'unit.delete',
        unit: app,
        workspace: 'prod',
      });
    });

    it('a deny on a soft-deleted workspace counts too', async () => {
      await write(app, 'default', tfState(1, 'l-default'));
      await write(app, 'old', tfState(1, 'l-old'));
      await s.writer.deleteState(ADMIN, { unit: app, workspace: 'old' }, 'api');
      expect((await failure(s.units.deleteUnit(caller, app, 'api'))).code).toBe('forbidden');
      expect((await s.units.getUnit(ADMIN, app)).deletedAt).toBeNull();
    });

    it('undeleting and purging the whole unit are refused too (the deleted prod state stays as it is)', async () => {
      await seedUnit(app);
      await s.units.deleteUnit(ADMIN, app, 'api');
      expect((await failure(s.units.undelete(caller, app, undefined))).code).toBe('forbidden');
      expect((await failure(s.units.getUnit(ADMIN, app))).code).toBe('unit_not_found');
      expect((await failure(s.units.purge(caller, app, undefined))).code).toBe('forbidden');
      const versions = await s.reader.listVersions(
        ADMIN,
        { unit: app, workspace: 'prod' },
        10,
        undefined,
      );
      expect(versions.items).toHaveLength(1);
    });

    it('stopped by the deny, the caller can still act on the workspaces it may, one by one', async () => {
      await seedUnit(app);
      await s.writer.deleteState(caller, { unit: app, workspace: 'default' }, 'api');
      const after = await adminView(app);
      expect(after.workspaces.map((w) => [w.workspace, w.deleted])).toEqual([
        ['default', true],
        ['prod', false],
      ]);
    });

    it('without the deny, the same caller deletes, undeletes and purges the unit', async () => {
      const other = unique('team-c/other');
      await seedUnit(other, { old: true });
      await s.units.deleteUnit(caller, other, 'api');
      await s.units.undelete(caller, other, undefined);
      await s.units.deleteUnit(caller, other, 'api');
      await s.units.purge(caller, other, undefined);
      expect((await failure(s.units.getUnit(ADMIN, other))).code).toBe('unit_not_found');
      expect(
        (
          await failure(
            s.reader.listVersions(ADMIN, { unit: other, workspace: 'prod' }, 10, undefined),
          )
        ).code,
      ).toBe('unit_not_found');
    });

    it('the unit and its workspaces show only the workspaces the caller may read', async () => {
      await seedUnit(app);
      const all = await s.units.getUnit(ADMIN, app);
      expect(all.workspaces.map((w) => w.workspace)).toEqual(['default', 'prod']);
      const seen = await s.units.getUnit(caller, app);
      expect(seen.workspaces.map((w) => w.workspace)).toEqual(['default']);
      expect(JSON.stringify(seen)).not.toContain('prod');
      expect((await s.units.listWorkspaces(caller, app)).map((w) => w.workspace)).toEqual([
        'default',
      ]);
    });

    it('the decision sees the workspaces as they are once the unit row is locked', async () => {
      // prod appears after the check before the transaction, before the unit row is locked:
      // the unit-wide decision must still see it
      await write(app, 'default', tfState(1, 'l-default'));
      const lockUnit = s.repo.lockUnit.bind(s.repo);
      jest.spyOn(s.repo, 'lockUnit').mockImplementation(async (m, name) => {
        const unit = await s.repo.findUnit(m, name);
        if (unit) await s.repo.ensureState(m, unit.id, 'prod');
        return lockUnit(m, name);
      });
      expect((await failure(s.units.deleteUnit(caller, app, 'api'))).code).toBe('forbidden');
      jest.restoreAllMocks();
      expect((await s.units.getUnit(ADMIN, app)).deletedAt).toBeNull();
    });
  });

  describe('a lock conflict names only what the caller may read', () => {
    const deleter = svc('deleter');
    const reader = svc('deleter-reader');
    const outputsReader = svc('team-d-outputs');
    let unit: string;

    beforeAll(async () => {
      // may delete team-d units but not read their prod workspace
      await grant(deleter, [
        allow(['unit.delete', 'unit.read'], ['team-d/**']),
        deny(['unit.read'], ['team-d/**'], ['prod']),
      ]);
      await grant(reader, [allow(['unit.delete', 'unit.read'], ['team-d/**'])]);
      await grant(svc('pipeline'), [allow(['unit.lock'], ['team-d/**'])]);
      await grant(outputsReader, [allow(['outputs.read'], ['team-d/**'])]);
    });
    beforeEach(async () => {
      unit = unique('team-d/app');
      await seedUnit(unit);
      await s.locks.acquire(
        svc('pipeline'),
        { unit, workspace: 'prod' },
        Buffer.from('{"ID":"prod-lock","Who":"ci@runner-7"}'),
        { generateId: false },
      );
    });

    it('to a caller who may not read the locked workspace: no workspace, no holder, no LockInfo', async () => {
      const e = await failure(s.units.deleteUnit(deleter, unit, 'api'));
      expect(e.code).toBe('locked');
      expect(e.message).toBe(
        `unit ${unit} cannot be deleted while one of its workspaces is locked`,
      );
      expect(e.lock).toBeUndefined();
      expect(e.message).not.toMatch(/prod|pipeline/);
    });

    it('to a caller who may read it: the workspace, the holder and its LockInfo', async () => {
      const e = await failure(s.units.deleteUnit(reader, unit, 'api'));
      expect(e.code).toBe('locked');
      expect(e.message).toBe(
        `unit ${unit} cannot be deleted while workspace prod is locked by svc:pipeline`,
      );
      expect(e.lock?.infoJson).toBe('{"ID":"prod-lock","Who":"ci@runner-7"}');
    });

    it('GET /v1/locks lists the lock only to who may read that workspace', async () => {
      const listed = async (p: Principal) =>
        (await s.locks.list(p)).filter((l) => l.unit === unit).map((l) => l.workspace);
      expect(await listed(reader)).toEqual(['prod']);
      expect(await listed(deleter)).toEqual([]);
      // an outputs-only reader sees outputs, not who holds the lock (GET /lock needs unit.read)
      expect(await listed(outputsReader)).toEqual([]);
    });
  });

  describe('old versions need what the current state needs; a restore needs what a write needs', () => {
    const secretReader = svc('reader-but-secret');
    const outputsOnly = svc('outputs-history');
    const restorer = svc('restorer-only');
    const noWrite = svc('restorer-no-write');
    let secret: string;
    let net: string;

    beforeAll(async () => {
      secret = unique('team-a/secret');
      net = unique('shared/net');
      await write(secret, 'default', tfState(1, 'l', { token: 'first' }));
      await write(secret, 'default', tfState(2, 'l', { token: 'second' }));
      await write(
        net,
        'default',
        JSON.stringify({
          version: 4,
          terraform_version: '1.11.4',
          serial: 1,
          lineage: 'net',
          outputs: {
            vpc: { value: 'vpc-1', type: 'string' },
            pw: { value: 'hunter2', type: 'string', sensitive: true },
          },
          resources: [{ mode: 'managed', type: 'x', name: 'y', instances: [] }],
        }),
      );
      await write(net, 'default', tfState(2, 'net', { vpc: 'vpc-2' }));
      // the reader role plus a deny of unit.read on the secret unit
      await s.rbac.assign(ADMIN, 'reader', { subject: secretReader.subject });
      await grant(secretReader, [deny(['unit.read'], [secret])]);
      await grant(outputsOnly, [allow(['outputs.read', 'version.read'], [net])]);
      await grant(restorer, [allow(['version.restore'], ['team-a/**'])]);
      await grant(noWrite, [
        allow(['version.restore', 'unit.read', 'unit.write'], ['team-a/**']),
        deny(['unit.write'], [secret]),
      ]);
    });

    it('an explicit unit.read deny protects every version, the list of versions and the current state', async () => {
      const addr = { unit: secret, workspace: 'default' };
      for (const read of [
        () => s.reader.openVersion(secretReader, addr, 1),
        () => s.reader.openVersion(secretReader, addr, 2),
        () => s.reader.listVersions(secretReader, addr, 10, undefined),
        () => s.reader.openCurrent(secretReader, addr),
        () => s.reader.openForRead(secretReader, addr),
        () => s.reader.outputs(secretReader, addr),
      ]) {
        const e = await failure(read());
        expect(e.code).toBe('forbidden');
        expect(e.message).toMatch(/may not (unit|outputs)\.read/);
      }
    });

    it('outputs-only with version.read: an old version is served as a state of its outputs', async () => {
      const addr = { unit: net, workspace: 'default' };
      const v1 = await s.reader.openVersion(outputsOnly, addr, 1);
      const served = JSON.parse((await readAll(v1.body)).toString()) as Record<string, unknown>;
      expect(served).toMatchObject({ serial: 1, lineage: 'net', resources: [] });
      expect(served.outputs).toEqual({ vpc: { value: 'vpc-1', type: 'string' } });
      expect(v1.synthesized).toBe(true);
      expect(v1.version.version).toBe(1);
      const listed = await s.reader.listVersions(outputsOnly, addr, 10, undefined);
      expect(listed.items.map((v) => v.version)).toEqual([2, 1]);
      expect((await failure(s.reader.openCurrent(outputsOnly, addr))).code).toBe('forbidden');
    });

    it('a restore needs unit.read and unit.write besides version.restore; an explicit write deny holds', async () => {
      const addr = { unit: secret, workspace: 'default' };
      const before = await s.reader.listVersions(ADMIN, addr, 10, undefined);
      const onlyRestore = await failure(s.writer.restore(restorer, addr, 1));
      expect(onlyRestore.message).toMatch(/may not unit\.read/);
      const denied = await failure(s.writer.restore(noWrite, addr, 1));
      expect(denied.message).toMatch(/may not unit\.write/);
      expect(await s.reader.listVersions(ADMIN, addr, 10, undefined)).toEqual(before);
      const ok = unique('team-a/ok');
      await write(ok, 'default', tfState(1));
      await write(ok, 'default', tfState(2));
      const r = await s.writer.restore(noWrite, { unit: ok, workspace: 'default' }, 1);
      expect(r.version).toMatchObject({ version: 3, restoredFrom: 1 });
    });
  });

  describe('a restore racing a unit delete never leaves a live state under a deleted unit', () => {
    /** Live states (with a current version) under a deleted unit. */
    async function orphans(unit: string): Promise<number> {
      const rows = await db.dataSource.query<{ n: number }[]>(
        `SELECT count(*)::int AS n FROM states s JOIN units u ON u.id = s.unit_id
          WHERE u.name = $1 AND u.deleted_at IS NOT NULL AND s.deleted_at IS NULL`,
        [unit],
      );
      return rows[0].n;
    }

    async function twoVersions(): Promise<string> {
      const unit = unique('race/app');
      await write(unit, 'default', tfState(1));
      await write(unit, 'default', tfState(2));
      return unit;
    }

    it('either order, started together: the outcome is one of the two serial orders', async () => {
      for (let i = 0; i < 6; i++) {
        const unit = await twoVersions();
        const addr = { unit, workspace: 'default' };
        const [restored, deleted] = await Promise.allSettled(
          i % 2 === 0
            ? [s.writer.restore(ADMIN, addr, 1), s.units.deleteUnit(ADMIN, unit, 'api')]
            : [
                sleep(1).then(() => s.writer.restore(ADMIN, addr, 1)),
                s.units.deleteUnit(ADMIN, unit, 'api'),
              ],
        );
        expect(deleted.status).toBe('fulfilled');
        if (restored.status === 'rejected') {
          expect((restored.reason as DomainError).code).toBe('unit_deleted');
        }
        expect(await orphans(unit)).toBe(0);
      }
    });

    // Only PostgreSQL runs two transactions at once (the embedded database has one session).
    (ON_POSTGRES ? it : it.skip)(
      'a restore that starts while the delete is uncommitted waits for it, then refuses',
      async () => {
        const unit = await twoVersions();
        let release!: () => void;
        const gate = new Promise<void>((r) => (release = r));
        const softDelete = s.repo.softDeleteUnit.bind(s.repo);
        jest.spyOn(s.repo, 'softDeleteUnit').mockImplementation(async (m, id, who) => {
          await softDelete(m, id, who);
          await gate; // the delete's transaction stays open, its row locks held
        });
        const deleting = s.units.deleteUnit(ADMIN, unit, 'api');
        await waitFor(async () => (await openTransactions()) >= 1); // the unit is soft-deleted
        const restoring = failure(s.writer.restore(ADMIN, { unit, workspace: 'default' }, 1));
        await waitFor(async () => (await lockWaiters()) >= 1); // the restore waits on a row lock
        release();
        await deleting;
        expect((await restoring).code).toBe('unit_deleted');
        expect(await orphans(unit)).toBe(0);
        const versions = await s.reader.listVersions(
          ADMIN,
          { unit, workspace: 'default' },
          10,
          undefined,
        );
        expect(versions.items).toHaveLength(2);
      },
    );

    async function lockWaiters(): Promise<number> {
      const rows = await db.dataSource.query<{ n: number }[]>(
        `SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND wait_event_type = 'Lock'`,
      );
      return rows[0].n;
    }

    /** Sessions inside a transaction that wait for the client (the gated delete). */
    async function openTransactions(): Promise<number> {
      const rows = await db.dataSource.query<{ n: number }[]>(
        `SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND state = 'idle in transaction'`,
      );
      return rows[0].n;
    }

    async function waitFor(cond: () => Promise<boolean>): Promise<void> {
      const deadline = Date.now() + 20_000;
      while (!(await cond())) {
        if (Date.now() > deadline) throw new Error('condition not reached in 20 s');
        await sleep(10);
      }
    }
  });
});
