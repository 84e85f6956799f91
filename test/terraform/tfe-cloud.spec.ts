/**
 * Real Terraform (1.11.x on the PATH) against the real Statehouse server through its TFE door:
 * the `cloud {}` block with `hostname = "127.0.0.1:PORT"`, over the server's own TLS
 * (STATEHOUSE_TLS_CERT_FILE, a certificate from a test CA with SAN 127.0.0.1; Terraform trusts
 * the CA through SSL_CERT_FILE), the token in a `credentials "127.0.0.1:PORT"` block of a clean
 * CLI config. Organization `acme`, workspace `network` is the unit `acme/network`.
 *
 * The steps build on each other: init creates the workspace; apply writes version 1 (door
 * `tfe`); a second apply version 2; `state pull` is the stored state; `output` reads outputs
 * (the sensitive one with `-json`); a lock taken through the management API makes `plan` fail
 * until `terraform force-unlock` clears it; a TFE lock blocks an HTTP-backend writer; `state
 * push` of an older serial is refused at the create; `backend "remote"` with `prefix` sees
 * the same state; `terraform_remote_state { backend = "remote" }` reads the outputs, and an
 * outputs-only consumer gets them too; the tags strategy (`workspaces { tags }`) runs
 * `workspace new`, `list`, `select` and `delete` (safe-delete refused while resources remain);
 * `workspaces { project }` makes the project, then the workspace in it.
 * Without `terraform` on the PATH this suite FAILS.
 */
import { RunningServer } from '../support/server';
import {
  bearerTlsFetch,
  credentialsConfig,
  TlsAnswer,
  tlsFetch,
  startTlsServer,
  TlsServer,
} from '../support/tfe';
import * as tf from '../support/terraform';
import { randomUUID } from 'node:crypto';
import * as fs from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

type TfResult = tf.TfResult;

jest.setTimeout(180_000);

const CONFIG = (host: string, workspaces: string): string => `
terraform {
  cloud {
    hostname     = "${host}"
    organization = "acme"
    workspaces {
      ${workspaces}
    }
  }
}

variable "label" {
  type    = string
  default = "one"
}

variable "sleep_seconds" {
  type    = number
  default = 0
}

resource "terraform_data" "main" {
  input            = var.label
  triggers_replace = [var.label]

  provisioner "local-exec" {
    command = "sleep \${var.sleep_seconds}"
  }
}

output "label" {
  value = terraform_data.main.output
}

output "secret" {
  value     = "s3cr3t-\${var.label}"
  sensitive = true
}

output "shape" {
  value = { list = [1, 2], name = var.label }
}
`;

