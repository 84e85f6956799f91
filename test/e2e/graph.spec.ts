/**
 * The dependency graph through the real server: edges discovered from consumers'
 * `terraform_remote_state` data sources (http and s3 backend configs pointing at this server),
 * declared edges, staleness with the outputs that changed and since which producer version,
 * green / red / yellow, the stale list in dependency order, cycles, DOT and Mermaid, and
 * visibility under RBAC (hidden states are not named; no fake dependency can be planted). The
 * remote-state credentials inside consumers' states never appear in an answer or a log line.
 */
import { randomUUID } from 'node:crypto';
import { freshServerEnv } from '../support/database';
import { runCli, RunningServer, spawnServer } from '../support/server';
import { tfStateText } from '../support/tf-state';

jest.setTimeout(120_000);

const PASSWORD = `remote-state-password-${randomUUID()}`;

interface Remote {
  name: string;
  backend: 'http' | 's3';
  config: Record<string, unknown>;
  outputs: Record<string, unknown>;
  workspace?: string | null;
}

/** A Terraform v4 state with these outputs and terraform_remote_state data sources. */
function tfstate(
  lineage: string,
  serial: number,
  outputs: Record<string, unknown>,
  remotes: Remote[] = [],
  sensitive: string[] = [],
): string {
  return tfStateText({
    serial,
    lineage,
    outputs,
    outputType: (v) => (typeof v === 'string' ? 'string' : 'dynamic'),
    sensitive,
    resources: remotes.map((r) => ({
      mode: 'data',
      type: 'terraform_remote_state',
      name: r.name,
      provider: 'provider["terraform.io/builtin/terraform"]',
      instances: [
        {
          schema_version: 0,
          attributes: {
            backend: r.backend,
            config: { value: r.config, type: ['object', {}] },
            defaults: null,
            outputs: { value: r.outputs, type: ['object', {}] },
            workspace: r.workspace ?? null,
          },
          sensitive_attributes: [],
        },
      ],
    })),
    newline: false,
  });
}

interface Status {
  unit: string;
  workspace: string;
  status: 'green' | 'red' | 'yellow';
  inputs: {
    edge: string | null;
    producer: { unit: string; workspace: string } | { hidden: true };
    source: string;
    name: string | null;
    status: string;
    changed: string[];
    staleSince: number | null;
    sensitiveOutputs: 'compared' | 'excluded';
  }[];
  redUpstream: { unit: string; workspace: string }[];
  hiddenRedUpstream: number;
  cycles: { unit: string; workspace: string }[][];
}

interface Graph {
  nodes: { unit: string; workspace: string; status: string; version: number | null }[];
  edges: {
    id: string;
    producer: { unit: string; workspace: string };
    consumer: { unit: string; workspace: string };
    source: string;
    name: string;
    status: string;
    changed: string[];
    producerVersion: number | null;
    sensitiveOutputs: 'compared' | 'excluded';
  }[];
  cycles: { unit: string; workspace: string }[][];
}

