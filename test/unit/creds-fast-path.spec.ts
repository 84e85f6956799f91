/**
 * The bin answers `creds --json` from the cache before commander is loaded, so it reads the
 * command line itself: it must take exactly the lines commander takes for `creds --json`, and
 * find the same server, or leave the line to the full CLI.
 */
import type { Command } from 'commander';
import { credsJsonServer } from '../../src/cli/creds-fast-path';
import { buildCli } from '../../src/cli/program';
import { resolveServer, serverOf } from '../../src/cli/session';

/** What the full CLI does with `args`: the creds options and server, or undefined if not creds. */
async function fullCli(
  args: string[],
): Promise<{ json?: boolean; env?: boolean; server: string } | undefined> {
  const program = buildCli();
  let seen: { json?: boolean; env?: boolean; server: string } | undefined;
  const quiet = { writeErr: () => undefined, writeOut: () => undefined };
  program.configureOutput(quiet);
  for (const c of program.commands) c.configureOutput(quiet);
  const creds = program.commands.find((c) => c.name() === 'creds') as Command;
  creds.action((opts: { json?: boolean; env?: boolean }, cmd: Command) => {
    seen = { ...opts, server: serverOf(cmd) };
  });
  try {
    await program.parseAsync(args, { from: 'user' });
  } catch {
    return undefined;
  }
  return seen;
}

const URL_A = 'https://a.example.com';
const URL_B = 'http://127.0.0.1:8080/base/';

describe('the fast path reads `creds --json` as the full CLI does', () => {
  const saved = process.env.STATEHOUSE_SERVER;
  afterEach(() => {
    if (saved === undefined) delete process.env.STATEHOUSE_SERVER;
    else process.env.STATEHOUSE_SERVER = saved;
  });

  const taken: string[][] = [
    ['creds', '--json'],
    ['creds', '--json', '--server', URL_A],
    ['creds', '--server', URL_A, '--json'],
    ['--server', URL_B, 'creds', '--json'],
    [`--server=${URL_B}`, 'creds', '--json'],
    ['creds', '--json', `--server=${URL_A}`],
  ];
  const declined: string[][] = [
    ['creds'],
    ['creds', '--env'],
    ['creds', '--json', '--env'],
    ['creds', '--json', '--json'],
    ['--json', 'creds'],
    ['creds', '--json', '--server'],
    ['creds', '--json', '--server', '--help'],
    ['creds', '--json', '--server='],
    ['creds', '--json', '--server', URL_A, '--server', URL_B],
    ['creds', '--json', '-h'],
    ['creds', '--json', 'extra'],
    ['whoami', '--json'],
    ['creds', 'creds', '--json'],
    [],
  ];

  it.each(taken.map((a) => [a.join(' '), a] as const))(
    'takes `%s` and finds the same server (with and without STATEHOUSE_SERVER)',
    async (_line, args) => {
      for (const env of [undefined, '', 'https://env.example.com/']) {
        if (env === undefined) delete process.env.STATEHOUSE_SERVER;
        else process.env.STATEHOUSE_SERVER = env;
        const given = credsJsonServer(args);
        expect(given).not.toBeUndefined();
        const full = await fullCli(args);
        expect(full).toEqual({ json: true, server: resolveServer(given ?? undefined) });
      }
    },
  );

  it.each(declined.map((a) => [a.join(' '), a] as const))(
    'leaves `%s` to the full CLI',
    (_line, args) => {
      expect(credsJsonServer(args)).toBeUndefined();
    },
  );
});
