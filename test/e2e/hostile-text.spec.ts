/**
 * Text PostgreSQL cannot store, through every door of the real server (embedded database, and
 * PostgreSQL via scripts/with-postgres.sh). What Terraform cannot write — an unpaired UTF-16
 * surrogate anywhere in a state, a NUL in an output name, `lineage`, `terraform_version` or a
 * type name — is a 400 in the door's format naming what is wrong, and stores nothing (on
 * `/s3`, `/v1/backend` and `/v1/units/…/state`). What Terraform can write — a NUL inside an
 * output value, a map key, a resource attribute — is stored byte for byte and its outputs read
 * back. Every JSON request string of the management API is checked in one place: a NUL or an
 * unpaired surrogate (or a body nested past 64 levels) is a 400 naming the field. A consumer
 * state whose `terraform_remote_state` names and output names hold a NUL is recorded in the
 * graph. Before these rules, each of these answered 500.
 */
import {
  GetObjectCommand,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
} from '@aws-sdk/client-s3';
import { createHash, randomUUID } from 'node:crypto';
import { freshServerEnv } from '../support/database';
import { RunningServer, spawnServer } from '../support/server';

jest.setTimeout(120_000);

type Door = 's3' | 'http' | 'api';
const DOORS: Door[] = ['s3', 'http', 'api'];

interface Creds {
  AccessKeyId: string;
  SecretAccessKey: string;
  SessionToken: string;
}

let server: RunningServer;
let cleanup: (() => Promise<void>) | undefined;
let token: string;
let s3: S3Client;

const sha256 = (b: Buffer | string): string => createHash('sha256').update(b).digest('hex');

function api(path: string, init: RequestInit = {}, bearer = server.token): Promise<Response> {
  return fetch(`${server.url}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${bearer}`, ...(init.headers ?? {}) },
  });
}

