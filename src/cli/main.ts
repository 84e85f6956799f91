#!/usr/bin/env node
import 'reflect-metadata';
import { Command } from 'commander';
import { ConfigError, loadConfig } from '../config/config';

/** The `statehouse` command. Later steps add login, creds, unit, lock, … subcommands. */
export function buildCli(): Command {
  const program = new Command('statehouse')
    .description('Statehouse: a control plane for Terraform and OpenTofu state')
    .showHelpAfterError();

  program
    .command('serve')
    .description('start the server (settings from the environment; see the README)')
    .action(async () => {
      const config = loadConfig();
      const { startServer } = await import('../server');
      await startServer(config);
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

  return program;
}

if (require.main === module) {
  buildCli()
    .parseAsync(process.argv)
    .catch((e: unknown) => {
      if (e instanceof ConfigError) {
        process.stderr.write(`statehouse: ${e.message}\n`);
        process.exit(2);
      }
      process.stderr.write(`statehouse: ${(e as Error).stack ?? String(e)}\n`);
      process.exit(1);
    });
}
