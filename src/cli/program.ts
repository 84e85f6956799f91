import 'reflect-metadata';
import { Command, CommanderError } from 'commander';
import { StartupError } from '../common/startup';
import { ConfigError, loadConfig } from '../config/config';
import { registerAuditCommands } from './commands/audit';
import { registerAuthCommands } from './commands/auth';
import { registerGraphCommands, registerUnitStatusCommand } from './commands/graph';
import { registerLockCommands } from './commands/lock';
import { registerRbacCommands } from './commands/rbac';
import { registerTokenCommands } from './commands/token';
import { registerUnitCommands } from './commands/unit';
import { packageVersion } from '../common/version';
import { precompilePglite } from '../database/pglite-precompile';

/**
 * The `statehouse` command: the server (`serve`, `migrate`, `openapi`) and the client commands
 * that talk to a server given by `--server` or `STATEHOUSE_SERVER`.
 */
export function buildCli(): Command {
  const program = new Command('statehouse')
    .description('Statehouse: a control plane for Terraform and OpenTofu state')
    .option(
      '--server <url>',
      'the Statehouse server (default: $STATEHOUSE_SERVER, else http://localhost:8080)',
    )
    .version(packageVersion(), '-V, --version', 'print the version')
    .configureHelp({ showGlobalOptions: true })
    // Usage errors: one line `statehouse: …` and exit code 2 (see the handler below).
    .configureOutput({
      outputError: (str, write) => write(`statehouse: ${str.replace(/^error: /, '')}`),
    })
    .exitOverride();

  program
    .command('serve')
    .description('start the server (settings from the environment; see the README)')
    .action(async () => {
      const config = loadConfig();
      // Compiled in the background while the server's modules load (see precompilePglite).
      if (!config.databaseUrl) precompilePglite();
      const { serve } = await import('../server');
      // serve takes SIGTERM over in its first step (synchronously): no moment without a handler.
      process.off('SIGTERM', sigtermBeforeDone);
      await serve(config);
    });

  program
    .command('migrate')
    .description('apply pending database migrations (under the same advisory lock as the server)')
    .option('--check', 'fail when the entities and the migrations disagree')
    .action(async (opts: { check?: boolean }) => {
      const config = loadConfig();
      const { runMigrateCommand } = await import('./migrate.command');
      process.exitCode = await runMigrateCommand(config, opts.check ?? false);
    });

  program
    .command('openapi')
    .description('print the OpenAPI document of the management API (as served at /docs)')
    .option('-o, --out <file>', 'write to a file instead of stdout')
    .action(async (opts: { out?: string }) => {
      const { runOpenApiCommand } = await import('./openapi.command');
      await runOpenApiCommand(opts.out);
    });

  registerAuthCommands(program);
  registerTokenCommands(program);
  registerUnitStatusCommand(registerUnitCommands(program));
  registerLockCommands(program);
  registerRbacCommands(program);
  registerAuditCommands(program);
  registerGraphCommands(program);

  return program;
}

/**
 * SIGTERM ends any command but `serve` with exit status 1 ("not done"), not the 143 of a process
 * killed by it: the container image's init reports 143 as a clean 0 (`tini -e 143`, meant for
 * the server's clean stop), and a migrations Job or another command cut short must not look
 * successful. `serve` takes the signal over: it drains, then exits 143.
 */
function sigtermBeforeDone(): void {
  process.stderr.write('statehouse: SIGTERM before the command was done (exit 1)\n');
  process.exit(1);
}

/**
 * Runs the command line `args` (without node and the script), e.g. `['serve']`, in the full CLI
 * (`main.ts`, the bin, comes here for everything its fast path does not answer). Failures are
 * reported here: usage and configuration errors in one line with exit code 2, a server that
 * cannot start for a reason the operator can fix in one line with exit code 1, anything else
 * with its stack.
 */
export function main(args: string[]): Promise<void> {
  process.on('SIGTERM', sigtermBeforeDone);
  return buildCli()
    .parseAsync(args, { from: 'user' })
    .then(
      () => undefined,
      (e: unknown) => {
        if (e instanceof CommanderError) {
          // Help and --version exit 0; every parsing error is a usage error.
          process.exit(e.exitCode === 0 ? 0 : 2);
        }
        if (e instanceof ConfigError) {
          process.stderr.write(`statehouse: ${e.message}\n`);
          process.exit(2);
        }
        if (e instanceof StartupError) {
          process.stderr.write(`statehouse: ${e.message}\n`);
          process.exit(1);
        }
        process.stderr.write(`statehouse: ${(e as Error).stack ?? String(e)}\n`);
        process.exit(1);
      },
    );
}
