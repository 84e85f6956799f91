/**
 * The README's examples, run as written, so that the README cannot drift from what the server
 * does.
 *
 * Every `sh`, `hcl`, `ini` and `console` block of README.md carries a marker on the line just
 * before its fence, and the first test fails on a block without one:
 *
 *   <!-- example: runnable -->          run here, in README order
 *   <!-- example: needs-idp -->         needs an OpenID provider: not run
 *   <!-- example: fragment -->          lines for a block shown above: not run on its own
 *   <!-- example: not-run: <reason> --> anything else that cannot run here (starts a server,
 *                                       needs PostgreSQL …), with the reason
 *
 * The runnable blocks run against one real server (embedded database, or DATABASE_URL; with
 * STATEHOUSE_S3_PORT set) with the real `terraform` (1.11.x, built-in resources only), the AWS
 * CLI (v1), rclone and s3cmd on the PATH, like a reader working through the README in one
 * terminal:
 *   - a section (heading) is a working directory of its own; its `hcl` blocks are written there,
 *     at the path their first comment names (`# network/main.tf`), else as `main.tf`; its `sh`
 *     and `console` blocks run there;
 *   - an `ini` block is the file its first comment names under `~/` (`# ~/.s3cfg`), else the
 *     AWS config file ($HOME/.aws/config);
 *   - an `sh` block runs in bash with `set -euo pipefail`, and what it exports stays set for
 *     the blocks after it; a line whose comment ends in `exit code N` must exit N;
 *   - a `console` block's `$ ` lines run one by one; the lines up to the next `$ ` are the
 *     command's expected output (stdout and stderr as a terminal shows them; compared exactly,
 *     trailing blanks aside), and `# exit code N`
 *     sets the expected exit code (default 0).
 * What the reader would fill in is filled in (see SUBSTITUTIONS): the server's address for
 * http://localhost:8080 (and its S3 listener's for localhost:9000), the bootstrap token, an API
 * token for `sht_…`. `statehouse` on the PATH
 * is this repository's CLI; `curl` fails on an HTTP error (`--fail-with-body`); Terraform runs
 * with an empty CLI config, TF_IN_AUTOMATION=1, TF_INPUT=0 and TF_CLI_ARGS_apply=-auto-approve
 * (the answer "yes"); nothing of the caller's TF_*, AWS_* or STATEHOUSE_* environment leaks in.
 * Without `terraform`, `aws`, `rclone` or `s3cmd` on the PATH the suite FAILS, naming the tool
 * (it never skips).
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { freshServerEnv } from '../support/database';
import { CLI, TEST_TOKEN } from '../support/paths';
import { CommandRun as Run, onPath, runCommand } from '../support/processes';
import { ReadmeBlock, readme, readmeBlocks } from '../support/readme';
import { NODE, RunningServer, spawnServer } from '../support/server';

jest.setTimeout(600_000);

type Lang = 'sh' | 'hcl' | 'ini' | 'console';
const CHECKED: readonly string[] = ['sh', 'hcl', 'ini', 'console'];

type Block = ReadmeBlock & { lang: Lang };

const BLOCKS = readmeBlocks(readme()).filter((b): b is Block => CHECKED.includes(b.lang));
const RUNNABLE = BLOCKS.filter((b) => b.marker === 'runnable');

const run = (
  command: string,
  args: string[],
  cwd: string,
  env: Record<string, string>,
): Promise<Run> => runCommand(command, args, { cwd, env, endsAt: 'exit' });

/** A comment ending in `exit code N` (`# exit code 4`, `# deny: exit code 4`): that line's exit code. */
const EXIT_CODE = /\s+#[^#\n]*\bexit code (\d+)\s*$/;

/** An sh block as a script: lines with an expected exit code checked for it. */
function shScript(code: string): string {
  return code
    .split('\n')
    .map((line) => {
      const m = EXIT_CODE.exec(line);
      if (!m) return line;
      const command = line.slice(0, m.index);
      return (
        `if ${command}; then __rc=0; else __rc=$?; fi; ` +
        `[ "$__rc" -eq ${m[1]} ] || { echo "expected exit code ${m[1]}, got $__rc: ${command.replace(/["$`\\]/g, '')}" >&2; exit 1; }`
      );
    })
    .join('\n');
}

interface ConsoleStep {
  command: string;
  exitCode: number;
  /** The expected stdout lines; undefined when the README shows none. */
  expected: string[] | undefined;
}

