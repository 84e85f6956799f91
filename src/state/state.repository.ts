import { Injectable, Optional } from '@nestjs/common';
import { ChangeCount, DataChanges } from '../database/data-changes';
import { transaction, TransactionWork } from '../database/transaction';
import { SqlParams, sqlRows } from '../database/sql';
import { JoinedReads } from '../common/joined-reads';
import { pooledRows } from '../database/pooled-statement';
import { DataSource, EntityManager } from 'typeorm';
import { HeldLock } from '../common/errors';
import { DEFAULT_WORKSPACE } from '../common/names';
import type { StateAddress } from './state-types';

export interface UnitRow {
  id: string;
  name: string;
  created_at: Date;
  created_by: string;
  deleted_at: Date | null;
  deleted_by: string | null;
}

export interface StateRow {
  id: string;
  unit_id: string;
  workspace: string;
  current_version_id: string | null;
  next_version: number;
  created_at: Date;
  deleted_at: Date | null;
  deleted_with_unit: boolean;
  last_lock_id: string | null;
  last_lock_principal: string | null;
}

export interface VersionRow {
  id: string;
  state_id: string;
  version: number;
  serial: string | null;
  lineage: string | null;
  terraform_version: string | null;
  encrypted: boolean;
  sha256: string;
  md5: string;
  size: string;
  blob_key: string;
  outputs: Record<string, unknown> | null;
  output_digests: Record<string, string> | null;
  sensitive_outputs: string[] | null;
  output_set_digest: string | null;
  public_output_set_digest: string | null;
  created_at: Date;
  created_by: string;
  door: string;
  restored_from: number | null;
}

/** A version to insert; `outputs` may come already serialised (JSON text). */
export type NewVersion = Omit<VersionRow, 'id' | 'created_at' | 'version' | 'outputs'> & {
  outputs: Record<string, unknown> | string | null;
};

export interface StateSummaryRow extends StateRow {
  current_version: number | null;
  current_serial: string | null;
  current_size: string | null;
  current_created_at: Date | null;
  lock_id: string | null;
  lock_principal: string | null;
}

/** A state's current version and its output digests (`currentOutputs`). */
export interface CurrentOutputsRow {
  unit: string;
  workspace: string;
  version: number;
  output_digests: Record<string, string> | null;
  sensitive_outputs: string[] | null;
}

export interface LiveStateRow {
  unit: string;
  workspace: string;
  size: string;
  md5: string;
  encrypted: boolean;
  created_at: Date;
}

interface LockRow {
  lock_id: string;
  info: string;
  principal: string;
  created_at: Date;
}

export function toHeldLock(row: LockRow): HeldLock {
  return {
    id: row.lock_id,
    infoJson: row.info,
    principal: row.principal,
    createdAt: row.created_at,
  };
}

const VERSION_COLUMNS = `v.id, v.state_id, v.version, v.serial, v.lineage, v.terraform_version,
  v.encrypted, v.sha256, v.md5, v.size, v.blob_key, v.outputs, v.output_digests,
  v.sensitive_outputs, v.output_set_digest, v.public_output_set_digest, v.created_at, v.created_by,
  v.door, v.restored_from`;

/** What a GET of the current state reads of its version: `versionView`'s columns, the blob key. */
export type ServedVersionRow = Pick<
  VersionRow,
  | 'version'
  | 'serial'
  | 'lineage'
  | 'terraform_version'
  | 'encrypted'
  | 'sha256'
  | 'md5'
  | 'size'
  | 'blob_key'
  | 'created_at'
  | 'created_by'
  | 'door'
  | 'restored_from'
>;

/**
 * The current version of a live state of a live unit, only the columns a GET serves: none of
 * the outputs (JSON the GET would parse and never use). No row when there is none to serve.
 */
const SERVED_CURRENT = `SELECT v.version, v.serial, v.lineage, v.terraform_version, v.encrypted,
       v.sha256, v.md5, v.size, v.blob_key, v.created_at, v.created_by, v.door, v.restored_from
  FROM units u
  JOIN states s ON s.unit_id = u.id AND s.workspace = $2 AND s.deleted_at IS NULL
  JOIN versions v ON v.id = s.current_version_id
 WHERE u.name = $1 AND u.deleted_at IS NULL`;

