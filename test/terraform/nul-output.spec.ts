/**
 * Real Terraform writes a NUL inside output values (`base64decode("AA==")`), in map keys, and
 * so in the attribute names of an output's object type: through `backend "http"`, the apply
 * is saved, the state is stored byte for byte, `terraform output -json` reads the values back
 * from the server, `GET …/outputs` serves them, and a second apply finds nothing to change.
 * Before `versions.outputs` became `json`, the save answered 500 (`jsonb` refuses `\u0000`)
 * and the apply failed.
 *
 * No provider is downloaded (only `terraform_data` and `output`). Without `terraform` on the
 * PATH this suite FAILS (it never skips).
 */
import { createHash, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freshServerEnv } from '../support/database';
import { RunningServer, spawnServer } from '../support/server';
import {
  cleanEnv,
  runTerraform,
  runTerraformOk,
  TERRAFORM,
  TERRAFORM_MISSING,
  TfResult,
} from '../support/terraform';

jest.setTimeout(180_000);

const CONFIG = (address: string): string => `
terraform {
  backend "http" {
    address        = "${address}"
    lock_address   = "${address}"
    unlock_address = "${address}"
    username       = "terraform"
  }
}

locals {
  nul = base64decode("AA==")
}

resource "terraform_data" "n" {
  input = "a\${local.nul}b"
}

output "nul" {
  value = terraform_data.n.output
}

output "map_nul" {
  value = { "k\${local.nul}" = "v\${local.nul}" }
}

output "secret_nul" {
  value     = "pass\${local.nul}word"
  sensitive = true
}
`;

describe('real terraform: a NUL inside output values', () => {
  const unit = `tf/nul/${randomUUID().slice(0, 8)}`;
  let server: RunningServer;
  let cleanup: (() => Promise<void>) | undefined;
  let dir: string;
  let tfEnv: Record<string, string>;

  const terraform = (args: string[]): Promise<TfResult> => runTerraform(dir, args, tfEnv, 120_000);

  /** Runs terraform in the working directory; its stdout, unless it does not exit 0. */
  async function tfOk(args: string[]): Promise<string> {
    return (await runTerraformOk(dir, args, tfEnv, { timeoutMs: 120_000 })).stdout;
  }

  const api = (path: string) => fetch(`${server.url}${path}`, { headers: server.auth });

  beforeAll(async () => {
    if (TERRAFORM === undefined) throw new Error(TERRAFORM_MISSING);
    const fresh = await freshServerEnv();
    cleanup = fresh.cleanup;
    server = await spawnServer(fresh.env);
    dir = mkdtempSync(join(tmpdir(), 'statehouse-tf-nul-'));
    writeFileSync(join(dir, 'terraformrc'), '');
    writeFileSync(join(dir, 'main.tf'), CONFIG(`${server.url}/v1/backend/${unit}`));
    tfEnv = {
      // Only the caller's TF_* settings go.
      ...cleanEnv(['TF_*']),
      TF_CLI_CONFIG_FILE: join(dir, 'terraformrc'),
      TF_IN_AUTOMATION: '1',
      CHECKPOINT_DISABLE: '1',
      TF_HTTP_PASSWORD: server.token,
    };
  }, 90_000);

  afterAll(async () => {
    await server?.stop();
    await cleanup?.();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('the apply is saved, stored byte for byte, and its outputs read back', async () => {
    await tfOk(['init', '-input=false', '-no-color']);
    await tfOk(['apply', '-auto-approve', '-input=false', '-no-color']);

    const unitPath = encodeURIComponent(unit);
    const current = await api(`/v1/units/${unitPath}/state`);
    expect(current.status).toBe(200);
    const bytes = Buffer.from(await current.arrayBuffer());
    expect(bytes.toString('utf8')).toContain('\\u0000');
    const pulled = Buffer.from(await tfOk(['state', 'pull']));
    // `state pull` re-indents; the content is the same state.
    expect(JSON.parse(pulled.toString('utf8'))).toEqual(JSON.parse(bytes.toString('utf8')));
    const versions = await api(`/v1/units/${unitPath}/versions`);
    const [v1] = ((await versions.json()) as { items: { sha256: string }[] }).items;
    expect(v1.sha256).toBe(createHash('sha256').update(bytes).digest('hex'));

    // Terraform reads the outputs back from the server.
    const outputs = JSON.parse(await tfOk(['output', '-json'])) as Record<
      string,
      { value: unknown; sensitive: boolean }
    >;
    expect(outputs.nul.value).toBe('a\u0000b');
    expect(outputs.map_nul.value).toEqual({ 'k\u0000': 'v\u0000' });
    expect(outputs.secret_nul).toMatchObject({ value: 'pass\u0000word', sensitive: true });

    // And the server serves them.
    const served = await api(`/v1/units/${unitPath}/outputs`);
    expect(served.status).toBe(200);
    const body = (await served.json()) as { outputs: Record<string, { value: unknown }> };
    expect(body.outputs.nul.value).toBe('a\u0000b');
    expect(body.outputs.map_nul.value).toEqual({ 'k\u0000': 'v\u0000' });
    expect(body.outputs.secret_nul.value).toBe('pass\u0000word');

    // A second apply sees no change and stores nothing new.
    const plan = await terraform(['plan', '-detailed-exitcode', '-input=false', '-no-color']);
    expect(plan.code).toBe(0);
  });
});
