import { createHash } from 'node:crypto';
import { closeSync, constants, fstatSync, openSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { ProcessCredentials } from './api-types';
import { credentialsPath, CredentialStore, ensurePrivateDir, writeFileAtomic } from './credentials';
import { isDue } from './session';

/**
 * Cached credentials are handed out only while more than this is left before their
 * `Expiration`. The AWS SDK for JavaScript v3 takes credentials with less than 5 minutes left
 * for expired and asks again at once, so handing out such ones would make it spin; Terraform's
 * S3 backend (the Go SDK) and rclone use them until they expire. With the default 15-minute
 * lifetime one issue serves the first 10 minutes. botocore (the AWS CLI) asks again whenever
 * less than 15 minutes are left, i.e. on every call: those calls are what the cache makes cheap.
 */
export const REUSE_MARGIN_MS = 5 * 60_000;

interface CacheFile {
  entries: Record<string, unknown>;
}

/** Beside the stored logins: `…/statehouse/s3-credentials-cache.json`. */
export function credsCachePath(env: NodeJS.ProcessEnv = process.env): string {
  return join(dirname(credentialsPath(env)), 's3-credentials-cache.json');
}

export function isProcessCredentials(v: unknown): v is ProcessCredentials {
  if (typeof v !== 'object' || v === null) return false;
  const c = v as Record<string, unknown>;
  return (
    c.Version === 1 &&
    typeof c.AccessKeyId === 'string' &&
    typeof c.SecretAccessKey === 'string' &&
    typeof c.SessionToken === 'string' &&
    typeof c.Expiration === 'string'
  );
}

function reusable(v: unknown, now: number): v is ProcessCredentials {
  return isProcessCredentials(v) && Date.parse(v.Expiration) - now > REUSE_MARGIN_MS;
}

/**
 * The S3 credentials last issued, per server and per credential source, so that
 * `statehouse creds` need not ask the server again while they have time left. Entries are keyed
 * by a SHA-256 of the server URL and the secret the credentials were issued for (the
 * STATEHOUSE_TOKEN or stored API token, or the stored login's current refresh token), never the
 * secret itself: another server, token or login finds nothing. The file is written like the
 * credentials file (mode 0600, atomically), and one not owned by the user or readable by group
 * or others is ignored, as is one that does not parse: the credentials are then fetched anew.
 */
export class CredsCache {
  constructor(
    readonly path: string = credsCachePath(),
    private readonly store: CredentialStore = new CredentialStore(),
    private readonly env: NodeJS.ProcessEnv = process.env,
  ) {}

  /** Cached credentials for the server and the current source with time left, if any. */
  get(server: string, now = Date.now()): ProcessCredentials | undefined {
    const key = this.key(server);
    const hit = key === undefined ? undefined : this.read().entries[key];
    if (!reusable(hit, now)) return undefined;
    const { Version, AccessKeyId, SecretAccessKey, SessionToken, Expiration } = hit;
    return { Version, AccessKeyId, SecretAccessKey, SessionToken, Expiration };
  }

  /**
   * Remembers freshly issued credentials, dropping entries that can no longer be handed out.
   * Best effort: a configuration directory that cannot be written (a read-only HOME in CI)
   * only means the next call asks the server again.
   */
  put(server: string, creds: ProcessCredentials, now = Date.now()): void {
    try {
      const key = this.key(server);
      if (key === undefined) return;
      const entries: Record<string, ProcessCredentials> = {};
      for (const [k, v] of Object.entries(this.read().entries)) {
        if (k !== key && reusable(v, now)) entries[k] = v;
      }
      entries[key] = creds;
      ensurePrivateDir(dirname(this.path));
      writeFileAtomic(this.path, `${JSON.stringify({ entries }, null, 2)}\n`);
    } catch {
      // see above: not worth failing a command that has its credentials
    }
  }

  /** Forgets every cached credential (`statehouse login` and `logout`). */
  clear(): void {
    rmSync(this.path, { force: true });
  }

  /**
   * The entry's key, or undefined when no credentials could be reused: no login, or a stored
   * login due for a refresh (that refresh runs first, as without the cache, so an ended login
   * is reported at the same moment; the refreshed login is another key).
   */
  private key(server: string): string | undefined {
    const envToken = this.env.STATEHOUSE_TOKEN;
    let source: string;
    if (envToken) source = `token\n${envToken}`;
    else {
      const entry = this.store.get(server);
      if (!entry || (entry.type === 'login' && isDue(entry))) return undefined;
      source = entry.type === 'token' ? `token\n${entry.token}` : `login\n${entry.refresh_token}`;
    }
    return createHash('sha256').update(`${server}\n${source}`).digest('hex');
  }

  private read(): CacheFile {
    let fd: number;
    try {
      fd = openSync(this.path, constants.O_RDONLY | (constants.O_NOFOLLOW ?? 0));
    } catch {
      return { entries: {} };
    }
    try {
      const stat = fstatSync(fd);
      const uid = process.getuid?.();
      if (!stat.isFile() || (uid !== undefined && stat.uid !== uid) || (stat.mode & 0o077) !== 0) {
        return { entries: {} };
      }
      const entries = (JSON.parse(readFileSync(fd, 'utf8')) as Partial<CacheFile> | null)?.entries;
      return typeof entries === 'object' && entries !== null && !Array.isArray(entries)
        ? { entries }
        : { entries: {} };
    } catch {
      return { entries: {} };
    } finally {
      closeSync(fd);
    }
  }
}
