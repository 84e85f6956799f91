/**
 * The packed package, as someone would install it: `npm pack` (its `prepack` builds dist/ from
 * nothing), then `npm install -g --prefix <empty folder> <tarball>` (the dependencies come from
 * the registry or npm's cache), then the installed `statehouse` on its own: `--version` and
 * `-V` print package.json's version; `statehouse serve` run from an empty folder answers
 * /healthz, keeps its data in ./data there, and on SIGINT stops cleanly (exit 130) with every
 * process gone and the port free within 10 s.
 *
 * The package is packed from a copy of the sources (node_modules linked), so that the clean
 * build of `prepack` never rewrites the dist/ other suites are running from. Embedded database
 * only: the package is the same on PostgreSQL, and installing it takes a minute.
 */
import { execFile } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ON_POSTGRES } from '../support/database';
import { ROOT } from '../support/paths';
import {
  eventually,
  groupAlive,
  listeningPort,
  portIsFree,
  spawnGroup,
} from '../support/processes';
import { childEnv } from '../support/server';

jest.setTimeout(600_000);

const PACKAGE = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  name: string;
  version: string;
};

function run(
  command: string,
  args: string[],
  options: { cwd: string; env?: Record<string, string> },
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      command,
      args,
      { cwd: options.cwd, env: options.env ?? childEnv(), maxBuffer: 64 * 1024 * 1024 },
      (err, stdout, stderr) =>
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

(ON_POSTGRES ? describe.skip : describe)('the packed package (npm pack, npm install -g)', () => {
  let work: string;
  let prefix: string;
  let statehouse: string;
  let packedFiles: string[];
  const cleanups: (() => void)[] = [];

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'statehouse-package-'));
    const sources = join(work, 'sources');
    mkdirSync(sources);
    for (const entry of [
      'src',
      'migrations',
      'scripts',
      'package.json',
      'package-lock.json',
      'tsconfig.json',
      'tsconfig.build.json',
      'README.md',
    ]) {
      cpSync(join(ROOT, entry), join(sources, entry), { recursive: true });
    }
    symlinkSync(join(ROOT, 'node_modules'), join(sources, 'node_modules'));

    const pack = await run('npm', ['pack', '--json', '--pack-destination', work], {
      cwd: sources,
    });
    if (pack.code !== 0) throw new Error(`npm pack failed:\n${pack.stdout}${pack.stderr}`);
    const [packed] = JSON.parse(pack.stdout.slice(pack.stdout.indexOf('['))) as {
      filename: string;
      files: { path: string }[];
    }[];
    packedFiles = packed.files.map((f) => f.path).sort();

    prefix = join(work, 'prefix');
    mkdirSync(prefix);
    const install = await run(
      'npm',
      [
        'install',
        '--global',
        '--prefix',
        prefix,
        '--no-audit',
        '--no-fund',
        '--prefer-offline',
        join(work, packed.filename),
      ],
      { cwd: work },
    );
    if (install.code !== 0) {
      throw new Error(`npm install -g of the tarball failed:\n${install.stdout}${install.stderr}`);
    }
    statehouse = join(prefix, 'bin', 'statehouse');
  });

  afterAll(() => {
    for (const c of cleanups) c();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('ships the compiled server and migrations, the PGlite snapshot, package.json and the README — no sources, tests or maps', () => {
    const snapshot = packedFiles.filter((f) => /^dist\/pglite\/pglite-[\d.]+\.tar\.gz$/.test(f));
    expect(snapshot).toHaveLength(1);
    expect(packedFiles).toEqual(
      expect.arrayContaining([
        'README.md',
        'package.json',
        'dist/src/cli/main.js',
        'dist/src/server.js',
        'dist/migrations/index.js',
      ]),
    );
    const unexpected = packedFiles.filter(
      (f) =>
        ![...snapshot, 'README.md', 'package.json'].includes(f) &&
        !(/^dist\/(src|migrations)\//.test(f) && f.endsWith('.js')),
    );
    expect(unexpected).toEqual([]);
  });

  it('installs a `statehouse` on the PATH of the prefix; --version and -V print the version', async () => {
    expect(PACKAGE.name).toMatch(/^@[a-z0-9-]+\//); // scoped: no clash with other packages
    expect(existsSync(join(prefix, 'lib', 'node_modules', ...PACKAGE.name.split('/')))).toBe(true);
    for (const flag of ['--version', '-V']) {
      const r = await run(statehouse, [flag], { cwd: work });
      expect(r).toMatchObject({ code: 0, stdout: `${PACKAGE.version}\n` });
    }
  });

  it('`statehouse serve` from an empty folder answers /healthz; SIGINT stops it cleanly (130) and frees the port within 10 s', async () => {
    const empty = join(work, 'empty');
    mkdirSync(empty);
    const server = spawnGroup(statehouse, ['serve'], {
      cwd: empty,
      env: {
        ...childEnv(),
        NODE_ENV: 'production',
        PORT: '0',
        STATEHOUSE_HOST: '127.0.0.1',
      },
    });
    cleanups.push(server.killGroup);
    const port = await listeningPort(server.output, () => server.proc.exitCode !== null);
    expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
    expect(existsSync(join(empty, 'data', 'pg', 'PG_VERSION'))).toBe(true);
    expect(server.output()).toMatch(/shb_[A-Za-z0-9_-]{43}/); // a first start: its bootstrap token

    process.kill(server.pgid, 'SIGINT');
    const gone = await eventually(
      async () => !groupAlive(server.pgid) && (await portIsFree(port)),
      10_000,
    );
    expect({ gone, output: server.output() }).toMatchObject({ gone: true });
    expect(await server.exited).toEqual({ code: 130, signal: null });
  });
});
