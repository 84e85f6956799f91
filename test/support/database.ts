import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { createDataSource } from '../../src/database/data-source';
import { ENTITIES } from '../../src/entities';
import { migrateUnderLock } from '../../src/database/migrator';
import { spawn } from 'node:child_process';
import { pgliteTemplateDir, ROOT } from './paths';
import { stopChild } from './processes';

/** Which database the suites run on: PostgreSQL when DATABASE_URL is set, else embedded. */
export const ON_POSTGRES = process.env.DATABASE_URL !== undefined;
/** Which database the suites run on, for their titles. */
export const DATABASE_KIND = ON_POSTGRES ? 'PostgreSQL' : 'embedded PGlite';

/** A fresh data directory (with a migrated embedded database in it, copied from the template). */
export function freshDataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'statehouse-test-'));
  if (!ON_POSTGRES) cpSync(pgliteTemplateDir(), dir, { recursive: true });
  return dir;
}

/**
 * A new, empty database on the PostgreSQL server of `admin` (default DATABASE_URL); dropped by
 * the returned function.
 */
export async function freshPostgresDatabase(
  admin: string = process.env.DATABASE_URL as string,
): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `sh_test_${process.pid}_${Math.random().toString(36).slice(2, 10)}`;
  const client = new Client({ connectionString: admin });
  await client.connect();
  await client.query(`CREATE DATABASE ${name}`);
  await client.end();
  const url = new URL(admin);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const c = new Client({ connectionString: admin });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}

/** Environment for a server (or app) on a fresh database, and how to clean it up. */
export async function freshServerEnv(): Promise<{
  env: Record<string, string>;
  dataDir: string;
  cleanup: () => Promise<void>;
}> {
  const dataDir = freshDataDir();
  if (!ON_POSTGRES) {
    return {
      env: { STATEHOUSE_DATA_DIR: dataDir },
      dataDir,
      cleanup: () => Promise.resolve(rmSync(dataDir, { recursive: true, force: true })),
    };
  }
  const db = await freshPostgresDatabase();
  return {
    env: { STATEHOUSE_DATA_DIR: dataDir, DATABASE_URL: db.url },
    dataDir,
    cleanup: async () => {
      await db.drop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** A maker of fresh server environments for the suite (freshServerEnv); all removed after it. */
export function freshServerEnvs(): () => ReturnType<typeof freshServerEnv> {
  const cleanups: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const c of cleanups) await c();
  });
  return async () => {
    const f = await freshServerEnv();
    cleanups.push(f.cleanup);
    return f;
  };
}

export interface TestDatabase {
  dataSource: DataSource;
  /** A second data source on the same database (PostgreSQL only: PGlite has one session). */
  connectAnother?: () => Promise<DataSource>;
  close: () => Promise<void>;
}

/** A migrated database for repository and service tests. */
export async function openTestDatabase(): Promise<TestDatabase> {
  if (ON_POSTGRES) {
    const db = await freshPostgresDatabase();
    const open = async (): Promise<DataSource> => {
      const ds = createDataSource({ url: db.url, poolSize: 10 }, ENTITIES);
      await ds.initialize();
      return ds;
    };
    const dataSource = await open();
    await migrateUnderLock(dataSource);
    const others: DataSource[] = [];
    return {
      dataSource,
      connectAnother: async () => {
        const ds = await open();
        others.push(ds);
        return ds;
      },
      close: async () => {
        for (const ds of [dataSource, ...others]) if (ds.isInitialized) await ds.destroy();
        await db.drop();
      },
    };
  }
  const dir = freshDataDir();
  const host = await hostEmbedded(dir);
  const dataSource = createDataSource({ socketDir: host.socketDir, poolSize: 1 }, ENTITIES);
  await dataSource.initialize();
  await migrateUnderLock(dataSource);
  return {
    dataSource,
    close: async () => {
      if (dataSource.isInitialized) await dataSource.destroy();
      await host.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The suite's database: opened (migrated) before its tests, then handed to `ready`; closed after
 * them, once `done` has run.
 */
export function onTestDatabase(
  ready: (db: TestDatabase) => void | Promise<void>,
  done?: () => Promise<void>,
): void {
  let db: TestDatabase | undefined;
  beforeAll(async () => {
    db = await openTestDatabase();
    await ready(db);
  });
  afterAll(async () => {
    await done?.();
    await db?.close();
  });
}

/**
 * Terminates the sessions of the database at `url` that are LISTENing (the RBAC caches' change
 * feed), as a network failure would; answers how many it terminated.
 */
export async function terminateListeners(url: string): Promise<number> {
  const killer = new Client({ connectionString: url });
  await killer.connect();
  try {
    const killed = await killer.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN%'`,
    );
    return killed.rowCount ?? 0;
  } finally {
    await killer.end();
  }
}

/** Runs the embedded database (PGlite behind its Unix socket) in a child process. */
export async function hostEmbedded(
  dataDir: string,
  snapshotDir?: string,
): Promise<{ socketDir: string; origin: string; stop: () => Promise<void> }> {
  const host = join(ROOT, 'test/support/pglite-host.js');
  const proc = spawn(process.execPath, [host, dataDir, ...(snapshotDir ? [snapshotDir] : [])], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  const socketDir = await new Promise<string>((resolve, reject) => {
    proc.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /^ready (.+)$/m.exec(out);
      if (m) resolve(m[1]);
    });
    proc.stderr.on('data', (d: Buffer) => (out += d.toString()));
    proc.once('exit', (code) =>
      reject(new Error(`embedded database host exited (${code}): ${out}`)),
    );
  });
  return {
    socketDir,
    origin: /^origin (.+)$/m.exec(out)?.[1] ?? '',
    stop: () => stopChild(proc),
  };
}
