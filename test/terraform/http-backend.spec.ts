/**
 * Real Terraform (the `terraform` binary on the PATH, 1.11.x) against the real Statehouse
 * server through Terraform's built-in `backend "http"`:
 *
 *   backend "http" { address = lock_address = unlock_address = "<server>/v1/backend/<unit>",
 *                    username = "terraform" }   password: TF_HTTP_PASSWORD = the bootstrap token
 *
 * One server and one working directory for the whole suite; the steps run in order and build
 * on each other:
 *   1. `init`, then `apply` creates the state: version 1, serial 1, door `http`;
 *   2. a second `apply` with a changed `terraform_data` input: versions 1 and 2, serials 1, 2;
 *   3. `terraform state pull` equals the stored current version (`/state`: parsed JSON,
 *      serial, lineage; the version's sha256 is the sha256 of the `/state` bytes);
 *   4. two concurrent `apply` runs in two working directories (a `local-exec` sleep keeps the
 *      winner's lock held): exactly one fails with a lock error naming the holder's lock ID,
 *      the other succeeds, and no write is lost (Terraform's http backend prints only the
 *      holder's ID — its "Lock Info" block is the loser's own — so the holder's full LockInfo,
 *      Who included, is checked on the wire: a LOCK answers 423 with it);
 *   5. a lock left behind (taken through the API) makes `plan` fail with "Error acquiring the
 *      state lock"; `terraform force-unlock -force <ID>` clears it and `plan` works again;
 *   6. restoring version 1 through the API: `plan` shows the change back, and `apply` passes
 *      the serial guard (new version with serial = restored serial + 1).
 *
 * No provider is downloaded: only the built-in `terraform_data` resource, a `local-exec`
 * provisioner and `output` blocks. Every command runs with an empty CLI config file,
 * TF_IN_AUTOMATION=1, CHECKPOINT_DISABLE=1, -input=false and -no-color. Without `terraform`
 * on the PATH this suite FAILS (it never skips).
 */
import { createHash, randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freshServerEnv } from '../support/database';
import {
  cleanEnv,
  runTerraform,
  runTerraformOk,
  TERRAFORM,
  TERRAFORM_MISSING,
  TfResult,
  wholeVersionList,
} from '../support/terraform';
import { apiFetch, RunningServer, spawnServer } from '../support/server';

jest.setTimeout(120_000);

interface VersionItem {
  version: number;
  serial: number | null;
  lineage: string | null;
  sha256: string;
  size: number;
  door: string;
  restoredFrom: number | null;
}

interface StateFile {
  version: number;
  serial: number;
  lineage: string;
  outputs: Record<string, { value: unknown }>;
}

const CONFIG = (address: string): string => `
terraform {
  backend "http" {
    address        = "${address}"
    lock_address   = "${address}"
    unlock_address = "${address}"
    username       = "terraform"
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
`;

