/**
 * Migrations in production: `statehouse migrate` (the Kubernetes Job) applies pending
 * migrations and exits; a replica below the schema's compatibility floor refuses to start and
 * says why, while a rollback above it runs; a replica that may not migrate
 * (STATEHOUSE_MIGRATE=false) and finds the schema behind is alive but not ready, names the
 * command, and becomes ready on its own once the Job has run. "Old code" and "a newer release"
 * are simulated by writing what a newer release leaves in the database.
 */
import { spawn } from 'node:child_process';
import { DataSource } from 'typeorm';
import { MIGRATIONS, SCHEMA_LEVEL } from '../../migrations';
import { packageVersion } from '../../src/common/version';
import { createDataSource } from '../../src/database/data-source';
import { ENTITIES } from '../../src/entities';
import { freshServerEnvs, hostEmbedded, ON_POSTGRES } from '../support/database';
import { CLI, TEST_TOKEN } from '../support/paths';
import { freePort } from '../support/ports';
import {
  FUTURE,
  LAST,
  migratedByNewerRelease,
  PREVIOUS_LEVEL,
  releaseBefore,
} from '../support/releases';
import { childEnv, NODE, runCli, spawnServer } from '../support/server';

jest.setTimeout(120_000);

const VERSION = packageVersion();

/** Runs `work` on the database of a server environment (the server not running). */
async function onDatabase(
  env: Record<string, string>,
  work: (ds: DataSource) => Promise<void>,
): Promise<void> {
  const host = ON_POSTGRES ? undefined : await hostEmbedded(env.STATEHOUSE_DATA_DIR);
  const ds = createDataSource(
    host ? { socketDir: host.socketDir, poolSize: 1 } : { url: env.DATABASE_URL, poolSize: 1 },
    ENTITIES,
  );
  await ds.initialize();
  try {
    await work(ds);
  } finally {
    await ds.destroy();
    await host?.stop();
  }
}

const serveEnv = {
  PORT: '0',
  STATEHOUSE_HOST: '127.0.0.1',
  STATEHOUSE_BOOTSTRAP_TOKEN: TEST_TOKEN,
};

