/**
 * The graph is updated in the write's own transaction, so a crash can never leave a state and
 * its edges disagreeing. The server is killed (SIGKILL, by the testing-only
 * STATEHOUSE_TEST_FAILPOINTS) at the two moments that matter, and restarted on the same data:
 *
 *  - `write.before-graph`: the new version is current inside the transaction, the edges not yet
 *    updated. After the restart the write never happened: the consumer is at its old version
 *    and the graph still says what that version read (red).
 *  - `write.after-commit`: the transaction committed, the answer was never sent. After the
 *    restart the new version is current and the graph says what it read (green).
 */
import { freshServerEnv } from '../support/database';
import { RunningServer, spawnServer } from '../support/server';

jest.setTimeout(180_000);

function tfstate(
  serial: number,
  outputs: Record<string, string>,
  reads?: { url: string; outputs: Record<string, string> },
): string {
  return JSON.stringify({
    version: 4,
    terraform_version: '1.11.4',
    serial,
    lineage: 'graph-crash',
    outputs: Object.fromEntries(
      Object.entries(outputs).map(([k, v]) => [k, { value: v, type: 'string' }]),
    ),
    resources: reads
      ? [
          {
            mode: 'data',
            type: 'terraform_remote_state',
            name: 'network',
            provider: 'provider["terraform.io/builtin/terraform"]',
            instances: [
              {
                schema_version: 0,
                attributes: {
                  backend: 'http',
                  config: { value: { address: reads.url }, type: ['object', {}] },
                  defaults: null,
                  outputs: { value: reads.outputs, type: ['object', {}] },
                  workspace: null,
                },
                sensitive_attributes: [],
              },
            ],
          },
        ]
      : [],
    check_results: null,
  });
}

describe('graph updates survive a crash at every step of the write', () => {
  let env: Awaited<ReturnType<typeof freshServerEnv>>;
  let server: RunningServer | undefined;

  const start = async (failpoint?: string): Promise<RunningServer> => {
    server = await spawnServer({
      ...env.env,
      ...(failpoint ? { STATEHOUSE_TEST_FAILPOINTS: failpoint } : {}),
    });
    return server;
  };

  const post = async (s: RunningServer, unit: string, body: string): Promise<number> => {
    try {
      const r = await fetch(`${s.url}/v1/backend/${unit}`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${s.token}`, 'Content-Type': 'application/json' },
        body,
      });
      await r.arrayBuffer();
      return r.status;
    } catch {
      return 0; // the connection died with the server
    }
  };

  const get = async <T>(s: RunningServer, path: string): Promise<T> => {
    const r = await fetch(`${s.url}${path}`, { headers: s.auth });
    expect(r.status).toBe(200);
    return (await r.json()) as T;
  };

  const consumerStatus = (s: RunningServer) =>
    get<{ status: string; inputs: { status: string; changed: string[] }[] }>(
      s,
      `/v1/units/${encodeURIComponent('apps/web')}/status`,
    );
  const consumerVersions = async (s: RunningServer) =>
    (
      await get<{ items: { version: number }[] }>(
        s,
        `/v1/units/${encodeURIComponent('apps/web')}/versions`,
      )
    ).items.map((v) => v.version);

  /** The consumer's next state: it read the producer's current outputs (vpc-2). */
  const readsCurrent = (s: RunningServer, serial: number) =>
    tfstate(
      serial,
      { url: 'web' },
      { url: `${s.url}/v1/backend/platform/network`, outputs: { vpc_id: 'vpc-2' } },
    );

  beforeAll(async () => {
    env = await freshServerEnv();
  });

  afterAll(async () => {
    await server?.stop();
    await env?.cleanup();
  });

  it('set-up: the consumer read vpc-1, the producer now says vpc-2: red', async () => {
    const s = await start();
    expect(await post(s, 'platform/network', tfstate(1, { vpc_id: 'vpc-1' }))).toBe(200);
    expect(
      await post(
        s,
        'apps/web',
        tfstate(
          1,
          { url: 'web' },
          { url: `${s.url}/v1/backend/platform/network`, outputs: { vpc_id: 'vpc-1' } },
        ),
      ),
    ).toBe(200);
    expect(await post(s, 'platform/network', tfstate(2, { vpc_id: 'vpc-2' }))).toBe(200);
    expect((await consumerStatus(s)).status).toBe('red');
    await s.stop();
  });

  it('killed after the version became current, before the edges were updated: after the restart neither happened', async () => {
    const dying = await start('write.before-graph');
    expect(dying.output()).toMatch(/STATEHOUSE_TEST_FAILPOINTS is set/);
    expect(await post(dying, 'apps/web', readsCurrent(dying, 2))).toBe(0);
    await dying.stop(); // already dead: waits for the exit
    expect(dying.proc.signalCode).toBe('SIGKILL');

    const s = await start();
    expect(await consumerVersions(s)).toEqual([1]);
    const status = await consumerStatus(s);
    expect(status.status).toBe('red'); // what version 1 read, as before the crash
    expect(status.inputs).toEqual([
      expect.objectContaining({ status: 'stale', changed: ['vpc_id'] }),
    ]);
    await s.stop();
  });

  it('killed after the commit, before the answer: after the restart the version and its edges are both there', async () => {
    const dying = await start('write.after-commit');
    expect(await post(dying, 'apps/web', readsCurrent(dying, 2))).toBe(0);
    await dying.stop();
    expect(dying.proc.signalCode).toBe('SIGKILL');

    const s = await start();
    expect(await consumerVersions(s)).toEqual([2, 1]);
    const status = await consumerStatus(s);
    expect(status.status).toBe('green');
    expect(status.inputs).toEqual([expect.objectContaining({ status: 'ok', changed: [] })]);
  });
});
