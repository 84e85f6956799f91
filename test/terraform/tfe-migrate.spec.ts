/**
 * Moving a configuration from this server's `backend "s3"` to its `cloud {}` block, with real
 * Terraform (1.11.x on the PATH) over the server's own TLS: the state is written through the
 * S3 door (unit `acme/moved`, key `acme/moved/terraform.tfstate`); the configuration then
 * names `cloud { organization = "acme", workspaces { name = "moved" } }` — the same unit — and
 * an interactive `terraform init` (its questions answered on stdin, as a person would) moves
 * the backend. Terraform finds the source and destination states the same (lineage and serial)
 * and copies nothing: no new version appears. `plan` then has nothing to change, and the next
 * apply writes version 2 through door `tfe`. One lock across the doors: a TFE lock stops an
 * apply through `backend "s3"`, and a lock file written through the S3 door (by the AWS SDK,
 * as Terraform's `use_lockfile` writes it) stops a TFE lock and a `cloud {}` plan. Without
 * `terraform` on the PATH this suite FAILS.
 */
import { DeleteObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { Agent } from 'node:https';
import * as fs from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  bearerTlsFetch,
  credentialsConfig,
  TlsAnswer,
  tlsFetch,
  startTlsServer,
  TlsServer,
} from '../support/tfe';
import * as tf from '../support/terraform';

jest.setTimeout(180_000);

const RESOURCES = `
variable "label" {
  type    = string
  default = "one"
}

resource "terraform_data" "main" {
  input = var.label
}

output "label" {
  value = terraform_data.main.output
}
`;