describe('real terraform through the cloud {} block (TFE door)', () => {
  const workspace = `network-${randomUUID().slice(0, 8)}`;
  const unit = `acme/${workspace}`;
  const unitPath = encodeURIComponent(unit);
  let server: RunningServer;
  let tls: TlsServer | undefined;
  let scratch: string;
  let ca: string;
  let host: string;
  let base: string;
  let tfEnv: Record<string, string>;
  let work: string;

  const api = (path: string, init: Parameters<typeof tlsFetch>[3] = {}): Promise<TlsAnswer> =>
    bearerTlsFetch(base, ca, server.token, path, init);
  const terraform = (cwd: string, args: string[], env = tfEnv): Promise<TfResult> =>
    tf.runTerraform(cwd, args, env, 120_000);
  const tfOk = (cwd: string, args: string[], env = tfEnv): Promise<TfResult> =>
    tf.runTerraformOk(cwd, args, env, { timeoutMs: 120_000 });

  function workDir(name: string, config: string): string {
    const dir = join(scratch, name);
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(join(dir, 'main.tf'), config);
    return dir;
  }

  async function versions(): Promise<{ version: number; serial: number; door: string }[]> {
    const r = await api(`/v1/units/${unitPath}/versions`);
    expect(r.status).toBe(200);
    const items = (r.json() as { items: { version: number; serial: number; door: string }[] })
      .items;
    return [...items].sort((a, b) => a.version - b.version);
  }

  beforeAll(async () => {
    if (tf.TERRAFORM === undefined) throw new Error(tf.TERRAFORM_MISSING);
    scratch = fs.mkdtempSync(join(tmpdir(), 'statehouse-tfe-'));
    tls = await startTlsServer(scratch);
    ({ server, ca, host, base } = tls);
    const cliConfig = join(scratch, 'terraformrc');
    fs.writeFileSync(cliConfig, credentialsConfig(host, server.token));
    const home = join(scratch, 'home');
    fs.mkdirSync(home);
    tfEnv = {
      ...tf.cleanEnv(['TF_*', 'CA overrides']),
      HOME: home,
      TF_CLI_CONFIG_FILE: cliConfig,
      TF_IN_AUTOMATION: '1',
      CHECKPOINT_DISABLE: '1',
      SSL_CERT_FILE: ca,
    };
    work = workDir('main', CONFIG(host, `name = "${workspace}"`));
  }, 120_000);

  afterAll(async () => {
    await tls?.stop();
    if (scratch) fs.rmSync(scratch, { force: true, recursive: true });
  });

  it('serves discovery over TLS and TFP-API-Version 2.5 on the API', async () => {
    const disco = await tlsFetch(base, ca, '/.well-known/terraform.json');
    expect(disco.status).toBe(200);
    expect(String(disco.headers['content-type'])).toMatch(/^application\/json/);
    expect(disco.json()['tfe.v2']).toBe('/api/v2/');
    const ping = await tlsFetch(base, ca, '/api/v2/ping');
    expect(ping.headers['tfp-api-version']).toBe('2.5');
  });

  it('init creates the workspace as unit acme/<name>; apply writes version 1 through door tfe', async () => {
    await tfOk(work, ['init', '-input=false', '-no-color']);
    const ws = await api(`/api/v2/organizations/acme/workspaces/${workspace}`);
    expect(ws.status).toBe(200);
    const attrs = (ws.json().data as { attributes: Record<string, unknown> }).attributes;
    expect(attrs['execution-mode']).toBe('local');
    // Terraform sets the workspace's version to its own after creating it.
    expect(attrs['terraform-version']).toMatch(/^1\.\d+\.\d+/);
    const r = await tfOk(work, ['apply', '-auto-approve', '-input=false', '-no-color']);
    expect(r.stdout).toMatch(/Apply complete! Resources: 1 added/);
    const v = await versions();
    expect(v.map((x) => [x.version, x.serial, x.door])).toEqual([[1, 1, 'tfe']]);
    // The run unlocked the workspace when it finished.
    const after = await api(`/api/v2/organizations/acme/workspaces/${workspace}`);
    expect((after.json().data as { attributes: { locked: boolean } }).attributes.locked).toBe(
      false,
    );
  });

  it('a second apply writes version 2; state pull is the stored current state', async () => {
    await tfOk(work, ['apply', '-auto-approve', '-input=false', '-no-color', '-var', 'label=two']);
    const v = await versions();
    expect(v.map((x) => [x.version, x.serial])).toEqual([
      [1, 1],
      [2, 2],
    ]);
    const pulled = await tfOk(work, ['state', 'pull']);
    const stored = await api(`/v1/units/${unitPath}/state`);
    expect(JSON.parse(pulled.stdout)).toEqual(JSON.parse(stored.text));
  });

  it('terraform output reads the outputs, the sensitive one with -json', async () => {
    const plain = await tfOk(work, ['output', '-no-color']);
    expect(plain.stdout).toMatch(/label = "two"/);
    expect(plain.stdout).toMatch(/secret = <sensitive>/);
    const json = JSON.parse((await tfOk(work, ['output', '-json'])).stdout) as Record<
      string,
      { value: unknown; sensitive: boolean }
    >;
    expect(json.secret).toEqual(expect.objectContaining({ value: 's3cr3t-two', sensitive: true }));
    expect(json.shape.value).toEqual({ list: [1, 2], name: 'two' });
    const raw = await tfOk(work, ['output', '-raw', 'secret']);
    expect(raw.stdout).toBe('s3cr3t-two');
  });

  it('a lock held through the management API stops plan; terraform force-unlock clears it', async () => {
    const taken = await api(`/v1/units/${unitPath}/lock`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ ID: 'held-elsewhere', Operation: 'test', Who: 'someone' }),
    });
    expect(taken.status).toBe(200);
    const blocked = await terraform(work, [
      'plan',
      '-input=false',
      '-no-color',
      '-lock-timeout=0s',
    ]);
    expect(blocked.code).not.toBe(0);
    expect(blocked.output).toMatch(/lock/i);
    expect(blocked.output).not.toMatch(/\b5\d\d\b.*Internal/);
    await tfOk(work, ['force-unlock', '-force', `acme/${workspace}`]);
    const free = await api(`/v1/units/${unitPath}/lock`);
    expect(free.status).toBe(404);
    await tfOk(work, ['plan', '-input=false', '-no-color']);
  });

  it('two concurrent applies: one fails on the lock, the other writes', async () => {
    const second = workDir('second', CONFIG(host, `name = "${workspace}"`));
    await tfOk(second, ['init', '-input=false', '-no-color']);
    const before = (await versions()).length;
    const slow = terraform(work, [
      'apply',
      '-auto-approve',
      '-input=false',
      '-no-color',
      '-var',
      'label=three',
      '-var',
      'sleep_seconds=6',
    ]);
    // Wait until the slow run holds the lock, then start the other.
    for (let i = 0; i < 100; i++) {
      const ws = await api(`/api/v2/organizations/acme/workspaces/${workspace}`);
      if ((ws.json().data as { attributes: { locked: boolean } }).attributes.locked) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const fast = await terraform(second, [
      'apply',
      '-auto-approve',
      '-input=false',
      '-no-color',
      '-var',
      'label=four',
    ]);
    const done = await slow;
    expect(done.code).toBe(0);
    expect(fast.code).not.toBe(0);
    expect(fast.output).toMatch(/lock/i);
    const v = await versions();
    expect(v.length).toBe(before + 1);
  });

  it('a TFE lock blocks a writer through the HTTP backend, and its LockInfo names the principal', async () => {
    const ws = (await api(`/api/v2/organizations/acme/workspaces/${workspace}`)).json().data as {
      id: string;
    };
    const lock = await api(`/api/v2/workspaces/${ws.id}/actions/lock`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/vnd.api+json' },
      body: JSON.stringify({ reason: 'test' }),
    });
    expect(lock.status).toBe(200);
    // Even the same principal cannot take it again through this door.
    const again = await api(`/api/v2/workspaces/${ws.id}/actions/lock`, { method: 'POST' });
    expect(again.status).toBe(409);
    expect(again.json().errors).toBeDefined();
    const held = await api(`/v1/units/${unitPath}/lock`);
    expect(held.status).toBe(200);
    expect(JSON.stringify(held.json())).toContain('bootstrap-admin');
    const current = JSON.parse((await api(`/v1/units/${unitPath}/state`)).text) as {
      serial: number;
    };
    const write = await api(`/v1/backend/${unit}`, {
      method: 'POST',
      body: JSON.stringify({ ...current, serial: current.serial + 1 }),
    });
    expect(write.status).toBe(409);
    const unlock = await api(`/api/v2/workspaces/${ws.id}/actions/unlock`, { method: 'POST' });
    expect(unlock.status).toBe(200);
    const twice = await api(`/api/v2/workspaces/${ws.id}/actions/unlock`, { method: 'POST' });
    expect(twice.status).toBe(409);
  });

  it('state push of an older serial is refused before any upload; no version appears', async () => {
    const v1 = await api(`/v1/units/${unitPath}/versions/1`);
    const old = join(scratch, 'old.tfstate');
    fs.writeFileSync(old, v1.text);
    const before = (await versions()).length;
    const r = await terraform(work, ['state', 'push', old]);
    expect(r.code).not.toBe(0);
    expect((await versions()).length).toBe(before);
  });

  it('backend "remote" with a prefix and with a name, and terraform_remote_state, read the same state', async () => {
    const prefix = workspace.slice(0, workspace.indexOf('-') + 1);
    const remote = workDir(
      'remote',
      `terraform {
  backend "remote" {
    hostname     = "${host}"
    organization = "acme"
    workspaces {
      prefix = "${prefix}"
    }
  }
}
`,
    );
    const env = { ...tfEnv, TF_WORKSPACE: workspace.slice(prefix.length) };
    await tfOk(remote, ['init', '-input=false', '-no-color'], env);
    const pulled = JSON.parse((await tfOk(remote, ['state', 'pull'], env)).stdout) as {
      outputs: Record<string, { value: unknown }>;
    };
    expect(pulled.outputs.label.value).toBe('three');
    // The same workspace by name.
    const byName = workDir(
      'remote-by-name',
      `terraform {
  backend "remote" {
    hostname     = "${host}"
    organization = "acme"
    workspaces {
      name = "${workspace}"
    }
  }
}
`,
    );
    await tfOk(byName, ['init', '-input=false', '-no-color']);
    const named = JSON.parse((await tfOk(byName, ['state', 'pull'])).stdout) as {
      serial: number;
      outputs: Record<string, { value: unknown }>;
    };
    expect(named.outputs.label.value).toBe('three');

    const consumer = workDir(
      'consumer',
      `data "terraform_remote_state" "net" {
  backend = "remote"
  config = {
    hostname     = "${host}"
    organization = "acme"
    workspaces = {
      name = "${workspace}"
    }
  }
}

output "from_network" {
  value = data.terraform_remote_state.net.outputs.label
}
`,
    );
    await tfOk(consumer, ['init', '-input=false', '-no-color']);
    await tfOk(consumer, ['apply', '-auto-approve', '-input=false', '-no-color']);
    const out = await tfOk(consumer, ['output', '-raw', 'from_network']);
    expect(out.stdout).toBe('three');
  });

  it('a consumer kept through cloud {} that reads a workspace with backend "remote": a discovered graph edge', async () => {
    const name = `reads-${workspace}`;
    const consumer = workDir(
      'graph-consumer',
      `terraform {
  cloud {
    hostname     = "${host}"
    organization = "acme"
    workspaces {
      name = "${name}"
    }
  }
}

data "terraform_remote_state" "net" {
  backend = "remote"
  config = {
    hostname     = "${host}"
    organization = "acme"
    workspaces = {
      name = "${workspace}"
    }
  }
}

output "from_network" {
  value = data.terraform_remote_state.net.outputs.label
}
`,
    );
    await tfOk(consumer, ['init', '-input=false', '-no-color']);
    await tfOk(consumer, ['apply', '-auto-approve', '-input=false', '-no-color']);
    const g = await api('/v1/graph?prefix=acme%2F');
    expect(g.status).toBe(200);
    const edges = (
      g.json() as {
        edges: {
          producer: { unit: string };
          consumer: { unit: string };
          source: string;
          name: string;
        }[];
      }
    ).edges.filter((e) => e.consumer.unit === `acme/${name}`);
    expect(edges).toEqual([
      expect.objectContaining({
        producer: { unit: unit, workspace: 'default' },
        consumer: { unit: `acme/${name}`, workspace: 'default' },
        source: 'discovered',
        name: 'net',
      }),
    ]);
  });

  it('workspaces { tags }: workspace new, list, select and delete through the tag strategy', async () => {
    const tag = `app-${randomUUID().slice(0, 6)}`;
    const dir = workDir('tagged', CONFIG(host, `tags = ["${tag}"]`));
    const first = `${tag}-one`;
    const second = `${tag}-two`;
    // The first workspace with the tag, made through the API (init would otherwise ask for one).
    const made = await api('/api/v2/organizations/acme/workspaces', {
      method: 'POST',
      headers: { 'Content-Type': 'application/vnd.api+json' },
      body: JSON.stringify({
        data: { type: 'workspaces', attributes: { name: first, 'tag-names': [tag] } },
      }),
    });
    expect(made.status).toBe(201);
    await tfOk(dir, ['init', '-input=false', '-no-color'], { ...tfEnv, TF_WORKSPACE: first });
    await tfOk(dir, ['workspace', 'new', '-no-color', second]);
    const tagged = await api(`/api/v2/organizations/acme/workspaces?search%5Btags%5D=${tag}`);
    const names = (tagged.json().data as { attributes: { name: string; 'tag-names': string[] } }[])
      .map((w) => w.attributes.name)
      .sort();
    expect(names).toEqual([first, second]);
    const listed = await tfOk(dir, ['workspace', 'list', '-no-color']);
    expect(listed.stdout).toContain(first);
    expect(listed.stdout).toContain(second);
    await tfOk(dir, ['apply', '-auto-approve', '-input=false', '-no-color']);
    const written = await api(`/v1/units/${encodeURIComponent(`acme/${second}`)}/versions`);
    expect(written.status).toBe(200);
    await tfOk(dir, ['workspace', 'select', '-no-color', first]);
    // Safe-delete refuses while the workspace still manages resources; -force deletes.
    const refused = await terraform(dir, ['workspace', 'delete', '-no-color', second]);
    expect(refused.code).not.toBe(0);
    await tfOk(dir, ['workspace', 'delete', '-force', '-no-color', second]);
    const gone = await api(`/api/v2/organizations/acme/workspaces/${second}`);
    expect(gone.status).toBe(404);
  });

  it('an outputs-only caller reads the outputs through terraform_remote_state and terraform output, sensitive ones left out', async () => {
    const json = (method: string, path: string, body: unknown, bearer = server.token) =>
      tlsFetch(base, ca, path, {
        method,
        headers: { Authorization: `Bearer ${bearer}`, 'Content-Type': 'application/json' },
        body: JSON.stringify(body),
      });
    const minted = await json('POST', '/v1/auth/tokens', { name: 'reader', subject: 'svc:reader' });
    expect(minted.status).toBe(201);
    const reader = (minted.json() as { token: string }).token;
    expect((await json('POST', '/v1/rbac/init', { admin: { subject: 'svc:admin' } })).status).toBe(
      201,
    );
    for (const [path, body] of [
      [
        '/v1/rbac/permissions',
        {
          name: 'net-outputs',
          rules: [{ effect: 'allow', actions: ['outputs.read'], resources: [unit] }],
        },
      ],
      ['/v1/rbac/roles', { name: 'net-outputs', permissions: ['net-outputs'] }],
      ['/v1/rbac/assignments', { role: 'net-outputs', subject: 'svc:reader' }],
    ] as const) {
      expect((await json('POST', path, body)).status).toBe(201);
    }
    const config = join(scratch, 'reader.tfrc');
    fs.writeFileSync(config, credentialsConfig(host, reader));
    const env = { ...tfEnv, TF_CLI_CONFIG_FILE: config };
    const consumer = workDir(
      'reader-consumer',
      `data "terraform_remote_state" "net" {
  backend = "remote"
  config = {
    hostname     = "${host}"
    organization = "acme"
    workspaces = {
      name = "${workspace}"
    }
  }
}

output "label" {
  value = data.terraform_remote_state.net.outputs.label
}

output "names" {
  value = sort(keys(data.terraform_remote_state.net.outputs))
}
`,
    );
    await tfOk(consumer, ['init', '-input=false', '-no-color'], env);
    await tfOk(consumer, ['apply', '-auto-approve', '-input=false', '-no-color'], env);
    expect((await tfOk(consumer, ['output', '-raw', 'label'], env)).stdout).toBe('three');
    const names = JSON.parse(
      (await tfOk(consumer, ['output', '-json', 'names'], env)).stdout,
    ) as string[];
    expect(names).toEqual(['label', 'shape']);
    // `terraform output` in the producer's own directory, as the outputs-only caller: the plain
    // outputs, the sensitive one left out of the list (so the command does not fail on it).
    expect((await tfOk(work, ['output', '-raw', 'label'], env)).stdout).toBe('three');
    const all = JSON.parse((await tfOk(work, ['output', '-json'], env)).stdout) as Record<
      string,
      unknown
    >;
    expect(Object.keys(all).sort()).toEqual(['label', 'shape']);
    expect((await terraform(work, ['output', '-raw', 'secret'], env)).code).not.toBe(0);
  });

  it('cloud { workspaces { project } }: init makes the project, then the workspace in it; apply writes there', async () => {
    const project = `core-${randomUUID().slice(0, 6)}`;
    const name = `in-${project}`;
    // In Terraform 1.11 the project is named inside `workspaces`.
    const dir = workDir(
      'project',
      CONFIG(host, `name    = "${name}"\n      project = "${project}"`),
    );
    await tfOk(dir, ['init', '-input=false', '-no-color']);
    const listed = await api(
      `/api/v2/organizations/acme/projects?filter%5Bnames%5D=${encodeURIComponent(project)}`,
    );
    const projects = listed.json().data as { id: string; attributes: { name: string } }[];
    expect(projects.map((p) => p.attributes.name)).toEqual([project]);
    const ws = (await api(`/api/v2/organizations/acme/workspaces/${name}`)).json().data as {
      relationships: { project?: { data: { id: string } } };
    };
    expect(ws.relationships.project?.data.id).toBe(projects[0].id);
    const inProject = await api(
      `/api/v2/organizations/acme/workspaces?filter%5Bproject%5D%5Bid%5D=${projects[0].id}`,
    );
    expect(
      (inProject.json().data as { attributes: { name: string } }[]).map((w) => w.attributes.name),
    ).toEqual([name]);
    await tfOk(dir, ['apply', '-auto-approve', '-input=false', '-no-color']);
    const written = await api(`/v1/units/${encodeURIComponent(`acme/${name}`)}/versions`);
    expect((written.json() as { items: { door: string }[] }).items.map((v) => v.door)).toEqual([
      'tfe',
    ]);
  });

  it('every refusal is JSON:API, never a 5xx', async () => {
    const cases: [string, string, string | undefined, number][] = [
      ['GET', '/api/v2/organizations/acme/workspaces/a:b', undefined, 422],
      ['GET', '/api/v2/workspaces/ws-nope', undefined, 404],
      ['GET', '/api/v2/state-versions/sv-nope', undefined, 404],
      ['GET', '/api/v2/workspaces/ws-x/tag-bindings', undefined, 404],
      [
        'POST',
        '/api/v2/organizations/acme/workspaces',
        '{"data":{"attributes":{"name":"x\\u0000y"}}}',
        400,
      ],
      ['POST', '/api/v2/organizations/acme/workspaces', '{"data":', 400],
      [
        'POST',
        '/api/v2/organizations/acme/workspaces',
        '{"data":{"attributes":{"name":"ok","x":"\\ud800"}}}',
        400,
      ],
      [
        'POST',
        '/api/v2/organizations/acme/workspaces',
        `{"data":${'['.repeat(5000)}${']'.repeat(5000)}}`,
        400,
      ],
      [
        'PUT',
        '/api/v2/state-versions/svu-00000000000000000000000000000000/upload?capability=x',
        '{}',
        404,
      ],
      ['GET', '/api/v2/runs/run-1', undefined, 404],
    ];
    for (const [method, path, body, status] of cases) {
      const r = await api(path, {
        method,
        body,
        headers: body ? { 'Content-Type': 'application/vnd.api+json' } : {},
      });
      expect([path, r.status]).toEqual([path, status]);
      expect(String(r.headers['content-type'])).toMatch(/^application\/vnd\.api\+json/);
      expect(Array.isArray(r.json().errors)).toBe(true);
    }
    const anonymous = await tlsFetch(base, ca, '/api/v2/organizations/acme/workspaces');
    expect(anonymous.status).toBe(401);
    expect(Array.isArray(anonymous.json().errors)).toBe(true);
  });
});
