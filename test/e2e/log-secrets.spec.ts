/**
 * State content never reaches the server log, whatever fails (the real server; embedded
 * database, and PostgreSQL via scripts/with-postgres.sh). Every state written here carries a
 * unique marker in its outputs (a sensitive one too) and resources; each failure path is
 * provoked through every door, then the whole log is searched for the marker:
 *
 * - the encoding path that used to end in a 500 with the query parameters logged (a NUL in an
 *   output name, an unpaired surrogate in a value), now a 400;
 * - a constraint violation inside the write (a CHECK added to `versions` for this test):
 *   PostgreSQL's detail ("Failing row contains (…)") and TypeORM's parameters hold every
 *   output; the log keeps the SQLSTATE, the constraint and the table;
 * - PostgreSQL only: the connection dropped (a TCP proxy cut) during a 40 MiB upload to the
 *   postgres blob store — a 503 for the client, and the log line that used to carry 1 MiB of
 *   the state's bytes in `err.parameters` is small and holds none of them.
 */
import { PutObjectCommand, S3Client, S3ServiceException } from '@aws-sdk/client-s3';
import { randomUUID } from 'node:crypto';
import { request } from 'node:http';
import { Client } from 'pg';
import { createDataSource } from '../../src/database/data-source';
import { ENTITIES } from '../../src/entities';
import { freshServerEnv, hostEmbedded, ON_POSTGRES } from '../support/database';
import { s3ClientFor } from '../support/s3-client';
import { RunningServer, spawnServer } from '../support/server';
import { startTcpProxy, TcpProxy } from '../support/tcp-proxy';

jest.setTimeout(180_000);

const MARKER = `log-marker-${randomUUID()}`;
/** In an output value, makes the CHECK constraint added for this test refuse the version. */
const TRIP = 'trip-the-check-constraint';
const CHECK = `ALTER TABLE versions ADD CONSTRAINT ck_log_test
  CHECK (outputs IS NULL OR strpos(outputs::text, '${TRIP}') = 0)`;

type Door = 's3' | 'http' | 'api';
const DOORS: Door[] = ['s3', 'http', 'api'];

let server: RunningServer;
let cleanup: (() => Promise<void>) | undefined;
let proxy: TcpProxy | undefined;
let s3: S3Client;
let directUrl: string | undefined;

function state(extraOutputs: Record<string, unknown> = {}, bulk = ''): string {
  return JSON.stringify({
    version: 4,
    terraform_version: '1.11.4',
    serial: 1,
    lineage: `lineage-${randomUUID()}`,
    outputs: {
      plain: { value: `plain ${MARKER}`, type: 'string' },
      db_password: { value: `secret ${MARKER}`, type: 'string', sensitive: true },
      ...extraOutputs,
    },
    resources: [
      {
        mode: 'managed',
        type: 'terraform_data',
        name: 'n',
        instances: [{ attributes: { input: { value: `${MARKER}${bulk}`, type: 'string' } } }],
      },
    ],
  });
}

async function write(door: Door, unit: string, body: string): Promise<string> {
  if (door === 's3') {
    try {
      await s3.send(
        new PutObjectCommand({ Bucket: 'tfstate', Key: `${unit}/terraform.tfstate`, Body: body }),
      );
      return '200';
    } catch (e) {
      if (!(e instanceof S3ServiceException)) throw e;
      return `${e.$metadata.httpStatusCode} ${e.name}`;
    }
  }
  const auth = { authorization: `Bearer ${server.token}` };
  const res =
    door === 'http'
      ? await fetch(`${server.url}/v1/backend/${unit}`, { method: 'POST', headers: auth, body })
      : await fetch(`${server.url}/v1/units/${encodeURIComponent(unit)}/state`, {
          method: 'PUT',
          headers: auth,
          body,
        });
  await res.arrayBuffer();
  return String(res.status);
}

async function addCheckConstraint(dataDir: string): Promise<void> {
  if (directUrl !== undefined) {
    const c = new Client({ connectionString: directUrl });
    await c.connect();
    await c.query(CHECK);
    await c.end();
    return;
  }
  const host = await hostEmbedded(dataDir);
  const ds = createDataSource({ socketDir: host.socketDir, poolSize: 1 }, ENTITIES);
  await ds.initialize();
  await ds.query(CHECK);
  await ds.destroy();
  await host.stop();
}

/** Waits until the log (written asynchronously) has `count` lines matching `re`; returns them. */
async function logLines(re: RegExp, count: number): Promise<string[]> {
  const matching = () =>
    server
      .output()
      .split('\n')
      .filter((l) => re.test(l));
  for (let i = 0; i < 100 && matching().length < count; i++) {
    await new Promise((r) => setTimeout(r, 100));
  }
  return matching();
}