describe('from backend "s3" to cloud {} on the same server, by an interactive init', () => {
  let tls: TlsServer;
  let scratch: string;
  let token: string;
  let tfEnv: Record<string, string>;
  let work: string;

  const api = (path: string, init: Parameters<typeof tlsFetch>[3] = {}): Promise<TlsAnswer> =>
    bearerTlsFetch(tls.base, tls.ca, token, path, init);
  const postJson = (path: string, body: unknown): Promise<TlsAnswer> =>
    api(path, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  async function versions(): Promise<{ version: number; door: string; serial: number }[]> {
    const r = await api(`/v1/units/${encodeURIComponent('acme/moved')}/versions`);
    expect(r.status).toBe(200);
    const items = (r.json() as { items: { version: number; door: string; serial: number }[] })
      .items;
    return [...items].sort((a, b) => a.version - b.version);
  }

  /** Terraform with its questions answered by `answers`, one line each, as typed. */
  function interactive(args: string[], answers: string[]): Promise<tf.TfResult> {
    const started = Date.now();
    const proc = spawn(tf.TERRAFORM as string, args, {
      cwd: work,
      env: tfEnv,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let output = '';
    let stdout = '';
    let stderr = '';
    proc.stdout.on('data', (d: Buffer) => ((stdout += d.toString()), (output += d.toString())));
    proc.stderr.on('data', (d: Buffer) => ((stderr += d.toString()), (output += d.toString())));
    proc.stdin.end(answers.map((a) => `${a}\n`).join(''));
    const timer = setTimeout(() => proc.kill('SIGKILL'), 120_000);
    return new Promise((resolve) =>
      proc.once('exit', (code) => {
        clearTimeout(timer);
        resolve({ code, stdout, stderr, output, ms: Date.now() - started });
      }),
    );
  }

  beforeAll(async () => {
    if (tf.TERRAFORM === undefined) throw new Error(tf.TERRAFORM_MISSING);
    scratch = fs.mkdtempSync(join(tmpdir(), 'statehouse-tfmove-'));
    tls = await startTlsServer(scratch);
    token = tls.server.token;
    expect((await postJson('/v1/rbac/init', { admin: { subject: 'svc:terraform' } })).status).toBe(
      201,
    );
    const created = await postJson('/v1/auth/tokens', { name: 'move', subject: 'svc:terraform' });
    expect(created.status).toBe(201);
    token = (created.json() as { token: string }).token;
    const issued = await api('/v1/auth/issue-s3-creds', { method: 'POST' });
    expect(issued.status).toBe(200);
    const creds = issued.json() as {
      AccessKeyId: string;
      SecretAccessKey: string;
      SessionToken: string;
    };
    const cliConfig = join(scratch, 'terraformrc');
    fs.writeFileSync(cliConfig, credentialsConfig(tls.host, token));
    const home = join(scratch, 'home');
    fs.mkdirSync(home);
    tfEnv = {
      ...tf.cleanEnv(),
      HOME: home,
      TF_CLI_CONFIG_FILE: cliConfig,
      SSL_CERT_FILE: tls.ca,
      AWS_ACCESS_KEY_ID: creds.AccessKeyId,
      AWS_SECRET_ACCESS_KEY: creds.SecretAccessKey,
      AWS_SESSION_TOKEN: creds.SessionToken,
      AWS_EC2_METADATA_DISABLED: 'true',
    };
    work = join(scratch, 'work');
    fs.mkdirSync(work);
  });

  afterAll(async () => {
    await tls?.stop();
    if (scratch) fs.rmSync(scratch, { force: true, recursive: true });
  });

  /** The configuration with this server's `backend "s3"` for unit acme/moved. */
  const s3Config = (): string => `terraform {
  backend "s3" {
    bucket                      = "tfstate"
    key                         = "acme/moved/terraform.tfstate"
    region                      = "us-east-1"
    endpoints                   = { s3 = "${tls.base}/s3" }
    use_path_style              = true
    skip_credentials_validation = true
    skip_requesting_account_id  = true
    skip_region_validation      = true
    skip_metadata_api_check     = true
    use_lockfile                = true
    custom_ca_bundle            = "${tls.ca}"
  }
}
${RESOURCES}`;

  it('apply through backend "s3" writes version 1 of acme/moved (door s3)', async () => {
    fs.writeFileSync(join(work, 'main.tf'), s3Config());
    await tf.runTerraformOk(work, ['init', '-input=false', '-no-color'], tfEnv);
    await tf.runTerraformOk(work, ['apply', '-auto-approve', '-input=false', '-no-color'], tfEnv);
    expect((await versions()).map((v) => [v.version, v.door])).toEqual([[1, 's3']]);
  });

  it('the interactive init to cloud {} moves the backend and copies nothing (the same state)', async () => {
    fs.writeFileSync(
      join(work, 'main.tf'),
      `terraform {
  cloud {
    hostname     = "${tls.host}"
    organization = "acme"
    workspaces {
      name = "moved"
    }
  }
}
${RESOURCES}`,
    );
    // Terraform asks whether to copy the state to the cloud workspace: "yes".
    const r = await interactive(['init', '-no-color'], ['yes']);
    expect([r.code, r.output]).toEqual([
      0,
      expect.stringContaining('Migrating from backend "s3" to HCP Terraform.'),
    ]);
    expect(r.output).toContain('Should Terraform migrate your existing state?');
    expect(r.output).toContain('HCP Terraform has been successfully initialized!');
    expect((await versions()).map((v) => [v.version, v.door])).toEqual([[1, 's3']]);
  });

  it('after the move, plan sees no changes and the next apply is version 2 through door tfe', async () => {
    const plan = await tf
      .runTerraformOk(work, ['plan', '-detailed-exitcode', '-input=false', '-no-color'], tfEnv)
      .catch((e: Error) => e);
    expect(plan instanceof Error ? plan.message : plan.output).toContain('No changes');
    await tf.runTerraformOk(
      work,
      ['apply', '-auto-approve', '-input=false', '-no-color', '-var', 'label=two'],
      tfEnv,
    );
    const after = await versions();
    expect(after.map((v) => [v.version, v.door])).toEqual([
      [1, 's3'],
      [2, 'tfe'],
    ]);
    expect(after[1].serial).toBeGreaterThan(after[0].serial);
  });

  it('a TFE lock stops a writer through backend "s3", and an S3-door lock stops the TFE door', async () => {
    const s3Side = join(scratch, 's3-side');
    fs.mkdirSync(s3Side);
    fs.writeFileSync(join(s3Side, 'main.tf'), s3Config());
    await tf.runTerraformOk(s3Side, ['init', '-input=false', '-no-color'], tfEnv);
    const ws = (await api('/api/v2/organizations/acme/workspaces/moved')).json().data as {
      id: string;
    };
    const lockPath = `/api/v2/workspaces/${ws.id}/actions/lock`;
    const jsonApi = { 'Content-Type': 'application/vnd.api+json' };
    expect((await api(lockPath, { method: 'POST', headers: jsonApi, body: '{}' })).status).toBe(
      200,
    );
    const blocked = await tf.runTerraform(
      s3Side,
      ['apply', '-auto-approve', '-input=false', '-no-color', '-var', 'label=three'],
      tfEnv,
    );
    expect(blocked.code).not.toBe(0);
    expect(blocked.output).toMatch(/Error acquiring the state lock/);
    expect(
      (await api(`/api/v2/workspaces/${ws.id}/actions/unlock`, { method: 'POST' })).status,
    ).toBe(200);

    // The reverse: an S3 client holds the lock (Terraform's lock file, as use_lockfile writes it).
    const s3 = new S3Client({
      endpoint: `${tls.base}/s3`,
      forcePathStyle: true,
      region: 'us-east-1',
      maxAttempts: 1,
      credentials: {
        accessKeyId: tfEnv.AWS_ACCESS_KEY_ID,
        secretAccessKey: tfEnv.AWS_SECRET_ACCESS_KEY,
        sessionToken: tfEnv.AWS_SESSION_TOKEN,
      },
      requestHandler: new NodeHttpHandler({
        httpsAgent: new Agent({ ca: fs.readFileSync(tls.ca) }),
      }),
    });
    try {
      const lockInfo = JSON.stringify({
        ID: randomUUID(),
        Operation: 'OperationTypeApply',
        Info: '',
        Who: 'someone@elsewhere',
        Version: '1.11.4',
        Created: new Date().toISOString(),
        Path: 'tfstate/acme/moved/terraform.tfstate',
      });
      await s3.send(
        new PutObjectCommand({
          Bucket: 'tfstate',
          Key: 'acme/moved/terraform.tfstate.tflock',
          Body: lockInfo,
          IfNoneMatch: '*',
        }),
      );
      const refused = await api(lockPath, { method: 'POST', headers: jsonApi, body: '{}' });
      expect(refused.status).toBe(409);
      expect(refused.json().errors).toBeDefined();
      const plan = await tf.runTerraform(work, ['plan', '-input=false', '-no-color'], tfEnv);
      expect(plan.code).not.toBe(0);
      expect(plan.output).toMatch(/lock/i);
      await s3.send(
        new DeleteObjectCommand({ Bucket: 'tfstate', Key: 'acme/moved/terraform.tfstate.tflock' }),
      );
    } finally {
      s3.destroy();
    }
    expect((await api(lockPath, { method: 'POST', headers: jsonApi, body: '{}' })).status).toBe(
      200,
    );
    expect(
      (await api(`/api/v2/workspaces/${ws.id}/actions/unlock`, { method: 'POST' })).status,
    ).toBe(200);
    expect((await versions()).length).toBe(2);
  });
});