/** `queryCurrent`'s statement: the unit, and its workspace's current version if any. */
const CURRENT = `SELECT u.id AS unit_id, u.deleted_at AS unit_deleted_at, ${VERSION_COLUMNS}
         FROM units u
         LEFT JOIN states s ON s.unit_id = u.id AND s.workspace = $2 AND s.deleted_at IS NULL
         LEFT JOIN versions v ON v.id = s.current_version_id
        WHERE u.name = $1`;

export interface CurrentRows {
  unit: UnitRow | undefined;
  version: VersionRow | undefined;
}

/**
 * Every table `queryCurrent` reads. On the embedded database `findCurrent` keeps its answer
 * while no statement naming one of these (or not understood) has been queued since it was read
 * (`DataChanges.watch`): a query of another table added to it, or another kept read, adds its
 * tables here, or its answers go stale when that table changes.
 */
export const CURRENT_READ_TABLES = ['units', 'states', 'versions'] as const;

/** Cached current versions: at most this many, of at most this many bytes of states together. */
const CURRENT_CACHE_ENTRIES = 10_000;
const CURRENT_CACHE_STATE_BYTES = 32 * 1024 * 1024;

/** The INSERT of a version, its parameters `versionParams` (state id first). */
const INSERT_VERSION = `INSERT INTO versions (state_id, version, serial, lineage, terraform_version,
                             encrypted, sha256, md5, size, blob_key, outputs, created_by, door,
                             restored_from, output_digests, sensitive_outputs, output_set_digest,
                             public_output_set_digest)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)`;

function versionParams(state: StateRow, v: NewVersion): unknown[] {
  return [
    state.id,
    state.next_version,
    v.serial,
    v.lineage,
    v.terraform_version,
    v.encrypted,
    v.sha256,
    v.md5,
    v.size,
    v.blob_key,
    v.outputs === null || typeof v.outputs === 'string' ? v.outputs : JSON.stringify(v.outputs),
    v.created_by,
    v.door,
    v.restored_from,
    v.output_digests === null ? null : JSON.stringify(v.output_digests),
    v.sensitive_outputs,
    v.output_set_digest,
    v.public_output_set_digest,
  ];
}

/** `findCurrent` answers, each valid while the data-change count it was read at holds. */
class CurrentCache {
  hits = 0;
  misses = 0;
  private readonly entries = new Map<string, { changes: number; rows: CurrentRows }>();
  private bytes = 0;

  get(unit: string, workspace: string, changes: number): CurrentRows | undefined {
    const entry = this.entries.get(key(unit, workspace));
    return entry?.changes === changes ? entry.rows : undefined;
  }

  put(unit: string, workspace: string, changes: number, rows: CurrentRows): CurrentRows {
    const size = rows.version ? Number(rows.version.size) : 0;
    if (size > CURRENT_CACHE_STATE_BYTES / 4) return rows;
    if (
      this.bytes + size > CURRENT_CACHE_STATE_BYTES ||
      this.entries.size >= CURRENT_CACHE_ENTRIES
    ) {
      this.entries.clear();
      this.bytes = 0;
    }
    const k = key(unit, workspace);
    const old = this.entries.get(k);
    if (old?.rows.version) this.bytes -= Number(old.rows.version.size);
    this.entries.set(k, { changes, rows: deepFreeze(rows) });
    this.bytes += size;
    return rows;
  }
}

/** Unit names and workspace names hold no NUL (`assertUnitName`, `assertWorkspace`). */
const key = (unit: string, workspace: string) => `${unit}\0${workspace}`;