describe(`migrations in production (${ON_POSTGRES ? 'PostgreSQL' : 'embedded'})`, () => {
  const freshEnv = freshServerEnvs();
  const fresh = async () => (await freshEnv()).env;
  /** A database this release has migrated. */
  const migrated = async () => {
    const env = await fresh();
    expect((await runCli(['migrate'], env)).code).toBe(0);
    return env;
  };

  it('`statehouse migrate` applies the pending migrations and exits; run again, it applies nothing', async () => {
    const env = await migrated();
    await onDatabase(env, releaseBefore);
    const first = await runCli(['migrate'], env);
    expect(first).toEqual({ code: 0, output: `applied: ${LAST.name}\n` });
    const again = await runCli(['migrate'], env);
    expect(again).toEqual({ code: 0, output: 'no pending migrations\n' });
  });

  it('a replica below the floor a newer release recorded refuses to start, in one line naming both versions and what to do (exit 1); so does its migrate', async () => {
    const env = await migrated();
    await onDatabase(env, migratedByNewerRelease(FUTURE));
    const expected =
      `statehouse: this Statehouse (${VERSION}, schema level ${SCHEMA_LEVEL}) is too old for the database: ` +
      `its schema (level ${FUTURE}, migrated by Statehouse 9.1.0) runs only with code of schema level ${FUTURE} or later. ` +
      `Run Statehouse 9.1.0 (or another release of schema level ${FUTURE} or later); ` +
      'going back further needs the database backup taken before that migration\n';
    for (const args of [['serve'], ['migrate']]) {
      const r = await runCli(args, { ...env, ...serveEnv });
      expect(r.code).toBe(1);
      expect(r.output.endsWith(expected)).toBe(true);
      expect(r.output).not.toMatch(/\n\s+at /);
      expect(r.output).not.toContain('listening on');
    }
  });

  it('a rollback after a newer release migrated (the floor still admits this code): the replica starts and serves, and says so', async () => {
    const env = await migrated();
    await onDatabase(env, migratedByNewerRelease(SCHEMA_LEVEL));
    const s = await spawnServer(env);
    try {
      expect((await fetch(`${s.url}/v1/units`, { headers: s.auth })).status).toBe(200);
      expect(s.output()).toContain(
        `the database's schema (level ${FUTURE}, migrated by Statehouse 9.1.0) is newer than this Statehouse (${VERSION}, schema level ${SCHEMA_LEVEL}); it accepts code of schema level ${SCHEMA_LEVEL} or later, so this release runs against it`,
      );
    } finally {
      await s.stop();
    }
    const m = await runCli(['migrate'], env);
    expect(m.code).toBe(0);
    expect(m.output).toContain('no pending migrations\n');
  });

  (ON_POSTGRES ? it : it.skip)(
    "PostgreSQL: a running replica that a newer release's contract migration left below the floor turns not ready, saying why",
    async () => {
      const env = await migrated();
      const s = await spawnServer(env);
      try {
        await onDatabase(env, migratedByNewerRelease(FUTURE));
        const r = await fetch(`${s.url}/readyz`);
        expect(r.status).toBe(503);
        const body = (await r.json()) as { error: Record<string, { message: string }> };
        expect(Object.keys(body.error)).toEqual(['schema']);
        expect(body.error.schema.message).toBe(
          `this Statehouse (${VERSION}, schema level ${SCHEMA_LEVEL}) is too old for the database: ` +
            `its schema (level ${FUTURE}, migrated by Statehouse 9.1.0) runs only with code of schema level ${FUTURE} or later. ` +
            `Run Statehouse 9.1.0 (or another release of schema level ${FUTURE} or later); ` +
            'going back further needs the database backup taken before that migration',
        );
        // Alive all the same: a restart would not help.
        expect((await fetch(`${s.url}/healthz`)).status).toBe(200);
        await onDatabase(env, async (ds) => {
          await ds.query(`UPDATE schema_compatibility SET oldest_code_level = $1`, [SCHEMA_LEVEL]);
        });
        expect((await fetch(`${s.url}/readyz`)).status).toBe(200);
      } finally {
        await s.stop();
      }
    },
  );

  (ON_POSTGRES ? it.skip : it)(
    'embedded, STATEHOUSE_MIGRATE=false and a schema behind the code: one line naming `statehouse migrate` (exit 1)',
    async () => {
      const env = await migrated();
      await onDatabase(env, releaseBefore);
      const r = await runCli(['serve'], { ...env, ...serveEnv, STATEHOUSE_MIGRATE: 'false' });
      expect(r.code).toBe(1);
      expect(r.output).toContain(
        `statehouse: the database is at schema level ${PREVIOUS_LEVEL} and this Statehouse (${VERSION}) needs schema level ${SCHEMA_LEVEL} (1 pending migration(s)), which it does not apply itself with STATEHOUSE_MIGRATE=false: run \`statehouse migrate\` of this release (the migrations Job), with this server stopped (the embedded database serves one process), or unset STATEHOUSE_MIGRATE\n`,
      );
    },
  );

  describe('PostgreSQL, STATEHOUSE_MIGRATE=false and a schema behind the code', () => {
    const onPostgres = ON_POSTGRES ? it : it.skip;

    /** `statehouse serve` on a fixed port (it waits before the server proper listens). */
    async function waitingServer(env: Record<string, string>) {
      const port = await freePort();
      const proc = spawn(NODE, [CLI, 'serve'], {
        env: {
          ...childEnv(),
          NODE_ENV: 'production',
          ...serveEnv,
          ...env,
          PORT: String(port),
          STATEHOUSE_MIGRATE: 'false',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      proc.stdout.on('data', (d: Buffer) => (out += d.toString()));
      proc.stderr.on('data', (d: Buffer) => (out += d.toString()));
      const exited = new Promise<number | null>((r) => proc.once('exit', (c) => r(c)));
      const url = `http://127.0.0.1:${port}`;
      await until(
        async () => (await fetch(`${url}/healthz`).catch(() => undefined))?.status === 200,
        () => out,
      );
      return { proc, url, exited, output: () => out };
    }

    async function until(ok: () => Promise<boolean>, output: () => string, ms = 60_000) {
      const deadline = Date.now() + ms;
      while (!(await ok())) {
        if (Date.now() > deadline) throw new Error(`gave up waiting:\n${output()}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }

    onPostgres(
      "alive (/healthz 200), not ready (/readyz 503 naming `statehouse migrate`), every other request 503 in its door's format; ready without a restart once `statehouse migrate` ran",
      async () => {
        const env = await fresh();
        const s = await waitingServer(env);
        try {
          const readyz = await fetch(`${s.url}/readyz`);
          expect(readyz.status).toBe(503);
          const reason =
            `not ready: the database has no Statehouse schema yet and this Statehouse (${VERSION}) needs schema level ${SCHEMA_LEVEL} ` +
            `(${MIGRATIONS.length} pending migration(s)), which it does not apply itself with STATEHOUSE_MIGRATE=false: run \`statehouse migrate\` of this release (the migrations Job)`;
          expect(await readyz.json()).toEqual({
            status: 'error',
            info: {},
            error: { schema: { status: 'down', message: reason } },
            details: { schema: { status: 'down', message: reason } },
          });
          const api = await fetch(`${s.url}/v1/units`, {
            headers: { Authorization: `Bearer ${TEST_TOKEN}` },
          });
          expect(api.status).toBe(503);
          expect(await api.json()).toMatchObject({
            statusCode: 503,
            code: 'not_ready',
            message: reason,
          });
          const s3 = await fetch(`${s.url}/s3/tfstate?list-type=2`);
          expect(s3.status).toBe(503);
          expect(await s3.text()).toContain('<Code>ServiceUnavailable</Code>');
          expect(s.output()).toContain(`${reason}; waiting (/readyz answers 503 until then)`);

          // It does not migrate by itself.
          await new Promise((r) => setTimeout(r, 3000));
          expect((await fetch(`${s.url}/readyz`)).status).toBe(503);
          const check = createDataSource({ url: env.DATABASE_URL, poolSize: 1 }, ENTITIES);
          await check.initialize();
          const [{ table }] = await check.query<{ table: string | null }[]>(
            `SELECT to_regclass('schema_migrations') AS table`,
          );
          await check.destroy();
          expect(table).toBeNull();

          // The migrations Job.
          expect((await runCli(['migrate'], env)).code).toBe(0);
          await until(
            // (a moment without a listener while the standby hands over to the server)
            async () => (await fetch(`${s.url}/readyz`).catch(() => undefined))?.status === 200,
            s.output,
            30_000,
          );
          const units = await fetch(`${s.url}/v1/units`, {
            headers: { Authorization: `Bearer ${TEST_TOKEN}` },
          });
          expect(units.status).toBe(200);
          expect(s.proc.exitCode).toBeNull();
          expect(s.output()).toContain("the schema has this release's migrations now: starting");
        } finally {
          s.proc.kill('SIGTERM');
          expect(await s.exited).toBe(143);
        }
      },
    );

    onPostgres('SIGTERM while it waits: it stops at once (exit 143)', async () => {
      const env = await fresh();
      const s = await waitingServer(env);
      const sent = Date.now();
      s.proc.kill('SIGTERM');
      expect(await s.exited).toBe(143);
      expect(Date.now() - sent).toBeLessThan(5000);
      expect(s.output()).toContain('SIGTERM: stopped before starting');
    });
  });
});