/** Every log line, checked to hold no marker (and no state byte run) and to be small. */
function expectCleanLog(): void {
  const out = server.output();
  expect(out).not.toContain(MARKER);
  expect(out).not.toContain(TRIP);
  const longest = Math.max(...out.split('\n').map((l) => l.length));
  expect(longest).toBeLessThan(16 * 1024);
}

beforeAll(async () => {
  const fresh = await freshServerEnv();
  cleanup = fresh.cleanup;
  let env = fresh.env;
  if (ON_POSTGRES) {
    directUrl = fresh.env.DATABASE_URL;
    const db = new URL(directUrl);
    proxy = await startTcpProxy({ host: db.hostname, port: Number(db.port) });
    db.hostname = '127.0.0.1';
    db.port = String(proxy.port);
    env = { ...env, DATABASE_URL: db.toString(), STATEHOUSE_STORAGE: 'postgres' };
  } else {
    await addCheckConstraint(fresh.dataDir); // before the server holds the embedded database
  }
  server = await spawnServer(env);
  if (ON_POSTGRES) await addCheckConstraint(fresh.dataDir);
  const t = await fetch(`${server.url}/v1/auth/tokens`, {
    method: 'POST',
    headers: { ...server.auth, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'log-secrets', subject: 'svc:log-secrets' }),
  });
  expect(t.status).toBe(201);
  const token = ((await t.json()) as { token: string }).token;
  const c = await fetch(`${server.url}/v1/auth/issue-s3-creds`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}` },
  });
  const creds = (await c.json()) as {
    AccessKeyId: string;
    SecretAccessKey: string;
    SessionToken: string;
  };
  s3 = s3ClientFor(server, creds);
});

afterAll(async () => {
  s3?.destroy();
  proxy?.up();
  await server?.stop();
  await proxy?.close();
  await cleanup?.();
});

it('the encoding failures that were 500s: 400 on every door, no marker in the log', async () => {
  for (const door of DOORS) {
    const unit = `logs/encoding-${door}`;
    const nulName = await write(door, unit, state({ 'bad\u0000name': { value: 1 } }));
    const surrogate = await write(door, unit, state({ odd: { value: `\ud800 ${MARKER}` } }));
    const expected = door === 's3' ? '400 InvalidArgument' : '400';
    expect([nulName, surrogate]).toEqual([expected, expected]);
  }
  expectCleanLog();
});

it('a constraint violation in the write: 500, logged with its code, constraint and table only', async () => {
  for (const door of DOORS) {
    const answer = await write(door, `logs/constraint-${door}`, state({ trip: { value: TRIP } }));
    expect(answer).toBe(door === 's3' ? '500 InternalError' : '500');
  }
  const lines = await logLines(/ck_log_test/, 3);
  expect(lines).toHaveLength(3);
  for (const line of lines) {
    const err = (JSON.parse(line) as { err: Record<string, unknown> }).err;
    expect(err).toMatchObject({ code: '23514', constraint: 'ck_log_test', table: 'versions' });
    for (const key of ['detail', 'query', 'parameters', 'driverError', 'where']) {
      expect(err).not.toHaveProperty(key);
    }
  }
  expectCleanLog();
});

const onPostgres = ON_POSTGRES ? it : it.skip;
onPostgres(
  'the database connection dropped during a 40 MiB upload to the postgres blob store: 503, no state bytes in the log',
  async () => {
    const filler = ` ${MARKER}`.repeat(Math.ceil((40 * 1024 * 1024) / (MARKER.length + 1)));
    const body = Buffer.from(state({}, filler));
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(
        {
          host: '127.0.0.1',
          port: server.port,
          method: 'POST',
          path: '/v1/backend/logs/upload-cut',
          headers: {
            authorization: `Bearer ${server.token}`,
            'content-length': String(body.length),
          },
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      );
      req.on('error', reject);
      const piece = 1024 * 1024;
      let sent = 0;
      const pump = (): void => {
        while (sent < body.length) {
          const chunk = body.subarray(sent, sent + piece);
          sent += chunk.length;
          if (sent === 10 * piece) {
            // 10 MiB in: let the server store some chunks, then cut its database.
            req.write(chunk);
            setTimeout(() => {
              proxy?.down('refuse');
              pump();
            }, 1000);
            return;
          }
          if (!req.write(chunk)) {
            req.once('drain', pump);
            return;
          }
        }
        req.end();
      };
      pump();
    });
    expect(status).toBe(503);
    proxy?.up();
    const unavailable = await logLines(/dependency unavailable/, 1);
    expect(unavailable.length).toBeGreaterThanOrEqual(1);
    expectCleanLog();
  },
);