function postJson(path: string, body: unknown, method = 'POST'): Promise<Response> {
  return api(path, {
    method,
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

/** A state's body as Terraform writes it (JSON.stringify escapes NUL and lone surrogates). */
function stateText(fields: Record<string, unknown> = {}): string {
  return `${JSON.stringify(
    {
      version: 4,
      terraform_version: '1.11.4',
      serial: 1,
      lineage: `lineage-${randomUUID()}`,
      outputs: {},
      resources: [],
      check_results: null,
      ...fields,
    },
    null,
    2,
  )}\n`;
}

interface Answer {
  status: number;
  /** The JSON error code, or the S3 error code. */
  code?: string;
  message?: string;
  contentType?: string;
}

async function write(door: Door, unit: string, body: string): Promise<Answer> {
  if (door === 's3') {
    try {
      await s3.send(
        new PutObjectCommand({
          Bucket: 'tfstate',
          Key: `${unit}/terraform.tfstate`,
          Body: Buffer.from(body),
        }),
      );
      return { status: 200 };
    } catch (e) {
      if (!(e instanceof S3ServiceException)) throw e;
      return { status: e.$metadata.httpStatusCode ?? 0, code: e.name, message: e.message };
    }
  }
  const res =
    door === 'http'
      ? await api(`/v1/backend/${unit}`, { method: 'POST', body })
      : await api(`/v1/units/${encodeURIComponent(unit)}/state`, { method: 'PUT', body });
  const text = await res.text();
  const contentType = res.headers.get('content-type') ?? '';
  if (res.status < 300) return { status: res.status, contentType };
  const json = JSON.parse(text) as { code: string; message: string };
  return { status: res.status, code: json.code, message: json.message, contentType };
}

async function read(door: Door, unit: string): Promise<Buffer> {
  if (door === 's3') {
    const got = await s3.send(
      new GetObjectCommand({ Bucket: 'tfstate', Key: `${unit}/terraform.tfstate` }),
    );
    return Buffer.from(
      await (got.Body as { transformToByteArray(): Promise<Uint8Array> }).transformToByteArray(),
    );
  }
  const res =
    door === 'http'
      ? await api(`/v1/backend/${unit}`)
      : await api(`/v1/units/${encodeURIComponent(unit)}/state`);
  expect(res.status).toBe(200);
  return Buffer.from(await res.arrayBuffer());
}

/** The unit's versions, or 'no unit' when nothing was ever stored under it. */
async function versions(unit: string): Promise<unknown[] | 'no unit'> {
  const res = await api(`/v1/units/${encodeURIComponent(unit)}/versions`);
  if (res.status === 404) return 'no unit';
  expect(res.status).toBe(200);
  return ((await res.json()) as { items: unknown[] }).items;
}

beforeAll(async () => {
  const fresh = await freshServerEnv();
  cleanup = fresh.cleanup;
  server = await spawnServer(fresh.env);
  const t = await postJson('/v1/auth/tokens', { name: 'hostile-text', subject: 'svc:hostile' });
  expect(t.status).toBe(201);
  token = ((await t.json()) as { token: string }).token;
  const c = await api('/v1/auth/issue-s3-creds', { method: 'POST' }, token);
  expect(c.status).toBe(200);
  const creds = (await c.json()) as Creds;
  s3 = new S3Client({
    endpoint: `${server.url}/s3`,
    forcePathStyle: true,
    region: 'us-east-1',
    credentials: {
      accessKeyId: creds.AccessKeyId,
      secretAccessKey: creds.SecretAccessKey,
      sessionToken: creds.SessionToken,
    },
  });
});

afterAll(async () => {
  s3?.destroy();
  await server?.stop();
  await cleanup?.();
});

afterEach(() => {
  // Whatever a test sent, the server answered it without an unexpected error.
  expect(server.output()).not.toMatch(/"msg":"unexpected error/);
});

describe('what Terraform cannot write: 400 on every door, naming it, nothing stored', () => {
  const cases: [string, string, RegExp][] = [
    [
      'an unpaired surrogate in an output value',
      stateText({ outputs: { x: { value: 'a\ud800', type: 'string' } } }),
      /unpaired UTF-16 surrogate/,
    ],
    [
      'an unpaired surrogate in a resource attribute',
      stateText({
        resources: [
          {
            mode: 'managed',
            type: 'terraform_data',
            name: 'n',
            instances: [{ attributes: { input: { value: '\udc00' } } }],
          },
        ],
      }),
      /unpaired UTF-16 surrogate/,
    ],
    [
      'a NUL in an output name',
      stateText({ outputs: { 'a\u0000b': { value: 1, type: 'number' } } }),
      /NUL character in an output name/,
    ],
    ['a NUL in the lineage', stateText({ lineage: 'line\u0000age' }), /NUL character in "lineage"/],
    [
      'a NUL in terraform_version',
      stateText({ terraform_version: '1.11\u0000' }),
      /NUL character in "terraform_version"/,
    ],
    [
      "a NUL in a type name of an output's type",
      stateText({ outputs: { x: { value: 'v', type: 'str\u0000ing' } } }),
      /NUL character in a type name/,
    ],
  ];

  it.each(cases)('%s', async (_what, body, named) => {
    for (const door of DOORS) {
      const unit = `hostile/refused-${door}-${randomUUID().slice(0, 8)}`;
      const answer = await write(door, unit, body);
      if (door === 's3') {
        expect(answer).toMatchObject({ status: 400, code: 'InvalidArgument' });
      } else {
        expect(answer).toMatchObject({ status: 400, code: 'invalid_state' });
        expect(answer.contentType).toMatch(/^application\/json/);
      }
      expect(answer.message).toMatch(named);
      expect(await versions(unit)).toEqual('no unit');
    }
  });
});

describe('what Terraform can write: a NUL inside values is stored byte for byte', () => {
  const body = stateText({
    outputs: {
      nul: { value: '\u0000', type: 'string' },
      secret: { value: 'pass\u0000word', type: 'string', sensitive: true },
      // Terraform's own type for `{ "k\0" = "v\0" }`: the key is an attribute name of the type.
      obj: { value: { 'k\u0000': 'v\u0000' }, type: ['object', { 'k\u0000': 'string' }] },
    },
    resources: [
      {
        mode: 'managed',
        type: 'terraform_data',
        name: 'n',
        provider: 'provider["terraform.io/builtin/terraform"]',
        instances: [
          { schema_version: 0, attributes: { input: { value: '\u0000', type: 'string' } } },
        ],
      },
    ],
  });

  it.each(DOORS)(
    'through %s: accepted, read back byte for byte on every door, outputs intact',
    async (door) => {
      const unit = `hostile/nul-${door}-${randomUUID().slice(0, 8)}`;
      expect((await write(door, unit, body)).status).toBeLessThan(300);
      for (const reader of DOORS) expect(sha256(await read(reader, unit))).toBe(sha256(body));
      const items = await versions(unit);
      expect(items).toHaveLength(1);
      const outputs = await api(`/v1/units/${encodeURIComponent(unit)}/outputs`);
      expect(outputs.status).toBe(200);
      expect(((await outputs.json()) as { outputs: unknown }).outputs).toEqual({
        nul: { value: '\u0000', type: 'string' },
        secret: { value: 'pass\u0000word', type: 'string', sensitive: true },
        obj: { value: { 'k\u0000': 'v\u0000' }, type: ['object', { 'k\u0000': 'string' }] },
      });
      const version1 = await api(`/v1/units/${encodeURIComponent(unit)}/versions/1`);
      expect(sha256(Buffer.from(await version1.arrayBuffer()))).toBe(sha256(body));
    },
  );
});

describe('management API: one check for every JSON request string', () => {
  it('POST /v1/rbac/permissions with a NUL in description: 400 naming it, nothing created', async () => {
    const name = `p-${randomUUID().slice(0, 8)}`;
    const res = await postJson('/v1/rbac/permissions', {
      name,
      description: 'a\u0000b',
      rules: [{ effect: 'allow', actions: ['unit.read'], resources: ['**'] }],
    });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { code: string; message: string };
    expect(body).toMatchObject({ code: 'invalid_request' });
    expect(body.message).toBe(
      '"description" contains a NUL character, which is not allowed in request strings',
    );
    const list = await api('/v1/rbac/permissions');
    expect(JSON.stringify(await list.json())).not.toContain(name);
  });

  it.each([
    [
      'an unpaired surrogate in a rule resource',
      '/v1/rbac/permissions',
      {
        name: 'p-surrogate',
        rules: [{ effect: 'allow', actions: ['unit.read'], resources: ['team/\ud800'] }],
      },
      '"rules[0].resources[0]" contains an unpaired UTF-16 surrogate',
    ],
    ['a NUL in a unit name', '/v1/units', { name: 'team/a\u0000' }, '"name" contains a NUL'],
    [
      'a NUL in an API token name',
      '/v1/auth/tokens',
      { name: 'ci\u0000', subject: 'svc:ci' },
      '"name" contains a NUL',
    ],
    [
      'a NUL in a member name',
      '/v1/rbac/permissions',
      { name: 'p', rules: [], ['x\u0000']: 1 },
      'contains a NUL',
    ],
  ])('%s: 400 naming the field', async (_what, path, body, message) => {
    const res = await postJson(path, body);
    expect(res.status).toBe(400);
    const json = (await res.json()) as { code: string; message: string };
    expect(json.code).toBe('invalid_request');
    expect(json.message).toContain(message);
  });

  it('a body nested 100,000 levels deep is a 400, not a stack overflow', async () => {
    const deep = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;
    const res = await postJson('/v1/rbac/permissions', `{"name":"p","description":${deep}}`);
    expect(res.status).toBe(400);
    expect(((await res.json()) as { message: string }).message).toMatch(
      /^"description(\[0\])+" nests arrays and objects deeper than 64 levels$/,
    );
  });

  it('a NUL in a query or path parameter is a 400 naming it', async () => {
    const q = await api('/v1/audit?principal=a%00b');
    expect(q.status).toBe(400);
    expect(((await q.json()) as { message: string }).message).toContain(
      'query parameter "principal" contains a NUL character',
    );
    const p = await api('/v1/rbac/permissions/a%00b', { method: 'DELETE' });
    expect(p.status).toBe(400);
    expect(((await p.json()) as { message: string }).message).toContain(
      'path parameter "name" contains a NUL character',
    );
  });

  it('a lock ID with an unpaired surrogate is refused, and no lock is taken', async () => {
    const unit = `hostile/lock-${randomUUID().slice(0, 8)}`;
    const path = `/v1/units/${encodeURIComponent(unit)}/lock`;
    const res = await postJson(path, '{"ID":"\\ud800","Operation":"OperationTypeApply"}');
    expect(res.status).toBe(400);
    const held = await api(path);
    expect([404, 204]).toContain(held.status);
  });
});

describe('graph: names and output names from a consumer state are stored safely', () => {
  it('a terraform_remote_state with NUL in its name, for_each key and output names is recorded', async () => {
    const producer = `hostile/producer-${randomUUID().slice(0, 8)}`;
    const consumer = `hostile/consumer-${randomUUID().slice(0, 8)}`;
    expect(
      (
        await write(
          'api',
          producer,
          stateText({ outputs: { id: { value: 'p1', type: 'string' } } }),
        )
      ).status,
    ).toBe(200);
    const remote = (name: string, indexKey: string | undefined) => ({
      mode: 'data',
      type: 'terraform_remote_state',
      name,
      provider: 'provider["terraform.io/builtin/terraform"]',
      instances: [
        {
          ...(indexKey === undefined ? {} : { index_key: indexKey }),
          schema_version: 0,
          attributes: {
            backend: 'http',
            config: {
              value: { address: `${server.url}/v1/backend/${producer}` },
              type: ['object', {}],
            },
            defaults: null,
            outputs: { value: { id: 'p1', 'odd\u0000': 'x' }, type: ['object', {}] },
            workspace: null,
          },
          sensitive_attributes: [],
        },
      ],
    });
    const body = stateText({
      resources: [remote('each', 'k\u0000'), remote('n\u0000', undefined)],
    });
    expect((await write('api', consumer, body)).status).toBe(200);
    const status = await api(`/v1/units/${encodeURIComponent(consumer)}/status`);
    expect(status.status).toBe(200);
    const text = await status.text();
    expect(text).toContain(producer);
    expect(text).toContain('n\\\\u0000');
  });
});