describe('dependency graph', () => {
  let server: RunningServer;
  let cleanup: () => Promise<void>;
  const serials = new Map<string, number>();
  const answers: string[] = []; // every answer body, searched for the password at the end

  async function api(
    method: string,
    path: string,
    body?: unknown,
    token = server.token,
  ): Promise<{ status: number; text: string; json: unknown; type: string | null }> {
    const r = await fetch(`${server.url}${path}`, {
      method,
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    answers.push(text);
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: r.status, text, json, type: r.headers.get('content-type') };
  }

  /** Writes a state through the HTTP backend (serial bumped per unit). */
  async function write(
    unit: string,
    outputs: Record<string, unknown>,
    remotes: Remote[] = [],
    token = server.token,
    sensitive: string[] = [],
  ): Promise<number> {
    const serial = (serials.get(unit) ?? 0) + 1;
    serials.set(unit, serial);
    const r = await fetch(`${server.url}/v1/backend/${unit}`, {
      method: 'POST',
      headers: {
        Authorization: `Basic ${Buffer.from(`tf:${token}`).toString('base64')}`,
        'Content-Type': 'application/json',
      },
      body: tfstate(`lineage-${unit}`, serial, outputs, remotes, sensitive),
    });
    answers.push(await r.text());
    return r.status;
  }

  const httpRemote = (name: string, unit: string, outputs: Record<string, unknown>): Remote => ({
    name,
    backend: 'http',
    config: {
      address: `${server.url}/v1/backend/${unit}`,
      username: 'terraform',
      password: PASSWORD,
    },
    outputs,
  });

  const status = async (unit: string, token?: string): Promise<Status> => {
    const r = await api('GET', `/v1/units/${encodeURIComponent(unit)}/status`, undefined, token);
    expect(r.status).toBe(200);
    return r.json as Status;
  };

  const graph = async (query = '', token?: string): Promise<Graph> => {
    const r = await api('GET', `/v1/graph${query}`, undefined, token);
    expect(r.status).toBe(200);
    return r.json as Graph;
  };

  beforeAll(async () => {
    const env = await freshServerEnv();
    cleanup = env.cleanup;
    server = await spawnServer(env.env);
  });

  afterAll(async () => {
    await server?.stop();
    // The consumers' remote-state password: in no answer, no log line.
    expect(answers.join('\n')).not.toContain(PASSWORD);
    expect(server.output()).not.toContain(PASSWORD);
    await cleanup?.();
  });

  describe('discovered edges', () => {
    it('a consumer reading a producer through the http backend records an edge that is ok', async () => {
      expect(await write('platform/network', { vpc_id: 'vpc-1', cidr: '10.0.0.0/16' })).toBe(200);
      expect(
        await write('apps/web', { url: 'https://web' }, [
          httpRemote('network', 'platform/network', { vpc_id: 'vpc-1', cidr: '10.0.0.0/16' }),
        ]),
      ).toBe(200);
      const g = await graph('?prefix=apps/');
      expect(g.edges).toEqual([
        expect.objectContaining({
          producer: { unit: 'platform/network', workspace: 'default' },
          consumer: { unit: 'apps/web', workspace: 'default' },
          source: 'discovered',
          name: 'network',
          status: 'ok',
          changed: [],
          producerVersion: 1,
        }),
      ]);
      // every node with its current version, consumers too
      expect(g.nodes).toEqual([
        { unit: 'apps/web', workspace: 'default', status: 'green', version: 1 },
        { unit: 'platform/network', workspace: 'default', status: 'green', version: 1 },
      ]);
      const s = await status('apps/web');
      expect(s).toMatchObject({ status: 'green', redUpstream: [], cycles: [] });
      expect(s.inputs).toEqual([
        expect.objectContaining({
          status: 'ok',
          producer: { unit: 'platform/network', workspace: 'default' },
        }),
      ]);
    });

    it('the producer changes an output the consumer read: the edge is stale, the consumer red, naming the output and since which version', async () => {
      // version 2: cidr changes nothing the test looks at… it does change: only cidr
      expect(
        await write('platform/network', { vpc_id: 'vpc-1', cidr: '10.0.0.0/16', extra: 1 }),
      ).toBe(200);
      expect((await status('apps/web')).status).toBe('green'); // a new output nobody read
      expect(
        await write('platform/network', { vpc_id: 'vpc-2', cidr: '10.0.0.0/16', extra: 1 }),
      ).toBe(200);
      const s = await status('apps/web');
      expect(s.status).toBe('red');
      expect(s.inputs).toEqual([
        expect.objectContaining({
          source: 'discovered',
          name: 'network',
          status: 'stale',
          changed: ['vpc_id'],
          staleSince: 3,
        }),
      ]);
    });

    it('a state downstream of a red one is yellow, naming the red one', async () => {
      expect(
        await write('apps/edge', { host: 'edge' }, [
          httpRemote('web', 'apps/web', { url: 'https://web' }),
        ]),
      ).toBe(200);
      const s = await status('apps/edge');
      expect(s.status).toBe('yellow');
      expect(s.redUpstream).toEqual([{ unit: 'apps/web', workspace: 'default' }]);
      expect(s.inputs.map((i) => i.status)).toEqual(['ok']);
    });

    it('GET /v1/graph/stale lists what needs applying, producers first, with the reasons', async () => {
      const r = await api('GET', '/v1/graph/stale');
      expect(r.status).toBe(200);
      const items = (
        r.json as { items: { unit: string; status: string; inputs: { changed: string[] }[] }[] }
      ).items;
      expect(items.map((i) => [i.unit, i.status])).toEqual([
        ['apps/web', 'red'],
        ['apps/edge', 'yellow'],
      ]);
      expect(items[0].inputs[0].changed).toEqual(['vpc_id']);
    });

    it('applying the consumer again (it read the new outputs) makes everything green', async () => {
      expect(
        await write('apps/web', { url: 'https://web' }, [
          httpRemote('network', 'platform/network', {
            vpc_id: 'vpc-2',
            cidr: '10.0.0.0/16',
            extra: 1,
          }),
        ]),
      ).toBe(200);
      expect((await status('apps/web')).status).toBe('green');
      expect((await status('apps/edge')).status).toBe('green');
      expect((await api('GET', '/v1/graph/stale')).json).toEqual({ items: [], cycles: [] });
      const g = await graph('?prefix=apps/web');
      expect(g.edges.find((e) => e.name === 'network')?.producerVersion).toBe(3);
    });

    it('restoring a consumer version brings back what that version read', async () => {
      const web = encodeURIComponent('apps/web');
      // version 1 read vpc-1: restored, the edge is stale again
      expect((await api('POST', `/v1/units/${web}/versions/1/restore`)).status).toBe(200);
      expect((await status('apps/web')).status).toBe('red');
      // version 2 read vpc-2: restored, current again
      expect((await api('POST', `/v1/units/${web}/versions/2/restore`)).status).toBe(200);
      expect((await status('apps/web')).status).toBe('green');
    });

    it('an s3 backend config (endpoint, bucket, key, workspace) is recognised too', async () => {
      expect(await write('platform/dns', { zone: 'Z1' })).toBe(200);
      const status200 = await write('apps/mail', { mx: 'mx1' }, [
        {
          name: 'dns',
          backend: 's3',
          config: {
            bucket: 'tfstate',
            key: 'platform/dns/terraform.tfstate',
            region: 'us-east-1',
            endpoints: { s3: `${server.url}/s3` },
            use_path_style: true,
            secret_key: PASSWORD,
          },
          outputs: { zone: 'Z1' },
        },
        // Not this server: ignored.
        {
          name: 'elsewhere',
          backend: 's3',
          config: {
            bucket: 'other',
            key: 'x/terraform.tfstate',
            endpoints: { s3: 'https://s3.example.com' },
          },
          outputs: {},
        },
      ]);
      expect(status200).toBe(200);
      const g = await graph('?prefix=apps/mail');
      expect(g.edges.map((e) => [e.producer.unit, e.name, e.status])).toEqual([
        ['platform/dns', 'dns', 'ok'],
      ]);
    });

    it('a consumer written without the data source loses the edge', async () => {
      expect(await write('apps/mail', { mx: 'mx2' })).toBe(200);
      expect((await graph('?prefix=apps/mail')).edges).toEqual([]);
    });

    it('a producer that no longer exists makes the edge unknown (the consumer is not red)', async () => {
      expect(await write('platform/legacy', { id: 'l1' })).toBe(200);
      expect(
        await write('apps/old', { v: 1 }, [httpRemote('legacy', 'platform/legacy', { id: 'l1' })]),
      ).toBe(200);
      expect(
        (await api('DELETE', `/v1/units/${encodeURIComponent('platform/legacy')}`)).status,
      ).toBe(204);
      const s = await status('apps/old');
      expect(s.status).toBe('green');
      expect(s.inputs.map((i) => i.status)).toEqual(['unknown']);
    });

    it('a purged consumer takes its edges with it', async () => {
      const unit = encodeURIComponent('apps/old');
      expect((await graph('?prefix=apps/old')).edges).toHaveLength(1);
      expect((await api('DELETE', `/v1/units/${unit}`)).status).toBe(204);
      expect((await graph('?prefix=apps/old')).edges).toHaveLength(1); // deleted: restorable
      expect((await api('POST', `/v1/units/${unit}/purge`)).status).toBe(204);
      expect((await graph('?prefix=apps/old')).edges).toEqual([]);
    });
  });

  describe('declared edges', () => {
    let declaredId: string;

    it('POST declares an edge naming the outputs that matter (201), compared on those only', async () => {
      expect(await write('data/warehouse', { dsn: 'pg://a', size: 'small' })).toBe(200);
      expect(await write('apps/reports', { r: 1 })).toBe(200);
      const r = await api('POST', '/v1/graph/edges', {
        producer: { unit: 'data/warehouse' },
        consumer: { unit: 'apps/reports' },
        name: 'warehouse',
        outputs: ['dsn'],
        input: 'dsn',
      });
      expect(r.status).toBe(201);
      expect(r.json).toMatchObject({
        source: 'declared',
        status: 'ok',
        outputs: ['dsn'],
        input: 'dsn',
      });
      declaredId = (r.json as { id: string }).id;
      expect(await write('data/warehouse', { dsn: 'pg://a', size: 'large' })).toBe(200);
      expect((await status('apps/reports')).status).toBe('green'); // size is not named
      expect(await write('data/warehouse', { dsn: 'pg://b', size: 'large' })).toBe(200);
      const s = await status('apps/reports');
      expect(s.status).toBe('red');
      expect(s.inputs[0]).toMatchObject({ changed: ['dsn'], staleSince: 3 });
      // the consumer's next write takes it as having read the producer's current outputs
      expect(await write('apps/reports', { r: 2 })).toBe(200);
      expect((await status('apps/reports')).status).toBe('green');
    });

    it('bad declarations are refused with the reason, and store nothing', async () => {
      const before = (await graph()).edges.length;
      const cases: [unknown, number, RegExp][] = [
        [
          {
            producer: { unit: 'data/warehouse' },
            consumer: { unit: 'apps/reports' },
            name: 'warehouse',
          },
          409,
          /already declared/,
        ],
        [
          { producer: { unit: 'apps/reports' }, consumer: { unit: 'apps/reports' } },
          400,
          /two different states/,
        ],
        [{ producer: { unit: 'no/such' }, consumer: { unit: 'apps/reports' } }, 404, /no\/such/],
        [{ producer: { unit: 'data/warehouse' } }, 400, /consumer/],
        [
          {
            producer: { unit: 'data/warehouse' },
            consumer: { unit: 'apps/reports' },
            outputs: ['bad name'],
          },
          400,
          /output name/,
        ],
        [{ producer: { unit: '../x' }, consumer: { unit: 'apps/reports' } }, 400, /./],
      ];
      for (const [body, code, message] of cases) {
        const r = await api('POST', '/v1/graph/edges', body);
        expect({ body, status: r.status }).toEqual({ body, status: code });
        expect((r.json as { message: string }).message).toMatch(message);
      }
      expect((await graph()).edges.length).toBe(before);
    });

    it('DELETE removes a declared edge (204); a discovered one is a 409; an unknown id a 404', async () => {
      const discovered = (await graph('?prefix=apps/web')).edges.find(
        (e) => e.source === 'discovered',
      );
      expect((await api('DELETE', `/v1/graph/edges/${discovered?.id}`)).status).toBe(409);
      expect((await api('DELETE', `/v1/graph/edges/${declaredId}`)).status).toBe(204);
      expect((await api('DELETE', `/v1/graph/edges/${declaredId}`)).status).toBe(404);
      expect((await api('DELETE', '/v1/graph/edges/not-a-uuid')).status).toBe(404);
    });

    it('a cycle is reported, and the stale list still ends', async () => {
      expect(await write('loop/a', { a: 1 })).toBe(200);
      expect(await write('loop/b', { b: 1 })).toBe(200);
      for (const [p, c] of [
        ['loop/a', 'loop/b'],
        ['loop/b', 'loop/a'],
      ]) {
        expect(
          (await api('POST', '/v1/graph/edges', { producer: { unit: p }, consumer: { unit: c } }))
            .status,
        ).toBe(201);
      }
      expect(await write('loop/a', { a: 2 })).toBe(200); // b's input is now stale
      const g = await graph('?prefix=loop/');
      expect(g.cycles).toEqual([
        [
          { unit: 'loop/a', workspace: 'default' },
          { unit: 'loop/b', workspace: 'default' },
        ],
      ]);
      const stale = (await api('GET', '/v1/graph/stale?prefix=loop/')).json as {
        items: { unit: string }[];
        cycles: unknown[];
      };
      expect(stale.items.map((i) => i.unit).sort()).toEqual(['loop/a', 'loop/b']);
      expect(stale.cycles).toHaveLength(1);
      expect((await status('loop/a')).cycles).toHaveLength(1);
    });
  });

  describe('the CLI', () => {
    const cli = (...args: string[]) =>
      runCli(args, { STATEHOUSE_SERVER: server.url, STATEHOUSE_TOKEN: server.token });

    it('statehouse unit status: the colour, the inputs and why; exit 0 green, 4 red, 3 yellow', async () => {
      const green = await cli('unit', 'status', 'apps/web');
      expect(green).toMatchObject({ code: 0 });
      expect(green.output).toMatch(/^apps\/web: green/m);
      expect(green.output).toContain('platform/network');
      const red = await cli('unit', 'status', 'loop/b');
      expect(red.code).toBe(4);
      expect(red.output).toMatch(/loop\/b: red/);
      expect(red.output).toMatch(/stale: a changed since version 2/);
      const yellow = await cli('unit', 'status', 'loop/a');
      expect(yellow.code).toBe(3);
      expect(yellow.output).toMatch(/red upstream: loop\/b/);
      const json = await cli('unit', 'status', 'loop/b', '--json');
      expect(JSON.parse(json.output)).toMatchObject({ unit: 'loop/b', status: 'red' });
      expect((await cli('unit', 'status', 'no/such')).code).toBe(1);
    });

    it('statehouse graph (table, json, dot, mermaid) and statehouse graph stale', async () => {
      const t = await cli('graph', '--prefix', 'apps/web');
      expect(t.code).toBe(0);
      expect(t.output).toMatch(/PRODUCER\s+CONSUMER/);
      expect(t.output).toMatch(/platform\/network\s+apps\/web\s+green/);
      const j = await cli('graph', '--prefix', 'apps/', '--format', 'json');
      expect((JSON.parse(j.output) as Graph).edges.length).toBeGreaterThan(1);
      const dot = await cli('graph', '--prefix', 'loop/', '--format', 'dot');
      expect(dot.output).toMatch(/^digraph statehouse/);
      const mermaid = await cli('graph', '--format', 'mermaid');
      expect(mermaid.output).toMatch(/^flowchart LR/);
      expect((await cli('graph', '--format', 'svg')).code).toBe(2);
      const stale = await cli('graph', 'stale');
      expect(stale.code).toBe(0);
      expect(stale.output).toMatch(/1\s+loop\/b\s+red\s+loop\/a: stale: a changed since version 2/);
      expect(stale.output).toMatch(/2\s+loop\/a\s+yellow/);
      expect(stale.output).toMatch(/cycle: loop\/a -> loop\/b/);
    });
  });

  describe('renderings', () => {
    it('DOT and Mermaid, with their content types, naming the states', async () => {
      const dot = await api('GET', '/v1/graph?prefix=apps/&format=dot');
      expect(dot.status).toBe(200);
      expect(dot.type).toMatch(/^text\/vnd\.graphviz/);
      expect(dot.text).toMatch(/^digraph statehouse \{/);
      expect(dot.text).toContain('"platform/network#default" -> "apps/web#default"');
      const mermaid = await api('GET', '/v1/graph?prefix=apps/&format=mermaid');
      expect(mermaid.status).toBe(200);
      expect(mermaid.type).toMatch(/^text\/plain/);
      expect(mermaid.text).toMatch(/^flowchart LR/);
      expect(mermaid.text).toContain('apps/web#default');
      expect((await api('GET', '/v1/graph?format=svg')).status).toBe(400);
    });
  });

  describe('visibility and RBAC', () => {
    let viewer: string;
    let writer: string;
    let guesser: string;

    beforeAll(async () => {
      const token = async (name: string): Promise<string> => {
        const r = await api('POST', '/v1/auth/tokens', { name, subject: `svc:${name}` });
        expect(r.status).toBe(201);
        return (r.json as { token: string }).token;
      };
      viewer = await token('viewer');
      writer = await token('writer');
      guesser = await token('guesser');
      const admin = await token('admin');
      expect((await api('POST', '/v1/rbac/init', { admin: { subject: 'svc:admin' } })).status).toBe(
        201,
      );
      const grant = async (name: string, subject: string, rules: unknown[]) => {
        for (const [path, body] of [
          ['/v1/rbac/permissions', { name, rules }],
          ['/v1/rbac/roles', { name, permissions: [name] }],
          ['/v1/rbac/assignments', { role: name, subject }],
        ] as const) {
          expect((await api('POST', path, body, admin)).status).toBe(201);
        }
      };
      await grant('apps-graph', 'svc:viewer', [
        { effect: 'allow', actions: ['graph.read'], resources: ['apps/**'] },
      ]);
      // May read platform/secrets' outputs, but not its sensitive ones.
      await grant('guesser', 'svc:guesser', [
        {
          effect: 'allow',
          actions: ['unit.read', 'unit.write', 'unit.create', 'graph.read'],
          resources: ['guess/**'],
        },
        { effect: 'allow', actions: ['outputs.read', 'graph.read'], resources: ['platform/**'] },
      ]);
      await grant('apps-writer', 'svc:writer', [
        {
          effect: 'allow',
          actions: ['unit.read', 'unit.write', 'unit.create', 'graph.read'],
          resources: ['apps/**'],
        },
      ]);
    });

    it('a viewer of apps/** sees the apps edges only; hidden producers are not named anywhere', async () => {
      const g = await graph('', viewer);
      expect(g.edges.length).toBeGreaterThan(0);
      for (const e of g.edges) {
        expect(e.producer.unit.startsWith('apps/')).toBe(true);
        expect(e.consumer.unit.startsWith('apps/')).toBe(true);
      }
      const s = await status('apps/web', viewer);
      expect(s.inputs).toEqual([
        expect.objectContaining({ producer: { hidden: true }, edge: null, name: null }),
      ]);
      const all = JSON.stringify([
        g,
        s,
        (await api('GET', '/v1/graph/stale', undefined, viewer)).json,
      ]);
      expect(all).not.toContain('platform/');
      expect(all).not.toContain('data/');
    });

    it('graph.read is needed for a unit status (403, whether or not it exists), and to declare needs graph.write', async () => {
      expect(
        (
          await api(
            'GET',
            `/v1/units/${encodeURIComponent('platform/network')}/status`,
            undefined,
            viewer,
          )
        ).status,
      ).toBe(403);
      expect(
        (
          await api(
            'GET',
            `/v1/units/${encodeURIComponent('platform/nothing')}/status`,
            undefined,
            viewer,
          )
        ).status,
      ).toBe(403);
      expect(
        (
          await api(
            'POST',
            '/v1/graph/edges',
            { producer: { unit: 'apps/web' }, consumer: { unit: 'apps/edge' }, name: 'x' },
            viewer,
          )
        ).status,
      ).toBe(403);
    });

    it('a writer who may not read a producer’s sensitive outputs learns nothing from a guess: right and wrong give the same colour, producerVersion and staleSince', async () => {
      const producer = 'platform/secrets';
      const write3 = (pw: string, endpoint = 'db.internal') =>
        write(producer, { endpoint, db_password: pw }, [], server.token, ['db_password']);
      expect(await write3('s1')).toBe(200); // version 1: the password a past guess targets
      expect(await write3('s2')).toBe(200); // version 2: the current one
      const claims = { right: 's2', wrong: 'not-the-password', past: 's1' };
      const remoteFor = (pw: string) =>
        httpRemote('db', producer, { endpoint: 'db.internal', db_password: pw });
      for (const [name, pw] of Object.entries(claims)) {
        expect(await write(`guess/${name}`, { x: 1 }, [remoteFor(pw)], guesser)).toBe(200);
      }
      const observe = async () => {
        const g = await graph('?prefix=guess/');
        const seen: Record<string, unknown> = {};
        for (const name of Object.keys(claims)) {
          const s = await status(`guess/${name}`);
          const e = g.edges.find((x) => x.consumer.unit === `guess/${name}`);
          seen[name] = {
            status: s.status,
            input: s.inputs.map((i) => [i.status, i.changed, i.staleSince, i.sensitiveOutputs]),
            producerVersion: e?.producerVersion,
            edge: [e?.status, e?.changed, e?.sensitiveOutputs],
          };
        }
        return seen;
      };
      const first = await observe();
      expect(first.right).toEqual({
        status: 'green',
        input: [['ok', [], null, 'excluded']],
        producerVersion: 2,
        edge: ['ok', [], 'excluded'],
      });
      expect(first.wrong).toEqual(first.right);
      expect(first.past).toEqual(first.right);

      // The password changes (version 3): still nothing to tell the guesses apart.
      expect(await write3('s3')).toBe(200);
      const second = await observe();
      expect(second.right).toEqual(first.right);
      expect(second.wrong).toEqual(first.right);
      expect(second.past).toEqual(first.right);

      // An output they may read changes (version 4): all red alike, stale since 4.
      expect(await write3('s3', 'db2.internal')).toBe(200);
      const third = await observe();
      expect(third.right).toEqual({
        status: 'red',
        input: [['stale', ['endpoint'], 4, 'excluded']],
        producerVersion: 2, // the newest version whose readable outputs they read, at their write
        edge: ['stale', ['endpoint'], 'excluded'],
      });
      expect(third.wrong).toEqual(third.right);
      expect(third.past).toEqual(third.right);

      // A writer who may read them has them compared: a wrong password is a stale edge.
      expect(
        await write('guess/admin', { x: 1 }, [
          httpRemote('db', producer, { endpoint: 'db2.internal', db_password: 'wrong' }),
        ]),
      ).toBe(200);
      const admin = await status('guess/admin');
      expect(admin.inputs).toEqual([
        expect.objectContaining({
          status: 'stale',
          changed: ['db_password'],
          sensitiveOutputs: 'compared',
        }),
      ]);
    });

    it('a writer who may not read a producer’s outputs cannot plant an edge to it', async () => {
      expect(
        await write(
          'apps/probe',
          { p: 1 },
          [
            httpRemote('secret', 'platform/network', { vpc_id: 'guess' }),
            httpRemote('fine', 'apps/web', { url: 'https://web' }),
          ],
          writer,
        ),
      ).toBe(200);
      const g = await graph('?prefix=apps/probe');
      expect(g.edges.map((e) => e.producer.unit)).toEqual(['apps/web']);
    });
  });
});
