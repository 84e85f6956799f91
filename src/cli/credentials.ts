import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { homedir } from 'node:os';
import { dirname, isAbsolute, join } from 'node:path';
import { CliError } from './errors';

/** A login through the OpenID provider: a short-lived access token and its refresh token. */
export interface LoginCredentials {
  type: 'login';
  access_token: string;
  refresh_token: string;
  /** When the access token expires (ISO 8601). */
  expires_at: string;
}

/** A token given to `statehouse login --token` (an API token, usually). */
export interface TokenCredentials {
  type: 'token';
  token: string;
}

export type StoredCredentials = LoginCredentials | TokenCredentials;

interface CredentialsFile {
  servers: Record<string, StoredCredentials>;
}

/** `$XDG_CONFIG_HOME/statehouse/credentials.json`, else `~/.config/statehouse/credentials.json`. */
export function credentialsPath(env: NodeJS.ProcessEnv = process.env): string {
  const xdg = env.XDG_CONFIG_HOME;
  // The XDG spec says a relative XDG_CONFIG_HOME is invalid and must be ignored.
  const base = xdg && isAbsolute(xdg) ? xdg : join(homedir(), '.config');
  return join(base, 'statehouse', 'credentials.json');
}

/**
 * Writes `text` to `path` so that readers see the old file or the new one, never a part: a
 * temporary file created with mode 0600 (never readable by others, not even for a moment),
 * fsync, rename over `path`, then fsync of the directory where the platform allows it.
 */
export function writeFileAtomic(path: string, text: string): void {
  const tmp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  const fd = openSync(tmp, 'wx', 0o600);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } catch (e) {
    closeSync(fd);
    rmSync(tmp, { force: true });
    throw e;
  }
  closeSync(fd);
  try {
    renameSync(tmp, path);
  } catch (e) {
    rmSync(tmp, { force: true });
    throw e;
  }
  try {
    const dfd = openSync(dirname(path), 'r');
    try {
      fsyncSync(dfd);
    } finally {
      closeSync(dfd);
    }
  } catch {
    // Directory fsync is not possible everywhere; the rename is atomic regardless.
  }
}

/** Creates `dir` (mode 0700) when missing; takes group and other access away when present. */
export function ensurePrivateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  if ((statSync(dir).mode & 0o077) !== 0) chmodSync(dir, 0o700);
}

function isStored(value: unknown): value is StoredCredentials {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  if (v.type === 'token') return typeof v.token === 'string';
  return (
    v.type === 'login' &&
    typeof v.access_token === 'string' &&
    typeof v.refresh_token === 'string' &&
    typeof v.expires_at === 'string'
  );
}

/**
 * The credentials file: a map from server URL to what the CLI authenticates with there.
 * Written atomically (temporary file, fsync, rename) with mode 0600 in a 0700 directory;
 * read-modify-write cycles hold a lock file so concurrent `statehouse` processes (several
 * `credential_process` calls at once) never lose each other's refreshed tokens.
 */
export class CredentialStore {
  constructor(readonly path: string = credentialsPath()) {}

  get(server: string): StoredCredentials | undefined {
    return this.read().servers[server];
  }

  /** Stores (or with `undefined`, removes) the entry of one server, under the lock. */
  async set(server: string, entry: StoredCredentials | undefined): Promise<void> {
    await this.locked(() => {
      const file = this.read();
      if (entry) file.servers[server] = entry;
      else delete file.servers[server];
      this.write(file);
    });
  }

  /**
   * Runs `fn` with the lock held, on the entry as it is now (another process may have changed
   * it since we last looked); what `fn` returns is stored when it differs.
   */
  async update<T>(
    server: string,
    fn: (
      current: StoredCredentials | undefined,
    ) => Promise<{ entry?: StoredCredentials; result: T }>,
  ): Promise<T> {
    return this.locked(async () => {
      const file = this.read();
      const { entry, result } = await fn(file.servers[server]);
      if (entry) {
        file.servers[server] = entry;
        this.write(file);
      }
      return result;
    });
  }

  private read(): CredentialsFile {
    let text: string;
    try {
      text = readFileSync(this.path, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { servers: {} };
      throw new CliError(`cannot read ${this.path}: ${(e as Error).message}`);
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new CliError(`${this.path} is not valid JSON; remove it and log in again`);
    }
    const servers = (parsed as { servers?: unknown } | null)?.servers;
    if (typeof servers !== 'object' || servers === null || Array.isArray(servers)) {
      throw new CliError(
        `${this.path} is not a Statehouse credentials file; remove it and log in again`,
      );
    }
    const out: CredentialsFile = { servers: {} };
    for (const [server, entry] of Object.entries(servers as Record<string, unknown>)) {
      if (isStored(entry)) out.servers[server] = entry;
    }
    return out;
  }

  private ensureDir(): void {
    ensurePrivateDir(dirname(this.path));
  }

  private write(file: CredentialsFile): void {
    this.ensureDir();
    writeFileAtomic(this.path, `${JSON.stringify(file, null, 2)}\n`);
  }

  private async locked<T>(fn: () => T | Promise<T>): Promise<T> {
    this.ensureDir();
    const lock = `${this.path}.lock`;
    const deadline = Date.now() + 25_000;
    for (;;) {
      try {
        closeSync(openSync(lock, 'wx', 0o600));
        break;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
        // A lock older than 30 s belongs to a process that died while holding it.
        try {
          if (Date.now() - statSync(lock).mtimeMs > 30_000) unlinkSync(lock);
        } catch {
          // it went away in the meantime
        }
        if (Date.now() > deadline) {
          throw new CliError(
            `${lock} is held by another statehouse process; remove it if no other one is running`,
          );
        }
        await new Promise((r) => setTimeout(r, 25 + Math.random() * 50));
      }
    }
    try {
      return await fn();
    } finally {
      rmSync(lock, { force: true });
    }
  }
}