function deepFreeze<T>(value: T): T {
  if (
    value !== null &&
    typeof value === 'object' &&
    !ArrayBuffer.isView(value) &&
    !Object.isFrozen(value)
  ) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

/**
 * SQL for units, states (a unit's workspaces) and versions. Methods that take an
 * `EntityManager` run inside the caller's transaction; on the embedded database (one
 * connection) nothing may query outside that manager while the transaction is open.
 */
@Injectable()
export class StateRepository {
  private readonly currentCache = new CurrentCache();
  /** On PostgreSQL: GETs of one state arriving together share their read (`JoinedReads`). */
  readonly servedReads = new JoinedReads<ServedVersionRow | undefined>();
  /** Absent where nothing is counted (tests that build the repository alone). */
  private readonly currentChanges: ChangeCount | undefined;

  constructor(
    private readonly db: DataSource,
    @Optional() changes?: DataChanges,
  ) {
    this.currentChanges = changes?.watch(CURRENT_READ_TABLES);
  }

  /**
   * Runs `work` in a READ COMMITTED transaction. A deadlock or serialization failure rolls the
   * whole transaction back, so it is retried (a few times, with jitter) instead of failing the
   * request; every statement takes row locks in the same order (unit, state, lock) to make
   * that rare.
   */
  async transaction<T>(work: TransactionWork<T>): Promise<T> {
    return transaction(this.db, work);
  }

  get manager(): EntityManager {
    return this.db.manager;
  }

  /** A unit by its id (the TFE door's workspace ids carry it), deleted or not. */
  async findUnitById(id: string): Promise<UnitRow | undefined> {
    if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(id))
      return undefined;
    const rows = await sqlRows<UnitRow>(this.db.manager, 'SELECT * FROM units WHERE id = $1', [id]);
    return rows[0];
  }

  async findUnit(m: EntityManager, name: string): Promise<UnitRow | undefined> {
    const rows = await sqlRows<UnitRow>(m, 'SELECT * FROM units WHERE name = $1', [name]);
    return rows[0];
  }

  /**
   * The unit, key-share-locked until the transaction ends: a unit delete (`lockUnit`) waits for
   * us, or we wait for it and read the unit as it left it (deleted).
   */
  async shareUnit(m: EntityManager, name: string): Promise<UnitRow | undefined> {
    const rows = await sqlRows<UnitRow>(m, 'SELECT * FROM units WHERE name = $1 FOR KEY SHARE', [
      name,
    ]);
    return rows[0];
  }

  /**
   * The live unit, key-share-locked until the transaction ends so a concurrent delete waits for
   * us (and we for it); another writer may still revive it meanwhile (no key changes). Creates
   * the unit when absent, and revives it when soft-deleted: a door that locks or writes a unit
   * that does not exist creates it. Its deleted workspaces stay deleted (and restorable); only
   * the one being used comes back, by being written.
   */
  async ensureUnit(
    m: EntityManager,
    name: string,
    principal: string,
  ): Promise<{ unit: UnitRow; created: boolean; revived: boolean }> {
    const live = await sqlRows<UnitRow>(
      m,
      'SELECT * FROM units WHERE name = $1 AND deleted_at IS NULL FOR KEY SHARE',
      [name],
    );
    if (live.length > 0) return { unit: live[0], created: false, revived: false };
    // Insert, or revive a soft-deleted unit; the row lock it takes lasts until commit.
    const rows = await sqlRows<UnitRow & { inserted: boolean }>(
      m,
      `INSERT INTO units (name, created_by) VALUES ($1, $2)
       ON CONFLICT (name) DO UPDATE SET deleted_at = NULL, deleted_by = NULL
       RETURNING *, (xmax = 0) AS inserted`,
      [name, principal],
    );
    const { inserted, ...unit } = rows[0];
    // `default` always exists, whichever workspace brought the unit into being.
    if (inserted) await this.ensureState(m, unit.id, DEFAULT_WORKSPACE);
    return { unit, created: inserted, revived: !inserted };
  }

  /** Creates a unit; undefined when the name is taken (live or soft-deleted). */
  async insertUnit(
    m: EntityManager,
    name: string,
    principal: string,
  ): Promise<UnitRow | undefined> {
    const rows = await sqlRows<UnitRow>(
      m,
      `INSERT INTO units (name, created_by) VALUES ($1, $2)
       ON CONFLICT (name) DO NOTHING RETURNING *`,
      [name, principal],
    );
    return rows[0];
  }

  /** The state row of (unit, workspace), created when absent. */
  async ensureState(m: EntityManager, unitId: string, workspace: string): Promise<StateRow> {
    await m.query(
      `INSERT INTO states (unit_id, workspace) VALUES ($1, $2)
       ON CONFLICT (unit_id, workspace) DO NOTHING`,
      [unitId, workspace],
    );
    const rows = await sqlRows<StateRow>(
      m,
      'SELECT * FROM states WHERE unit_id = $1 AND workspace = $2',
      [unitId, workspace],
    );
    return rows[0];
  }

  async findState(
    m: EntityManager,
    unitId: string,
    workspace: string,
  ): Promise<StateRow | undefined> {
    const rows = await sqlRows<StateRow>(
      m,
      'SELECT * FROM states WHERE unit_id = $1 AND workspace = $2',
      [unitId, workspace],
    );
    return rows[0];
  }

  /**
   * Locks the state row for the rest of the transaction. Writers, restores, deletes and lock
   * acquisition all take it, so a version commit never interleaves with another change of the
   * same state: each sees the pointer the previous one left.
   */
  /**
   * `ensureState` and then `lockStateRow`, in one statement when the state row exists (a write
   * to a state written before): its row locked for update, created first when absent. A
   * concurrent creator's insert makes ours do nothing (it waits for that transaction), and the
   * second look then finds and locks its row.
   */
  async ensureLockedState(m: EntityManager, unitId: string, workspace: string): Promise<StateRow> {
    const find = () =>
      sqlRows<StateRow>(
        m,
        'SELECT * FROM states WHERE unit_id = $1 AND workspace = $2 FOR NO KEY UPDATE',
        [unitId, workspace],
      );
    const found = await find();
    if (found.length > 0) return found[0];
    await this.ensureState(m, unitId, workspace);
    return (await find())[0];
  }

  /**
   * What a write takes first, in one statement when the unit is live and the state row exists
   * (a write to a state written before): the unit key-share-locked and then the state row locked
   * for update, as `ensureUnit` and `ensureLockedState` do, in that order (the order of FROM).
   * Otherwise those two, which create what is missing (and revive a deleted unit).
   *
   * A key-share lock is what keeps a delete (`lockUnit`, FOR UPDATE) waiting for the write, and
   * the write waiting for a delete; unlike a share lock it does not conflict with the reviving
   * `ensureUnit` of another writer, which updates no key.
   */
  async ensureLockedWriteTarget(
    m: EntityManager,
    addr: StateAddress,
    principal: string,
  ): Promise<StateRow> {
    const rows = await sqlRows<StateRow>(
      m,
      `SELECT s.* FROM units u JOIN states s ON s.unit_id = u.id
        WHERE u.name = $1 AND u.deleted_at IS NULL AND s.workspace = $2
        FOR KEY SHARE OF u FOR NO KEY UPDATE OF s`,
      [addr.unit, addr.workspace],
    );
    if (rows.length > 0) return rows[0];
    const { unit } = await this.ensureUnit(m, addr.unit, principal);
    return this.ensureLockedState(m, unit.id, addr.workspace);
  }

  async lockStateRow(m: EntityManager, stateId: string): Promise<StateRow> {
    const rows = await sqlRows<StateRow>(
      m,
      'SELECT * FROM states WHERE id = $1 FOR NO KEY UPDATE',
      [stateId],
    );
    return rows[0];
  }

  /** Share-locks the state row: lock acquisition waits for an in-flight version commit. */
  async shareStateRow(m: EntityManager, stateId: string): Promise<void> {
    await m.query('SELECT 1 FROM states WHERE id = $1 FOR SHARE', [stateId]);
  }

  /** The lock its holder just released, so that holder's retried release still succeeds. */
  async recordReleasedLock(
    m: EntityManager,
    stateId: string,
    lockId: string,
    principal: string,
  ): Promise<void> {
    await m.query('UPDATE states SET last_lock_id = $2, last_lock_principal = $3 WHERE id = $1', [
      stateId,
      lockId,
      principal,
    ]);
  }

  /*
   * Fragments of the lock fast paths' single statements, which `LockRepository` composes (see
   * `LocksService`): this repository writes the SQL of its own tables, the lock repository that
   * of `locks`, the audit repository that of `audit_events`.
   */

  /**
   * A CTE body naming the state of a LOCK (`id`) when its unit is live and its row exists,
   * key-share-locking the unit and then share-locking the state row as `ensureUnit` and
   * `shareStateRow` do, in that order (the order of FROM): a concurrent unit delete waits for
   * the acquire or the other way round, and the acquire waits for an in-flight version commit
   * of the same state.
   */
  sharedStateOfLiveUnit(params: SqlParams, addr: StateAddress): string {
    return `SELECT s.id FROM units u JOIN states s ON s.unit_id = u.id
             WHERE u.name = ${params.add(addr.unit, 'text')} AND u.deleted_at IS NULL
               AND s.workspace = ${params.add(addr.workspace, 'text')}
               FOR KEY SHARE OF u FOR SHARE OF s`;
  }

  /**
   * A subquery naming the state (`id`) of a unit, live or not (as `findUnit` finds it),
   * locking nothing: what a read of the held lock looks at.
   */
  stateOf(params: SqlParams, addr: StateAddress): string {
    return `SELECT s.id FROM units u JOIN states s ON s.unit_id = u.id
             WHERE u.name = ${params.add(addr.unit, 'text')}
               AND s.workspace = ${params.add(addr.workspace, 'text')}`;
  }

  /**
   * A CTE body naming the state of a release (`id`), its row locked for update as
   * `lockStateRow` does (the unit, as for `findUnit`, is neither locked nor required live).
   */
  updatableStateOf(params: SqlParams, addr: StateAddress): string {
    return `SELECT s.id FROM units u JOIN states s ON s.unit_id = u.id
             WHERE u.name = ${params.add(addr.unit, 'text')}
               AND s.workspace = ${params.add(addr.workspace, 'text')}
               FOR NO KEY UPDATE OF s`;
  }

  /** `recordReleasedLock` as a CTE body, for the states named by `state_id` in the CTE `from`. */
  releasedLockRecord(params: SqlParams, from: string, lockId: string, principal: string): string {
    return `UPDATE states SET last_lock_id = ${params.add(lockId, 'text')},
                              last_lock_principal = ${params.add(principal, 'text')}
             WHERE id IN (SELECT state_id FROM ${from})`;
  }

  /**
   * Every workspace of the unit, soft-deleted ones included. Under the unit's row lock
   * (`lockUnit`) the list cannot grow: a new state row waits for that lock (its foreign key).
   */
  async workspacesOf(m: EntityManager, unitId: string): Promise<string[]> {
    const rows = await sqlRows<{ workspace: string }>(
      m,
      'SELECT workspace FROM states WHERE unit_id = $1 ORDER BY workspace',
      [unitId],
    );
    return rows.map((r) => r.workspace);
  }

  /**
   * What a write checks once it holds the state row (`ensureLockedWriteTarget`), in one
   * statement: the lock held on the state (as `LockRepository.holderOf` reads it) and the version
   * `versionId` (its current one, as `findVersionById`; none when null). It must be a statement
   * of its own after the row lock, not part of the locking SELECT: under READ COMMITTED a
   * statement reads the snapshot taken when it began, and an acquire (which share-locks the
   * state row) may commit its lock while that SELECT waits for the row: only a statement that
   * begins once the row is ours sees that lock. Versions are never changed once inserted.
   */
  async heldLockAndVersion(
    m: EntityManager,
    stateId: string,
    versionId: string | null,
  ): Promise<{ holder: HeldLock | null; version: VersionRow | null }> {
    const rows = await sqlRows<
      VersionRow & {
        lock_id: string | null;
        lock_info: string;
        lock_principal: string;
        lock_created_at: Date;
      }
    >(
      m,
      `SELECT l.lock_id, l.info AS lock_info, l.principal AS lock_principal,
              l.created_at AS lock_created_at, ${VERSION_COLUMNS}
         FROM (SELECT $1::uuid AS state_id) t
         LEFT JOIN locks l ON l.state_id = t.state_id
         LEFT JOIN versions v ON v.id = $2::uuid`,
      [stateId, versionId],
    );
    const { lock_id, lock_info, lock_principal, lock_created_at, ...version } = rows[0];
    return {
      holder:
        lock_id === null
          ? null
          : toHeldLock({
              lock_id,
              info: lock_info,
              principal: lock_principal,
              created_at: lock_created_at,
            }),
      version: version.id === null ? null : version,
    };
  }

  async findVersionById(m: EntityManager, id: string): Promise<VersionRow | undefined> {
    const rows = await sqlRows<VersionRow>(
      m,
      `SELECT ${VERSION_COLUMNS} FROM versions v WHERE v.id = $1`,
      [id],
    );
    return rows[0];
  }

  async findVersion(
    m: EntityManager,
    stateId: string,
    version: number,
  ): Promise<VersionRow | undefined> {
    const rows = await sqlRows<VersionRow>(
      m,
      `SELECT ${VERSION_COLUMNS} FROM versions v WHERE v.state_id = $1 AND v.version = $2`,
      [stateId, version],
    );
    return rows[0];
  }

  /**
   * The current version of a live state of a live unit, in one read (what GET serves): the unit
   * and its workspace's current version. On the embedded database a read outside a
   * transaction is answered from memory while no statement that may change the tables it reads
   * (`CURRENT_READ_TABLES`) has been queued since it was read (`DataChanges`); the rows handed
   * out are then shared, so they are frozen.
   */
  async findCurrent(m: EntityManager, unitName: string, workspace: string): Promise<CurrentRows> {
    // Counted before the query: a change queued meanwhile makes what it returns stale at once.
    const changes = m === this.db.manager ? this.currentChanges?.count() : undefined;
    if (changes === undefined) return this.queryCurrent(m, unitName, workspace);
    const cached = this.currentCache.get(unitName, workspace, changes);
    if (cached) {
      this.currentCache.hits++;
      return cached;
    }
    this.currentCache.misses++;
    const found = await this.queryCurrent(m, unitName, workspace);
    return this.currentCache.put(unitName, workspace, changes, found);
  }

  /**
   * What a GET serves of the current version (`findCurrent`'s, its outputs left out), outside
   * any transaction. On the embedded database it is `findCurrent`'s answer, kept in memory; on
   * PostgreSQL it is asked of the database for every request (another replica may have written
   * since), as one named statement on the pool itself that reads no more columns than are
   * served, shared by the requests for the same state that arrived before it was sent.
   */
  async findServed(unitName: string, workspace: string): Promise<ServedVersionRow | undefined> {
    if (this.currentChanges?.count() !== undefined) {
      return (await this.findCurrent(this.db.manager, unitName, workspace)).version;
    }
    // The name's length first: no two (unit, workspace) pairs share a key.
    return await this.servedReads.read(`${unitName.length}:${unitName}${workspace}`, async () => {
      const rows = await pooledRows<ServedVersionRow>(this.db, SERVED_CURRENT, [
        unitName,
        workspace,
      ]);
      return rows[0];
    });
  }

  /** How `findCurrent` was answered on the embedded database: from memory, or by a query. */
  currentCacheCounts(): { hits: number; misses: number } {
    return { hits: this.currentCache.hits, misses: this.currentCache.misses };
  }

  private async queryCurrent(
    m: EntityManager,
    unitName: string,
    workspace: string,
  ): Promise<CurrentRows> {
    type Row = VersionRow & { unit_id: string; unit_deleted_at: Date | null };
    // Outside a transaction on PostgreSQL (where nothing is kept: no change count), one named
    // statement on the pool itself, without a TypeORM QueryRunner (`pooledRows`); the embedded
    // database's kept reads stay as they were.
    const rows =
      m === this.db.manager && this.currentChanges?.count() === undefined
        ? await pooledRows<Row>(this.db, CURRENT, [unitName, workspace])
        : await sqlRows<Row>(m, CURRENT, [unitName, workspace]);
    if (rows.length === 0) return { unit: undefined, version: undefined };
    const row = rows[0];
    const unit = { id: row.unit_id, name: unitName, deleted_at: row.unit_deleted_at } as UnitRow;
    if (row.unit_deleted_at !== null || row.id === null) return { unit, version: undefined };
    return { unit, version: row };
  }

  /**
   * Inserts the next version of the state and makes it the state's current one, in one
   * statement (the caller holds the state row lock): the state row's update and its foreign key
   * to the new version are checked at its end. `alongside`: a CTE body run in the same
   * statement (its parameters numbered after the version's).
   */
  async insertCurrentVersion(
    m: EntityManager,
    state: StateRow,
    v: NewVersion,
    alongside?: (params: SqlParams, when: string) => string,
  ): Promise<VersionRow> {
    const params = new SqlParams();
    params.values.push(...versionParams(state, v));
    // `alongside` (a write's audit row, the audit module's insert) commits with the version.
    const also = alongside ? `,\n            alongside AS (${alongside(params, 'true')})` : '';
    const rows = await sqlRows<VersionRow>(
      m,
      `WITH v AS (${INSERT_VERSION} RETURNING *),
            s AS (UPDATE states SET current_version_id = (SELECT id FROM v),
                         next_version = next_version + 1, deleted_at = NULL,
                         deleted_with_unit = false
                   WHERE id = $1)${also}
       SELECT * FROM v`,
      params.values,
    );
    return rows[0];
  }

  /**
   * Retention: drops versions older than the newest `keep` of the state, never the current one.
   * Returns blob keys that no remaining version refers to (to delete after commit).
   */
  async pruneVersions(
    m: EntityManager,
    stateId: string,
    newestVersion: number,
    keep: number,
  ): Promise<string[]> {
    const dropped = await sqlRows<{ blob_key: string }>(
      m,
      `DELETE FROM versions v USING states s
        WHERE v.state_id = $1 AND s.id = v.state_id AND v.version <= $2
          AND v.id IS DISTINCT FROM s.current_version_id
        RETURNING v.blob_key`,
      [stateId, newestVersion - keep],
    );
    return this.unreferenced(
      m,
      dropped.map((r) => r.blob_key),
    );
  }

  /** Of these blob keys, those no version refers to any more (reference counting). */
  async unreferenced(m: EntityManager, keys: string[]): Promise<string[]> {
    if (keys.length === 0) return [];
    const unique = [...new Set(keys)];
    const still = await sqlRows<{ blob_key: string }>(
      m,
      'SELECT DISTINCT blob_key FROM versions WHERE blob_key = ANY($1::text[])',
      [unique],
    );
    const kept = new Set(still.map((r) => r.blob_key));
    return unique.filter((k) => !kept.has(k));
  }

  async softDeleteState(m: EntityManager, stateId: string): Promise<void> {
    await m.query('UPDATE states SET deleted_at = now(), deleted_with_unit = false WHERE id = $1', [
      stateId,
    ]);
  }

  async undeleteState(m: EntityManager, stateId: string): Promise<void> {
    await m.query('UPDATE states SET deleted_at = NULL, deleted_with_unit = false WHERE id = $1', [
      stateId,
    ]);
  }

  /** Locks the unit row for a delete, undelete or purge. */
  async lockUnit(m: EntityManager, name: string): Promise<UnitRow | undefined> {
    const rows = await sqlRows<UnitRow>(m, 'SELECT * FROM units WHERE name = $1 FOR UPDATE', [
      name,
    ]);
    return rows[0];
  }

  async softDeleteUnit(m: EntityManager, unitId: string, principal: string): Promise<void> {
    await m.query(
      `UPDATE states SET deleted_at = now(), deleted_with_unit = true
        WHERE unit_id = $1 AND deleted_at IS NULL`,
      [unitId],
    );
    await m.query('UPDATE units SET deleted_at = now(), deleted_by = $2 WHERE id = $1', [
      unitId,
      principal,
    ]);
  }

  async undeleteUnit(m: EntityManager, unitId: string): Promise<void> {
    await m.query('UPDATE units SET deleted_at = NULL, deleted_by = NULL WHERE id = $1', [unitId]);
    await m.query(
      `UPDATE states SET deleted_at = NULL, deleted_with_unit = false
        WHERE unit_id = $1 AND deleted_with_unit`,
      [unitId],
    );
  }

  /** Removes a unit and everything under it; returns blob keys to delete after commit. */
  async purgeUnit(m: EntityManager, unitId: string): Promise<string[]> {
    const keys = await sqlRows<{ blob_key: string }>(
      m,
      `SELECT DISTINCT v.blob_key FROM versions v JOIN states s ON s.id = v.state_id
        WHERE s.unit_id = $1`,
      [unitId],
    );
    await m.query('DELETE FROM units WHERE id = $1', [unitId]);
    return this.unreferenced(
      m,
      keys.map((r) => r.blob_key),
    );
  }

  /** Removes one state (workspace) and its versions; returns blob keys to delete after commit. */
  async purgeState(m: EntityManager, stateId: string): Promise<string[]> {
    const keys = await sqlRows<{ blob_key: string }>(
      m,
      'SELECT DISTINCT blob_key FROM versions WHERE state_id = $1',
      [stateId],
    );
    await m.query('DELETE FROM states WHERE id = $1', [stateId]);
    return this.unreferenced(
      m,
      keys.map((r) => r.blob_key),
    );
  }

  /** Live units by name, `prefix` filtered, after `cursor` (keyset pagination). */
  async listUnits(prefix: string, after: string | undefined, limit: number): Promise<UnitRow[]> {
    return await sqlRows<UnitRow>(
      this.db.manager,
      `SELECT * FROM units
        WHERE deleted_at IS NULL AND left(name, length($1)) = $1 AND ($2::text IS NULL OR name > $2)
        ORDER BY name LIMIT $3`,
      [prefix, after ?? null, limit],
    );
  }

  /** Every live state with a current version, for listings of the S3 door. */
  async listLiveStates(): Promise<LiveStateRow[]> {
    return sqlRows<LiveStateRow>(
      this.db.manager,
      `SELECT u.name AS unit, s.workspace, v.size, v.md5, v.encrypted, v.created_at
         FROM states s
         JOIN units u ON u.id = s.unit_id
         JOIN versions v ON v.id = s.current_version_id
        WHERE u.deleted_at IS NULL AND s.deleted_at IS NULL`,
    );
  }

  async listStates(unitId: string): Promise<StateSummaryRow[]> {
    // The join on `locks` stays (a read only): one statement gives each listed state and its lock
    // from the same snapshot, which two separate queries outside a transaction would not.
    return await sqlRows<StateSummaryRow>(
      this.db.manager,
      `SELECT s.*, v.version AS current_version, v.serial AS current_serial,
              v.size AS current_size, v.created_at AS current_created_at,
              l.lock_id, l.principal AS lock_principal
         FROM states s
         LEFT JOIN versions v ON v.id = s.current_version_id
         LEFT JOIN locks l ON l.state_id = s.id
        WHERE s.unit_id = $1
        ORDER BY s.workspace`,
      [unitId],
    );
  }

  async listVersions(
    stateId: string,
    before: number | undefined,
    limit: number,
  ): Promise<VersionRow[]> {
    return await sqlRows<VersionRow>(
      this.db.manager,
      `SELECT ${VERSION_COLUMNS} FROM versions v
        WHERE v.state_id = $1 AND ($2::int IS NULL OR v.version < $2)
        ORDER BY v.version DESC LIMIT $3`,
      [stateId, before ?? null, limit],
    );
  }

  // ------------------------------------------------------------------ read-only queries for other modules
  //
  // Named, read-only queries of units, states and versions for the modules that may not touch
  // those tables themselves (the graph's staleness). Each is one statement on `this.db.manager`,
  // outside any transaction, and writes nothing.

  /** Whether a live (not soft-deleted) unit of that name exists. Read-only. */
  async unitExists(name: string): Promise<boolean> {
    const rows = await sqlRows<{ one: number }>(
      this.db.manager,
      'SELECT 1 AS one FROM units WHERE name = $1 AND deleted_at IS NULL',
      [name],
    );
    return rows.length > 0;
  }

  /**
   * Current versions and output digests of these states (absent: no live unit, live state or
   * current version). Read-only, one statement for all of them.
   */
  async currentOutputs(
    states: { unit: string; workspace: string }[],
  ): Promise<CurrentOutputsRow[]> {
    if (states.length === 0) return [];
    return sqlRows<CurrentOutputsRow>(
      this.db.manager,
      // One index lookup per node (LATERAL): a plain join lets the planner, without table
      // statistics (the embedded database has no autovacuum), join every node to every state
      // of the workspace first — seconds instead of milliseconds at 2,000 units.
      `SELECT n.unit, n.workspace, v.version, v.output_digests, v.sensitive_outputs
         FROM unnest($1::text[], $2::text[]) AS n(unit, workspace)
         CROSS JOIN LATERAL (
           SELECT s.current_version_id
             FROM units u
             JOIN states s ON s.unit_id = u.id AND s.workspace = n.workspace AND s.deleted_at IS NULL
            WHERE u.name = n.unit AND u.deleted_at IS NULL
            OFFSET 0
         ) cur
         JOIN versions v ON v.id = cur.current_version_id`,
      [states.map((n) => n.unit), states.map((n) => n.workspace)],
    );
  }

  /**
   * For each item: the first version of the state after `after` in which one of the outputs
   * in `recorded` (output name → the digest a reader saw; null: never seen) differs — when
   * `excluded`, not counting an output sensitive in that version. Null where no kept version
   * does. Read-only, one statement for all of them (the graph's `staleSince`).
   */
  async firstChangedVersions(
    items: {
      state: { unit: string; workspace: string };
      after: number;
      recorded: Record<string, string | null>;
      excluded: boolean;
    }[],
  ): Promise<(number | null)[]> {
    if (items.length === 0) return [];
    const rows = await sqlRows<{ i: number; since: number | null }>(
      this.db.manager,
      `SELECT x.i,
              (SELECT min(v.version)
                 FROM units u
                 JOIN states s ON s.unit_id = u.id AND s.workspace = x.workspace
                 JOIN versions v ON v.state_id = s.id AND v.version > x.after
                WHERE u.name = x.unit
                  AND EXISTS (SELECT 1 FROM jsonb_each_text(x.recorded) r
                               WHERE (v.output_digests ->> r.key) IS DISTINCT FROM r.value
                                 AND NOT (x.excluded AND r.key = ANY(coalesce(v.sensitive_outputs, '{}'))))
              ) AS since
         FROM jsonb_to_recordset($1::jsonb)
              AS x(i int, unit text, workspace text, after int, recorded jsonb, excluded boolean)`,
      [
        JSON.stringify(
          items.map((e, i) => ({
            i,
            unit: e.state.unit,
            workspace: e.state.workspace,
            after: e.after,
            recorded: e.recorded,
            excluded: e.excluded,
          })),
        ),
      ],
    );
    const out: (number | null)[] = items.map(() => null);
    for (const r of rows) out[r.i] = r.since === null ? null : Number(r.since);
    return out;
  }
}