function consoleSteps(code: string): ConsoleStep[] {
  const steps: ConsoleStep[] = [];
  for (const line of code.replace(/\n+$/, '').split('\n')) {
    if (line.startsWith('$ ')) {
      const m = EXIT_CODE.exec(line);
      steps.push({
        command: line.slice(2),
        exitCode: m ? Number(m[1]) : 0,
        expected: undefined,
      });
    } else if (steps.length > 0) {
      const last = steps[steps.length - 1];
      (last.expected ??= []).push(line);
    }
  }
  for (const s of steps) {
    while (s.expected && s.expected.length > 0 && s.expected[s.expected.length - 1].trim() === '') {
      s.expected.pop();
    }
  }
  return steps;
}

const normalise = (text: string): string[] => {
  const lines = text.split('\n').map((l) => l.trimEnd());
  while (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  return lines;
};

function slug(section: string): string {
  return (
    section
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '-')
      .replace(/^-|-$/g, '') || 'top'
  );
}

describe("the README's examples", () => {
  it('every sh, hcl, ini and console block is marked runnable, needs-idp, fragment or not-run: <reason>', () => {
    const unmarked = BLOCKS.filter((b) => b.marker === undefined).map(
      (b) => `README.md:${b.line} (${b.lang}, under "${b.section}")`,
    );
    expect(unmarked).toEqual([]);
    // The sections this suite exists for are runnable.
    for (const section of [
      'Point Terraform at it (`backend "http"`)',
      'Point Terraform at it (`backend "s3"`)',
      'A token per pipeline',
      'Who may do what (RBAC) and the audit log',
      'Worked example: network → app through `/s3`',
    ]) {
      expect(RUNNABLE.map((b) => b.section)).toContain(section);
    }
  });

  describe('run as written', () => {
    let server: RunningServer;
    let cleanup: (() => Promise<void>) | undefined;
    let work: string;
    let home: string;
    let env: Record<string, string>;
    let substitutions: [string, string][];

    beforeAll(async () => {
      for (const tool of ['terraform', 'aws', 'rclone', 's3cmd']) {
        if (!onPath(tool)) {
          throw new Error(
            `${tool} is not on the PATH (PATH=${process.env.PATH ?? ''}): the README examples need ` +
              'the real terraform (1.11.x), the AWS CLI, rclone and s3cmd; this suite does not skip without them',
          );
        }
      }
      const curl = onPath('curl');
      if (!curl) throw new Error('curl is not on the PATH: the README examples use it');
      work = mkdtempSync(join(tmpdir(), 'statehouse-readme-'));
      home = join(work, 'home');
      const bin = join(work, 'bin');
      mkdirSync(join(home, '.aws'), { recursive: true });
      mkdirSync(bin);
      // `statehouse` on the PATH: this repository's CLI, as an installed package would be.
      writeFileSync(join(bin, 'statehouse'), `#!/bin/sh\nexec '${NODE}' '${CLI}' "$@"\n`, {
        mode: 0o755,
      });
      // An HTTP error fails the block (plain curl would print the error body and exit 0).
      writeFileSync(join(bin, 'curl'), `#!/bin/sh\nexec '${curl}' -sS --fail-with-body "$@"\n`, {
        mode: 0o755,
      });
      const cliConfig = join(work, 'terraformrc');
      writeFileSync(cliConfig, '');

      const fresh = await freshServerEnv();
      cleanup = fresh.cleanup;
      server = await spawnServer({ ...fresh.env, STATEHOUSE_S3_PORT: '0' });
      // An API token for `sht_…`: a service principal's, minted with the bootstrap token.
      const created = await fetch(`${server.url}/v1/auth/tokens`, {
        method: 'POST',
        headers: { ...server.auth, 'Content-Type': 'application/json' },
        body: JSON.stringify({ name: 'readme', subject: 'svc:readme' }),
      });
      if (created.status !== 201)
        throw new Error(`token: ${created.status} ${await created.text()}`);
      const apiToken = ((await created.json()) as { token: string }).token;

      // What a reader fills in.
      substitutions = [
        ['http://localhost:8080', server.url],
        // The S3 door's own listener (STATEHOUSE_S3_PORT=9000 in the README).
        ['http://localhost:9000', server.s3Url ?? 'no S3 listener'],
        ['localhost:9000', `127.0.0.1:${server.s3Port ?? 'none'}`],
        ['https://statehouse.example.com', server.url],
        ['<the bootstrap token, or later an API token>', TEST_TOKEN],
        ['<bootstrap token>', TEST_TOKEN],
        ['<token>', TEST_TOKEN],
        ['sht_…', apiToken],
        // "the ID that `token create` and `token list` show"
        [
          '<id>',
          `"$(statehouse token list --json | '${NODE}' -e 'let s="";process.stdin.on("data",(d)=>(s+=d)).on("end",()=>console.log(JSON.parse(s).find((t)=>t.name==="ci-network-prod"&&!t.revokedAt).id))')"`,
        ],
      ];

      env = {
        PATH: [bin, dirname(NODE), process.env.PATH ?? ''].join(delimiter),
        HOME: home,
        LANG: 'C.UTF-8',
        TMPDIR: tmpdir(),
        STATEHOUSE_SERVER: server.url,
        TF_CLI_CONFIG_FILE: cliConfig,
        TF_IN_AUTOMATION: '1',
        TF_INPUT: '0',
        TF_CLI_ARGS_apply: '-auto-approve',
        CHECKPOINT_DISABLE: '1',
        AWS_EC2_METADATA_DISABLED: 'true',
      };
    });

    afterAll(async () => {
      await server?.stop();
      await cleanup?.();
      if (work) rmSync(work, { recursive: true, force: true });
    });

    const fill = (code: string): string =>
      substitutions.reduce((text, [from, to]) => text.split(from).join(to), code);

    const sectionDir = (block: Block): string => {
      const dir = join(work, 'sections', slug(block.section));
      mkdirSync(dir, { recursive: true });
      return dir;
    };

    const failure = (block: Block, what: string, r: Run): Error =>
      new Error(
        `README.md:${block.line} (${block.lang}, "${block.section}"): ${what}\n` +
          `--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}\n--- server log (tail)\n` +
          server.output().split('\n').slice(-8).join('\n'),
      );

    async function runSh(block: Block): Promise<void> {
      const dir = sectionDir(block);
      const script = join(work, `block-${block.line}.sh`);
      const envOut = join(work, `block-${block.line}.env`);
      writeFileSync(script, shScript(fill(block.code)));
      const r = await run(
        'bash',
        ['-c', 'set -euo pipefail; source "$1"; env -0 > "$2"', 'readme', script, envOut],
        dir,
        env,
      );
      if (r.code !== 0) throw failure(block, `exit code ${r.code}`, r);
      // What the block exported stays set, as in the reader's terminal.
      const next: Record<string, string> = {};
      for (const entry of readFileSync(envOut, 'utf8').split('\0')) {
        const eq = entry.indexOf('=');
        if (eq <= 0) continue;
        const name = entry.slice(0, eq);
        if (['PWD', 'OLDPWD', 'SHLVL', '_'].includes(name)) continue;
        next[name] = entry.slice(eq + 1);
      }
      env = next;
    }

    async function runConsole(block: Block): Promise<void> {
      const dir = sectionDir(block);
      for (const step of consoleSteps(fill(block.code))) {
        // What the terminal shows: stdout and stderr together, in order.
        const r = await run('bash', ['-c', `set -o pipefail; { ${step.command}\n} 2>&1`], dir, env);
        if (r.code !== step.exitCode) {
          throw failure(
            block,
            `\`${step.command}\`: exit code ${r.code}, expected ${step.exitCode}`,
            r,
          );
        }
        if (step.expected !== undefined) {
          expect({ command: step.command, output: normalise(r.stdout) }).toEqual({
            command: step.command,
            output: normalise(step.expected.join('\n')),
          });
        }
      }
    }

    function writeHcl(block: Block): void {
      const named = /^#\s*([\w./-]+\.tf)\s*$/.exec(block.code.split('\n')[0]);
      const file = join(sectionDir(block), named ? named[1] : 'main.tf');
      mkdirSync(dirname(file), { recursive: true });
      writeFileSync(file, fill(block.code));
    }

    function writeIni(block: Block): void {
      const text = fill(block.code);
      const named = /^#\s*~\/(\S+)\s*$/.exec(text.split('\n')[0])?.[1] ?? '.aws/config';
      if (named === '.aws/config') expect(text).toMatch(/^\[profile [^\]]+\]$/m);
      const file = join(home, named);
      mkdirSync(dirname(file), { recursive: true });
      writeFileSync(file, text);
    }

    it.each(RUNNABLE.map((b) => [`README.md:${b.line}`, b.lang, b.section, b] as const))(
      '%s (%s, under "%s")',
      async (_where, lang, _section, block) => {
        switch (lang) {
          case 'sh':
            return runSh(block);
          case 'console':
            return runConsole(block);
          case 'hcl':
            return writeHcl(block);
          case 'ini':
            return writeIni(block);
        }
      },
    );
  });
});