describe('real terraform through backend "http"', () => {
  const unit = `tf/http-backend/${randomUUID().slice(0, 8)}`;
  const unitPath = encodeURIComponent(unit);
  let server: RunningServer;
  let cleanup: (() => Promise<void>) | undefined;
  let scratch: string;
  let workA: string;
  let workB: string;
  let tfEnv: Record<string, string>;
  /** The `label` the configuration has after the last successful apply. */
  let currentLabel = 'two';

  function writeWorkDir(dir: string): void {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'main.tf'), CONFIG(`${server.url}/v1/backend/${unit}`));
  }

  function terraform(cwd: string, args: string[], timeoutMs = 90_000): Promise<TfResult> {
    return runTerraform(cwd, args, tfEnv, timeoutMs);
  }

  /** Runs terraform and fails with its whole output unless it exits 0. */
  const tfOk = (cwd: string, args: string[]): Promise<TfResult> => runTerraformOk(cwd, args, tfEnv);

  function expectExit(r: TfResult, code: number, what: string): void {
    if (r.code !== code) throw new Error(`${what}: exit ${r.code}, expected ${code}:\n${r.output}`);
  }

  const api = (path: string, init?: RequestInit): Promise<Response> => apiFetch(server, path, init);

  async function versions(): Promise<VersionItem[]> {
    const r = await api(`/v1/units/${unitPath}/versions`);
    expect(r.status).toBe(200);
    return wholeVersionList(
      (await r.json()) as { items: VersionItem[]; nextCursor: string | null },
    );
  }

  async function currentState(): Promise<{ bytes: Buffer; version: number }> {
    const r = await api(`/v1/units/${unitPath}/state`);
    expect(r.status).toBe(200);
    return {
      bytes: Buffer.from(await r.arrayBuffer()),
      version: Number(r.headers.get('x-statehouse-version')),
    };
  }

  async function versionContent(n: number): Promise<StateFile> {
    const r = await api(`/v1/units/${unitPath}/versions/${n}`);
    expect(r.status).toBe(200);
    return (await r.json()) as StateFile;
  }

  const applyArgs = (...extra: string[]): string[] => [
    'apply',
    '-auto-approve',
    '-input=false',
    '-no-color',
    ...extra,
  ];
  const planArgs = (...extra: string[]): string[] => [
    'plan',
    '-input=false',
    '-no-color',
    ...extra,
  ];

  beforeAll(async () => {
    if (TERRAFORM === undefined) throw new Error(TERRAFORM_MISSING);
    const fresh = await freshServerEnv();
    cleanup = fresh.cleanup;
    server = await spawnServer(fresh.env);
    scratch = mkdtempSync(join(tmpdir(), 'statehouse-tf-'));
    const cliConfig = join(scratch, 'terraformrc');
    writeFileSync(cliConfig, '');
    tfEnv = {
      // Only the caller's TF_* settings go.
      ...cleanEnv(['TF_*']),
      TF_CLI_CONFIG_FILE: cliConfig,
      TF_IN_AUTOMATION: '1',
      CHECKPOINT_DISABLE: '1',
      TF_HTTP_PASSWORD: server.token,
    };
    workA = join(scratch, 'a');
    workB = join(scratch, 'b');
    writeWorkDir(workA);
    writeWorkDir(workB);
  }, 90_000);

  afterAll(async () => {
    await server?.stop();
    await cleanup?.();
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  it('has terraform on the PATH', async () => {
    if (TERRAFORM === undefined) throw new Error(TERRAFORM_MISSING);
    const r = await tfOk(scratch, ['version', '-json']);
    const version = (JSON.parse(r.stdout) as { terraform_version: string }).terraform_version;
    expect(version).toMatch(/^1\.\d+\.\d+/);
  });

  it('init works and the first apply creates version 1 with serial 1', async () => {
    await tfOk(workA, ['init', '-input=false', '-no-color']);
    const r = await tfOk(workA, applyArgs('-var', 'label=one'));
    expect(r.stdout).toMatch(/Apply complete! Resources: 1 added, 0 changed, 0 destroyed/);

    const list = await versions();
    expect(list.map((v) => [v.version, v.serial, v.door])).toEqual([[1, 1, 'http']]);
    const state = await versionContent(1);
    expect(state.outputs.label.value).toBe('one');
  });

  it('a second apply with a changed input adds version 2 with serial 2', async () => {
    const r = await tfOk(workA, applyArgs('-var', 'label=two'));
    expect(r.stdout).toMatch(/Apply complete!/);

    const list = await versions();
    expect(list.map((v) => [v.version, v.serial, v.door])).toEqual([
      [1, 1, 'http'],
      [2, 2, 'http'],
    ]);
    expect(list[1].lineage).toBe(list[0].lineage);
    expect((await versionContent(2)).outputs.label.value).toBe('two');
  });

  it('terraform state pull equals the stored current version', async () => {
    const pulled = await tfOk(workA, ['state', 'pull']);
    const pulledState = JSON.parse(pulled.stdout) as StateFile;
    const current = await currentState();
    const storedState = JSON.parse(current.bytes.toString('utf8')) as StateFile;

    expect(pulledState).toEqual(storedState);
    expect(pulledState.serial).toBe(2);
    expect(pulledState.lineage).toBe(storedState.lineage);

    const list = await versions();
    const latest = list[list.length - 1];
    expect(current.version).toBe(latest.version);
    expect(latest.serial).toBe(pulledState.serial);
    expect(latest.lineage).toBe(pulledState.lineage);
    expect(createHash('sha256').update(current.bytes).digest('hex')).toBe(latest.sha256);
    expect(current.bytes.length).toBe(latest.size);
  });

  it('two concurrent applies on one unit: exactly one wins, the loser names the holder and writes nothing', async () => {
    await tfOk(workB, ['init', '-input=false', '-no-color']);
    const before = await versions();
    const previous = before[before.length - 1];

    // Watch the lock while both run, to learn the winner's LockInfo from the server itself.
    const seen = new Map<string, { ID: string; Who: string; Operation: string }>();
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        const r = await api(`/v1/units/${unitPath}/lock`);
        if (r.status === 200) {
          const view = (await r.json()) as {
            id: string;
            info: { ID: string; Who: string; Operation: string };
          };
          seen.set(view.id, view.info);
        } else {
          await r.arrayBuffer();
        }
        await new Promise((res) => setTimeout(res, 100));
      }
    })();

    const race = (dir: string, label: string): Promise<TfResult> =>
      terraform(
        dir,
        applyArgs('-lock-timeout=0s', '-var', `label=${label}`, '-var', 'sleep_seconds=5'),
      );
    const [a, b] = await Promise.all([race(workA, 'race-a'), race(workB, 'race-b')]);
    watching = false;
    await watcher;

    const results = [
      { label: 'race-a', r: a },
      { label: 'race-b', r: b },
    ];
    const winners = results.filter((x) => x.r.code === 0);
    const losers = results.filter((x) => x.r.code !== 0);
    expect({
      winners: winners.length,
      losers: losers.length,
      outputs: results.map((x) => x.r.output),
    }).toMatchObject({ winners: 1, losers: 1 });
    const [winner] = winners;
    const [loser] = losers;

    // The loser failed on the lock and names the holder (the winner's LockInfo).
    expect(loser.r.output).toMatch(/Error acquiring the state lock/);
    expect(seen.size).toBe(1);
    const [holder] = [...seen.values()];
    expect(holder.Operation).toBe('OperationTypeApply');
    // Terraform's http backend prints the holder's ID in the error message (wrapped); its "Lock Info"
    // block below shows the loser's own LockInfo, not the holder's (Terraform's behaviour).
    expect(loser.r.output).toMatch(
      new RegExp(`HTTP remote state already locked:\\s+ID=${holder.ID}`),
    );
    expect(winner.r.stdout).toMatch(/Apply complete!/);

    // No write lost: versions consecutive, serials +1 each, the winner's label current.
    const after = await versions();
    expect(after.map((v) => v.version)).toEqual(after.map((_, i) => i + 1));
    const added = after.slice(before.length);
    expect(added.length).toBeGreaterThanOrEqual(1);
    added.forEach((v, i) => {
      expect(v.serial).toBe((previous.serial ?? 0) + i + 1);
      expect(v.lineage).toBe(previous.lineage);
      expect(v.door).toBe('http');
    });
    for (const v of added) {
      expect(JSON.stringify(await versionContent(v.version))).not.toContain(loser.label);
    }
    const current = JSON.parse((await currentState()).bytes.toString('utf8')) as StateFile;
    expect(current.serial).toBe((previous.serial ?? 0) + added.length);
    expect(current.outputs.label.value).toBe(winner.label);

    // Both working directories go on from here with the winner's configuration.
    const other = winner.label === 'race-a' ? workB : workA;
    const plan = await tfOk(other, planArgs('-detailed-exitcode', '-var', `label=${winner.label}`));
    expect(plan.stdout).toMatch(/No changes/);
    currentLabel = winner.label; // the next steps go on with the winner's configuration
    // The lock is gone.
    expect((await api(`/v1/units/${unitPath}/lock`)).status).toBe(404);
  });

  it('a lock left behind blocks plan until terraform force-unlock clears it', async () => {
    const lockId = randomUUID();
    const info = {
      ID: lockId,
      Operation: 'OperationTypeApply',
      Info: '',
      Who: 'crashed-ci@runner-17',
      Version: '1.11.4',
      Created: new Date().toISOString(),
      Path: '',
    };
    const taken = await api(`/v1/units/${unitPath}/lock`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(info),
    });
    expect(taken.status).toBe(200);

    const blocked = await terraform(
      workA,
      planArgs('-lock-timeout=0s', '-var', `label=${currentLabel}`),
    );
    expect(blocked.code).not.toBe(0);
    expect(blocked.output).toMatch(/Error acquiring the state lock/);
    expect(blocked.output).toMatch(new RegExp(`HTTP remote state already locked:\\s+ID=${lockId}`));
    // What Terraform was sent: 423 with the holder's LockInfo exactly as it was taken.
    const wire = await fetch(`${server.url}/v1/backend/${unit}`, {
      method: 'LOCK',
      headers: {
        Authorization: `Basic ${Buffer.from(`terraform:${server.token}`).toString('base64')}`,
        'Content-Type': 'application/json',
      },
      body: JSON.stringify({ ...info, ID: randomUUID(), Who: 'someone-else@host' }),
    });
    expect(wire.status).toBe(423);
    expect(await wire.text()).toBe(JSON.stringify(info));
    expect((await api(`/v1/units/${unitPath}/lock`)).status).toBe(200); // still held

    const unlocked = await tfOk(workA, ['force-unlock', '-force', '-no-color', lockId]);
    expect(unlocked.output).toMatch(/successfully unlocked/i);
    expect((await api(`/v1/units/${unitPath}/lock`)).status).toBe(404);

    const plan = await tfOk(
      workA,
      planArgs('-lock-timeout=0s', '-detailed-exitcode', '-var', `label=${currentLabel}`),
    );
    expect(plan.stdout).toMatch(/No changes/);
  });

  it('after restoring version 1, plan shows the change back and apply passes the serial guard', async () => {
    const before = await versions();
    const restore = await api(`/v1/units/${unitPath}/versions/1/restore`, { method: 'POST' });
    expect(restore.status).toBe(200);
    const restored = (await restore.json()) as { created: boolean; version: VersionItem };
    expect(restored.created).toBe(true);
    expect(restored.version).toMatchObject({
      version: before.length + 1,
      serial: 1,
      restoredFrom: 1,
      sha256: before[0].sha256,
    });
    const current = await currentState();
    expect(current.version).toBe(before.length + 1);
    expect(createHash('sha256').update(current.bytes).digest('hex')).toBe(before[0].sha256);

    // Terraform now sees "one" in the state and the config says otherwise: a change.
    const plan = await terraform(
      workA,
      planArgs('-detailed-exitcode', '-var', `label=${currentLabel}`),
    );
    expectExit(plan, 2, 'plan -detailed-exitcode after the restore');
    expect(plan.stdout).toMatch(/"one" -> "/);
    expect(plan.stdout).toMatch(/1 to add, 0 to change, 1 to destroy/);

    const apply = await tfOk(workA, applyArgs('-var', `label=${currentLabel}`));
    expect(apply.stdout).toMatch(/Apply complete!/);
    const after = await versions();
    const latest = after[after.length - 1];
    expect(latest.version).toBe(before.length + 2);
    expect(latest.serial).toBe(restored.version.serial! + 1);
    expect(latest.lineage).toBe(before[0].lineage);
    expect(latest.door).toBe('http');
    expect((await versionContent(latest.version)).outputs.label.value).toBe(currentLabel);
  });
});
