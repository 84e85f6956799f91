import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { ROOT } from './paths';

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
  let out = '';
  proc.stdout.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((res) => proc.once('exit', (code) => res(code)));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`no PostgreSQL cluster after 60 s:\n${out}`)),
      60_000,
    );
    const look = (): void => {
      const m = /^DATABASE_URL=(\S+)$/m.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    };
    proc.stdout.on('data', look);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(
        new Error(`scripts/with-postgres.sh exited (${code}) before the cluster ran:\n${out}`),
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
