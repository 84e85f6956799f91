/**
 * A write's cost is bounded by what it writes, not by the history of the states it reads: a
 * consumer with 1,000 `terraform_remote_state` data sources reading a producer with 2,000
 * versions (its outputs as they were at the producer's first version, the worst case for a
 * search through the history) is written in bounded time, and a request about another unit
 * made meanwhile answers promptly — on the embedded database, whose one connection the write's
 * transaction holds, too.
 */
import { onFreshServer, RunningServer } from '../support/server';
import { tfStateText } from '../support/tf-state';

jest.setTimeout(600_000);

const VERSIONS = 2000;
const SOURCES = 1000;
/** Bounds far above what the write takes (about a second) and far below the ~40 s it took. */
const WRITE_BOUND_MS = 10_000;
const GET_BOUND_MS = 2_000;

const tfstate = (
  serial: number,
  outputs: Record<string, unknown>,
  resources: unknown[] = [],
  lineage = 'history',
): string =>
  tfStateText({
    serial,
    lineage,
    outputs,
    outputType: () => 'dynamic',
    resources,
    checkResults: false,
    compact: true,
    newline: false,
  });

describe('a write reading a producer with a long history', () => {
  let server: RunningServer;

  onFreshServer((started) => (server = started));

  const put = async (unit: string, body: string): Promise<number> => {
    const r = await fetch(`${server.url}/v1/units/${encodeURIComponent(unit)}/state`, {
      method: 'PUT',
      headers: { ...server.auth, 'Content-Type': 'application/octet-stream' },
      body,
    });
    await r.arrayBuffer();
    return r.status;
  };

  it(`${SOURCES} data sources over ${VERSIONS} producer versions: bounded write, prompt neighbours`, async () => {
    const outputsAt = (v: number) => ({ n: v, region: 'eu-west-1', subnets: ['a', 'b', 'c'] });
    const seeded = Date.now();
    // Version 1 first (the one the consumer read); then the rest several at a time, each in its
    // own lineage so that any order is accepted (a lineage change is a new version).
    expect(await put('hist/producer', tfstate(1, outputsAt(1)))).toBe(200);
    let next = 2;
    const seeder = async () => {
      for (let v = next++; v <= VERSIONS; v = next++) {
        expect(await put('hist/producer', tfstate(1, outputsAt(v), [], `history-${v}`))).toBe(200);
      }
    };
    await Promise.all(Array.from({ length: 6 }, seeder));
    expect(await put('hist/other', tfstate(1, { x: 1 }))).toBe(200);
    const seedMs = Date.now() - seeded;

    const consumer = tfstate(
      1,
      { ok: true },
      Array.from({ length: SOURCES }, (_, i) => ({
        mode: 'data',
        type: 'terraform_remote_state',
        name: `r${i}`,
        provider: 'provider["terraform.io/builtin/terraform"]',
        instances: [
          {
            schema_version: 0,
            attributes: {
              backend: 'http',
              config: {
                value: { address: `${server.url}/v1/backend/hist/producer` },
                type: ['object', {}],
              },
              defaults: null,
              outputs: { value: outputsAt(1), type: ['object', {}] },
              workspace: null,
            },
          },
        ],
      })),
    );

    // The write, and GETs of another unit one after another while it runs.
    let writing = true;
    const started = Date.now();
    const write = put('hist/consumer', consumer).finally(() => (writing = false));
    const latencies: number[] = [];
    while (writing) {
      const t = Date.now();
      const r = await fetch(`${server.url}/v1/units/${encodeURIComponent('hist/other')}/state`, {
        headers: server.auth,
      });
      await r.arrayBuffer();
      expect(r.status).toBe(200);
      latencies.push(Date.now() - t);
    }
    expect(await write).toBe(200);
    const writeMs = Date.now() - started;
    const worstGet = Math.max(...latencies);
    console.log(
      `graph history: seeding ${VERSIONS} versions ${seedMs} ms; the ${SOURCES}-source write ${writeMs} ms; ` +
        `${latencies.length} GETs of another unit meanwhile, slowest ${worstGet} ms`,
    );
    expect(writeMs).toBeLessThan(WRITE_BOUND_MS);
    expect(worstGet).toBeLessThan(GET_BOUND_MS);

    // And the edges are right: every source read the producer's first version.
    const g = await fetch(`${server.url}/v1/graph?prefix=hist/consumer`, { headers: server.auth });
    const graph = (await g.json()) as { edges: { producerVersion: number; status: string }[] };
    expect(graph.edges).toHaveLength(SOURCES);
    expect(new Set(graph.edges.map((e) => `${e.producerVersion} ${e.status}`))).toEqual(
      new Set(['1 stale']),
    );
  });
});
