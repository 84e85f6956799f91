import type { Command } from 'commander';
import type { TokenResponse } from './api-types';
import { ApiClient, ApiError, Authenticator, normalizeServer } from './client';
import { CredentialStore, LoginCredentials, StoredCredentials } from './credentials';
import { CliError } from './errors';

export const DEFAULT_SERVER = 'http://localhost:8080';

/** Refresh a stored access token when less than this much of its life is left. */
const REFRESH_MARGIN_MS = 60_000;

/** The server a command talks to: `--server`, else `STATEHOUSE_SERVER`, else the default. */
export function serverOf(cmd: Command): string {
  return resolveServer(cmd.optsWithGlobals<{ server?: string }>().server);
}

/** The server for a `--server` value (or none): the one rule `serverOf` and the fast path share. */
export function resolveServer(given: string | undefined): string {
  return normalizeServer(given ?? (process.env.STATEHOUSE_SERVER || DEFAULT_SERVER));
}

/** `statehouse login --server X`, spelled for messages. */
export function loginCommand(server: string): string {
  return server === DEFAULT_SERVER && !process.env.STATEHOUSE_SERVER
    ? 'statehouse login'
    : `statehouse login --server ${server}`;
}

export function loginFromTokenResponse(t: TokenResponse): LoginCredentials {
  if (typeof t.access_token !== 'string' || typeof t.refresh_token !== 'string') {
    throw new CliError('the server answered the login without an access and a refresh token');
  }
  const lifetime = typeof t.expires_in === 'number' && t.expires_in > 0 ? t.expires_in : 300;
  return {
    type: 'login',
    access_token: t.access_token,
    refresh_token: t.refresh_token,
    expires_at: new Date(Date.now() + lifetime * 1000).toISOString(),
  };
}

/** True when a stored login is to be refreshed before its access token is used. */
export function isDue(entry: LoginCredentials): boolean {
  const expires = Date.parse(entry.expires_at);
  return Number.isNaN(expires) || expires - Date.now() < REFRESH_MARGIN_MS;
}

/**
 * A token used as given, never stored and never refreshed: `STATEHOUSE_TOKEN`, or the one a
 * command just obtained or was given.
 */
export class GivenTokenAuth implements Authenticator {
  constructor(
    private readonly token: string,
    readonly hint = '',
  ) {}
  header(): Promise<string> {
    return Promise.resolve(`Bearer ${this.token}`);
  }
  recover(): Promise<boolean> {
    return Promise.resolve(false);
  }
}

/** The stored login for one server; refreshes (and stores the rotated pair) when due. */
export class StoredAuth implements Authenticator {
  private entry?: StoredCredentials;
  private recovered = false;

  constructor(
    private readonly server: string,
    private readonly store: CredentialStore,
  ) {}

  get hint(): string {
    return `log in again with \`${loginCommand(this.server)}\``;
  }

  async header(): Promise<string> {
    if (!this.entry) {
      const entry = this.store.get(this.server);
      if (!entry) {
        throw new CliError(
          `not logged in to ${this.server}: run \`${loginCommand(this.server)}\` or set STATEHOUSE_TOKEN`,
        );
      }
      this.entry = entry.type === 'login' && isDue(entry) ? await this.refresh(false) : entry;
    }
    return `Bearer ${this.entry.type === 'token' ? this.entry.token : this.entry.access_token}`;
  }

  async recover(): Promise<boolean> {
    if (this.recovered || this.entry?.type !== 'login') return false;
    this.recovered = true;
    this.entry = await this.refresh(true);
    return true;
  }

  /**
   * Rotates the refresh token under the credentials lock. Another process may have rotated it
   * in the meantime (several `creds` at once): then its result is used, because presenting an
   * already-used refresh token would end the whole login session.
   */
  private refresh(force: boolean): Promise<StoredCredentials> {
    const used = this.entry?.type === 'login' ? this.entry.access_token : undefined;
    return this.store.update<StoredCredentials>(this.server, async (current) => {
      if (!current) {
        throw new CliError(`not logged in to ${this.server}: run \`${loginCommand(this.server)}\``);
      }
      if (current.type !== 'login') return { result: current };
      const rotatedElsewhere = used !== undefined && current.access_token !== used;
      if (force ? rotatedElsewhere : !isDue(current)) return { result: current };
      const fresh = loginFromTokenResponse(await refreshTokens(this.server, current.refresh_token));
      return { entry: fresh, result: fresh };
    });
  }
}

/** `POST /v1/auth/token`: a new access token and a new refresh token for a refresh token. */
export async function refreshTokens(server: string, refreshToken: string): Promise<TokenResponse> {
  try {
    return await new ApiClient(server).json<TokenResponse>('POST', '/v1/auth/token', {
      auth: false,
      json: { refresh_token: refreshToken },
      // Shorter than the credentials lock's staleness (30 s), which this call runs under.
      timeoutMs: 20_000,
    });
  } catch (e) {
    if (e instanceof ApiError && (e.status === 401 || e.status === 400)) {
      throw new CliError(
        `the login to ${server} has ended (${e.message}): run \`${loginCommand(server)}\` again`,
      );
    }
    throw e;
  }
}

/** A client for the command's server, authenticated by STATEHOUSE_TOKEN or the stored login. */
export function clientFor(cmd: Command, store = new CredentialStore()): ApiClient {
  const server = serverOf(cmd);
  const envToken = process.env.STATEHOUSE_TOKEN;
  return new ApiClient(
    server,
    envToken
      ? new GivenTokenAuth(envToken, 'check the token in STATEHOUSE_TOKEN')
      : new StoredAuth(server, store),
  );
}
