import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { ROOT } from './paths';
import { collectOutput, exitCode } from './processes';

export interface PostgresCluster {
  /** The superuser's URL (database "postgres"). */
  url: string;
  stop: () => Promise<void>;
}

/**
 * A throwaway PostgreSQL cluster for a suite that needs one wherever it runs (the terraform
 * project runs without DATABASE_URL): `scripts/with-postgres.sh` itself, around a command that
 * reports its DATABASE_URL and waits until this process closes its stdin — so the script's own
 * cleanup stops and deletes the cluster, also when the test process dies. With DATABASE_URL
 * already set, that server is used and nothing is started.
 */
export async function startPostgresCluster(): Promise<PostgresCluster> {
  const existing = process.env.DATABASE_URL;
  if (existing !== undefined) return { url: existing, stop: () => Promise.resolve() };
  const waiter =
    'console.log("DATABASE_URL=" + process.env.DATABASE_URL);' +
    'process.stdin.resume(); process.stdin.on("end", () => process.exit(0));';
  const proc = spawn(join(ROOT, 'scripts', 'with-postgres.sh'), [process.execPath, '-e', waiter], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const output = collectOutput(proc);
  const exited = exitCode(proc);
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`no PostgreSQL cluster after 60 s:\n${output()}`)),
      60_000,
    );
    const look = (): void => {
      const m = /^DATABASE_URL=(\S+)$/m.exec(output());
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    };
    proc.stdout.on('data', look);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(
        new Error(`scripts/with-postgres.sh exited (${code}) before the cluster ran:\n${output()}`),
      );
    });
  });
  return {
    url,
    stop: async () => {
      proc.stdin.end();
      await exited;
    },
  };
}
