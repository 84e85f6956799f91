/**
 * The TFE door's rules at the API level, against the real server (plain HTTP: the terraform
 * suite covers TLS): the announce-then-upload flow and its capability URL (wrong secret, wrong
 * bytes, a retry, a revoked announcer, a lock gone meanwhile), the TFE lock rule (409 even for
 * the holder), outputs-only and sensitive readers through the outputs endpoints and the
 * download, and a read that never creates a workspace.
 */
import { createHash, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../support/paths';
import { callJson, onFreshServer, RunningServer } from '../support/server';

const md5 = (s: string): string => createHash('md5').update(s).digest('hex');

function stateBody(serial: number, lineage: string, label: string): string {
  return JSON.stringify({
    version: 4,
    terraform_version: '1.11.4',
    serial,
    lineage,
    outputs: {
      label: { value: label, type: 'string' },
      password: { value: `pw-${label}`, type: 'string', sensitive: true },
      shape: { value: { n: 1 }, type: ['object', { n: 'number' }] },
    },
    resources: [],
    check_results: null,
  });
}

describe('the TFE door (API level)', () => {
  let server: RunningServer;
  onFreshServer((s) => (server = s));
  const lineage = randomUUID();
  const tokens: Record<string, string> = {};
  let wsId = '';

  const tfe = async (
    who: string,
    method: string,
    path: string,
    body?: unknown,
  ): Promise<{ status: number; json: Record<string, unknown> }> => {
    const r = await fetch(`${server.url}${path}`, {
      method,
      headers: {
        Authorization: `Bearer ${tokens[who] ?? server.token}`,
        ...(body === undefined ? {} : { 'Content-Type': 'application/vnd.api+json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    return { status: r.status, json: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
  };
  /** The current state version's download, as `who` (its URL from the state version). */
  const downloadCurrent = async (who: string, id: string): Promise<Response> => {
    const current = await tfe(who, 'GET', `/api/v2/workspaces/${id}/current-state-version`);
    expect(current.status).toBe(200);
    const url = (current.json.data as { attributes: Record<string, string> }).attributes[
      'hosted-state-download-url'
    ];
    return fetch(`${server.url}${new URL(url).pathname}`, {
      headers: { Authorization: `Bearer ${tokens[who]}` },
    });
  };
  const upload = async (url: string, bytes: string): Promise<number> => {
    const u = new URL(url);
    const r = await fetch(`${server.url}${u.pathname}${u.search}`, {
      method: 'PUT',
      headers: { 'Content-Type': 'application/octet-stream' },
      body: bytes,
    });
    await r.arrayBuffer();
    return r.status;
  };
  const versions = async (): Promise<number> => {
    const r = await callJson(server, 'GET', '/v1/units/acme%2Fnet/versions', server.token);
    return r.status === 404 ? 0 : (r.json.items as unknown[]).length;
  };
  const announce = async (who: string, serial: number, bytes: string) =>
    tfe(who, 'POST', `/api/v2/workspaces/${wsId}/state-versions`, {
      data: { type: 'state-versions', attributes: { serial, md5: md5(bytes), lineage } },
    });
  const uploadUrl = (r: { json: Record<string, unknown> }): string =>
    (r.json.data as { attributes: Record<string, string> }).attributes['hosted-state-upload-url'];

  beforeAll(async () => {
    const mint = async (name: string): Promise<void> => {
      const r = await callJson(server, 'POST', '/v1/auth/tokens', server.token, {
        name,
        subject: `svc:${name}`,
      });
      expect(r.status).toBe(201);
      tokens[name] = (r.json as { token: string }).token;
    };
    for (const n of ['admin', 'writer', 'other', 'outputs', 'sensitive', 'outsider']) await mint(n);
    expect(
      (
        await callJson(server, 'POST', '/v1/rbac/init', server.token, {
          admin: { subject: 'svc:admin' },
        })
      ).status,
    ).toBe(201);
    const grant = async (name: string, rules: unknown[]): Promise<void> => {
      for (const [path, body] of [
        ['/v1/rbac/permissions', { name, rules }],
        ['/v1/rbac/roles', { name, permissions: [name] }],
        ['/v1/rbac/assignments', { role: name, subject: `svc:${name}` }],
      ] as const) {
        expect((await callJson(server, 'POST', path, tokens.admin, body)).status).toBe(201);
      }
    };
    const everything = ['unit.create', 'unit.read', 'unit.write', 'unit.lock', 'unit.delete'];
    await grant('writer', [{ effect: 'allow', actions: everything, resources: ['acme/**'] }]);
    await grant('other', [{ effect: 'allow', actions: everything, resources: ['acme/**'] }]);
    await grant('outputs', [
      { effect: 'allow', actions: ['outputs.read'], resources: ['acme/net'] },
    ]);
    await grant('sensitive', [
      {
        effect: 'allow',
        actions: ['outputs.read', 'outputs.read-sensitive'],
        resources: ['acme/net'],
      },
    ]);
  });

  it('a read never creates a workspace; creating needs unit.create', async () => {
    const missing = await tfe('writer', 'GET', '/api/v2/organizations/acme/workspaces/net');
    expect(missing.status).toBe(404);
    expect(await versions()).toBe(0);
    const denied = await tfe('outputs', 'POST', '/api/v2/organizations/acme/workspaces', {
      data: { type: 'workspaces', attributes: { name: 'net' } },
    });
    expect(denied.status).toBe(403);
    const created = await tfe('writer', 'POST', '/api/v2/organizations/acme/workspaces', {
      data: { type: 'workspaces', attributes: { name: 'net', 'terraform-version': '1.9.1' } },
    });
    expect(created.status).toBe(201);
    wsId = (created.json.data as { id: string }).id;
    expect(wsId).toMatch(/^ws-[^/\s]+$/);
    const bad = await tfe('writer', 'POST', '/api/v2/organizations/acme/workspaces', {
      data: { type: 'workspaces', attributes: { name: 'a:b' } },
    });
    expect(bad.status).toBe(422);
    const organization = await tfe('outsider', 'GET', '/api/v2/organizations/acme/entitlement-set');
    expect(organization.status).toBe(404);
  });

  it('a state version needs the caller’s own lock; a second TFE lock is refused even for the holder', async () => {
    const bytes = stateBody(1, lineage, 'one');
    expect((await announce('writer', 1, bytes)).status).toBe(409);
    expect(
      (await tfe('writer', 'POST', `/api/v2/workspaces/${wsId}/actions/lock`, {})).status,
    ).toBe(200);
    expect(
      (await tfe('writer', 'POST', `/api/v2/workspaces/${wsId}/actions/lock`, {})).status,
    ).toBe(409);
    expect((await tfe('other', 'POST', `/api/v2/workspaces/${wsId}/actions/lock`, {})).status).toBe(
      409,
    );
    expect((await announce('other', 1, bytes)).status).toBe(409);
    expect((await tfe('other', 'POST', `/api/v2/workspaces/${wsId}/actions/unlock`)).status).toBe(
      409,
    );
  });

  it('the upload URL: a wrong secret or wrong bytes store nothing; the right bytes once, a retry is the same', async () => {
    const bytes = stateBody(1, lineage, 'one');
    const announced = await announce('writer', 1, bytes);
    expect(announced.status).toBe(201);
    const url = uploadUrl(announced);
    expect(url).toMatch(
      /^http:\/\/.+\/api\/v2\/state-versions\/svu-[0-9a-f]{32}\/upload\?capability=/,
    );
    expect(await upload(url.replace(/capability=[^&]+/, 'capability=guess'), bytes)).toBe(404);
    expect(await upload(url, stateBody(1, lineage, 'other'))).toBe(400);
    expect(await versions()).toBe(0);
    expect(await upload(url, bytes)).toBe(200);
    expect(await upload(url, bytes)).toBe(200);
    expect(await versions()).toBe(1);
    const id = (announced.json.data as { id: string }).id;
    const shown = await tfe('writer', 'GET', `/api/v2/state-versions/${id}`);
    expect((shown.json.data as { attributes: { status: string } }).attributes.status).toBe(
      'finalized',
    );
    const json = await upload(url.replace('/upload?', '/upload/json?'), '{"anything":1}');
    expect(json).toBe(200);
  });

  it('the upload capability never reaches the server’s log', () => {
    const log = server.output();
    expect(log).toContain('/upload?capability=[redacted]');
    expect(log).not.toMatch(/capability=(?!\[redacted\])/);
  });

  it('an older serial is refused at the create, before any upload', async () => {
    const older = await announce('writer', 0, stateBody(0, lineage, 'zero'));
    expect(older.status).toBe(409);
    const sameSerialOtherBytes = await announce('writer', 1, stateBody(1, lineage, 'changed'));
    expect(sameSerialOtherBytes.status).toBe(409);
  });

  it('an upload after the lock was force-unlocked, or after its token was revoked, stores nothing', async () => {
    const bytes = stateBody(2, lineage, 'two');
    const announced = await announce('writer', 2, bytes);
    expect(announced.status).toBe(201);
    expect(
      (await callJson(server, 'POST', '/v1/units/acme%2Fnet/force-unlock', tokens.admin)).status,
    ).toBe(200);
    expect(await upload(uploadUrl(announced), bytes)).toBe(409);
    expect(await versions()).toBe(1);

    expect(
      (await tfe('writer', 'POST', `/api/v2/workspaces/${wsId}/actions/lock`, {})).status,
    ).toBe(200);
    const again = await announce('writer', 2, bytes);
    expect(again.status).toBe(201);
    const list = await callJson(server, 'GET', '/v1/auth/tokens', server.token);
    const mine = (list.json as unknown as { id: string; name: string }[]).find(
      (t) => t.name === 'writer',
    );
    expect(mine).toBeDefined();
    const revoked = await callJson(server, 'DELETE', `/v1/auth/tokens/${mine?.id}`, server.token);
    expect([200, 204]).toContain(revoked.status);
    expect(await upload(uploadUrl(again), bytes)).toBe(401);
    expect(await versions()).toBe(1);
    expect(
      (await tfe('admin', 'POST', `/api/v2/workspaces/${wsId}/actions/force-unlock`)).status,
    ).toBe(200);
  });

  it('outputs: an outputs-only reader sees the plain ones, a sensitive reader fetches the value one by one', async () => {
    const plain = await tfe(
      'outputs',
      'GET',
      `/api/v2/workspaces/${wsId}/current-state-version-outputs`,
    );
    expect(plain.status).toBe(200);
    const names = (plain.json.data as { attributes: { name: string } }[]).map(
      (o) => o.attributes.name,
    );
    expect(names.sort()).toEqual(['label', 'shape']);
    const shape = (plain.json.data as { attributes: Record<string, unknown> }[]).find(
      (o) => o.attributes.name === 'shape',
    );
    expect(shape?.attributes['detailed-type']).toEqual(['object', { n: 'number' }]);

    const all = await tfe(
      'sensitive',
      'GET',
      `/api/v2/workspaces/${wsId}/current-state-version-outputs`,
    );
    const pw = (all.json.data as { id: string; attributes: Record<string, unknown> }[]).find(
      (o) => o.attributes.name === 'password',
    );
    expect(pw?.attributes.value).toBeNull();
    const one = await tfe('sensitive', 'GET', `/api/v2/state-version-outputs/${pw?.id}`);
    expect((one.json.data as { attributes: { value: string } }).attributes.value).toBe('pw-one');
    const notForYou = await tfe('outputs', 'GET', `/api/v2/state-version-outputs/${pw?.id}`);
    expect(notForYou.status).toBe(404);

    const download = await downloadCurrent('outputs', wsId);
    const state = (await download.json()) as {
      outputs: Record<string, unknown>;
      resources: unknown[];
    };
    expect(Object.keys(state.outputs).sort()).toEqual(['label', 'shape']);
    expect(state.resources).toEqual([]);

    const outsider = await tfe('outsider', 'GET', `/api/v2/workspaces/${wsId}`);
    expect(outsider.status).toBe(403);
    expect(Array.isArray(outsider.json.errors)).toBe(true);
  });
  it('a client-side encrypted state (OpenTofu): its outputs answer a JSON:API 409, its download the stored bytes', async () => {
    const sealed = readFileSync(
      join(ROOT, 'test/fixtures/terraform-1.11/opentofu-encrypted.HANDMADE.tfstate'),
    );
    const put = await fetch(`${server.url}/v1/units/acme%2Fsealed/state`, {
      method: 'PUT',
      headers: { Authorization: `Bearer ${tokens.other}`, 'Content-Type': 'application/json' },
      body: sealed,
    });
    expect(put.status).toBeLessThan(300);
    const ws = await tfe('other', 'GET', '/api/v2/organizations/acme/workspaces/sealed');
    expect(ws.status).toBe(200);
    const id = (ws.json.data as { id: string }).id;
    const outputs = await tfe(
      'other',
      'GET',
      `/api/v2/workspaces/${id}/current-state-version-outputs`,
    );
    expect(outputs.status).toBe(409);
    const errors = outputs.json.errors as { status: string; detail: string }[];
    expect(errors[0].status).toBe('409');
    expect(errors[0].detail).toMatch(/client-side encrypted/);
    const download = await downloadCurrent('other', id);
    expect(Buffer.from(await download.arrayBuffer()).equals(sealed)).toBe(true);
  });
  it('OpenTofu’s calls: its version string kept as given, key-only tags through relationships/tags, no tag-bindings', async () => {
    const made = await tfe('other', 'POST', '/api/v2/organizations/acme/workspaces', {
      data: { type: 'workspaces', attributes: { name: 'tofu-ws', 'terraform-version': '1.10.6' } },
    });
    expect(made.status).toBe(201);
    const id = (made.json.data as { id: string }).id;
    const patched = await tfe('other', 'PATCH', `/api/v2/workspaces/${id}`, {
      data: { type: 'workspaces', attributes: { 'terraform-version': '1.10.7-rc1' } },
    });
    expect(patched.status).toBe(200);
    const tagged = await tfe('other', 'POST', `/api/v2/workspaces/${id}/relationships/tags`, {
      data: [{ type: 'tags', attributes: { name: 'tofu' } }],
    });
    expect(tagged.status).toBe(204);
    const shown = await tfe('other', 'GET', '/api/v2/organizations/acme/workspaces/tofu-ws');
    expect((shown.json.data as { attributes: Record<string, unknown> }).attributes).toMatchObject({
      'terraform-version': '1.10.7-rc1',
      'tag-names': ['tofu'],
      'execution-mode': 'local',
    });
    const bySet = await tfe(
      'other',
      'GET',
      '/api/v2/organizations/acme/workspaces?search%5Btags%5D=tofu',
    );
    expect((bySet.json.data as { id: string }[]).map((w) => w.id)).toEqual([id]);
    const bindings = await tfe('other', 'GET', `/api/v2/workspaces/${id}/tag-bindings`);
    expect(bindings.status).toBe(404);
    expect(Array.isArray(bindings.json.errors)).toBe(true);
  });

  it('a workspace holds at most 100 tags, however they are sent; a refused create makes nothing', async () => {
    const many = Array.from({ length: 101 }, (_, i) => `t${i}`);
    const create = await tfe('other', 'POST', '/api/v2/organizations/acme/workspaces', {
      data: { type: 'workspaces', attributes: { name: 'many-tags', 'tag-names': many } },
    });
    expect(create.status).toBe(400);
    expect(JSON.stringify(create.json.errors)).toMatch(/at most 100 tags/);
    const missing = await tfe('other', 'GET', '/api/v2/organizations/acme/workspaces/many-tags');
    expect(missing.status).toBe(404);
    const made = await tfe('other', 'POST', '/api/v2/organizations/acme/workspaces', {
      data: {
        type: 'workspaces',
        attributes: { name: 'many-tags', 'tag-names': many.slice(0, 100) },
      },
    });
    expect(made.status).toBe(201);
    const id = (made.json.data as { id: string }).id;
    const patch = await tfe('other', 'PATCH', `/api/v2/workspaces/${id}`, {
      data: { type: 'workspaces', attributes: { 'tag-names': [...many, ...many] } },
    });
    expect(patch.status).toBe(400);
    const more = await tfe('other', 'POST', `/api/v2/workspaces/${id}/relationships/tags`, {
      data: [{ type: 'tags', attributes: { name: 'one-more' } }],
    });
    expect(more.status).toBe(400);
    const kept = await tfe('other', 'GET', '/api/v2/organizations/acme/workspaces/many-tags');
    expect(
      (kept.json.data as { attributes: { 'tag-names': string[] } }).attributes['tag-names'],
    ).toHaveLength(100);
    // A search naming every tag once finds it; naming them over and over is the same search.
    const query = (tags: string[]): string =>
      `/api/v2/organizations/acme/workspaces?search%5Btags%5D=${encodeURIComponent(tags.join(','))}`;
    const all = many.slice(0, 100);
    for (const tags of [all, [...all, ...all, ...all, ...all, ...all]]) {
      const found = await tfe('other', 'GET', query(tags));
      expect((found.json.data as { id: string }[]).map((w) => w.id)).toEqual([id]);
    }
    const tooMany = await tfe('other', 'GET', query(many));
    expect(tooMany.status).toBe(200);
    expect(tooMany.json.data).toEqual([]);
  });

  it('the older tfe provider’s outputs path: state-versions/:id/outputs, sensitive values by id', async () => {
    const current = await tfe(
      'sensitive',
      'GET',
      `/api/v2/workspaces/${wsId}/current-state-version`,
    );
    expect(current.status).toBe(200);
    const svId = (current.json.data as { id: string }).id;
    const list = await tfe('sensitive', 'GET', `/api/v2/state-versions/${svId}/outputs`);
    expect(list.status).toBe(200);
    const items = list.json.data as {
      id: string;
      attributes: { name: string; value: unknown; sensitive: boolean };
    }[];
    const pw = items.find((o) => o.attributes.name === 'password');
    expect(pw?.attributes).toMatchObject({ sensitive: true, value: null });
    const one = await tfe('sensitive', 'GET', `/api/v2/state-version-outputs/${pw?.id}`);
    expect((one.json.data as { attributes: { value: unknown } }).attributes.value).toBe('pw-one');
    const plain = await tfe('outputs', 'GET', `/api/v2/state-versions/${svId}/outputs`);
    expect(
      (plain.json.data as { attributes: { name: string } }[]).map((o) => o.attributes.name).sort(),
    ).toEqual(['label', 'shape']);
  });
});
