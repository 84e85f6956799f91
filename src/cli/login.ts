import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import type { AuthConfig, TokenResponse } from './api-types';
import { ApiClient, ApiError } from './client';
import { CliError, networkReason } from './errors';
import { LoopbackReceiver } from './loopback';
import { trimEnd } from '../common/trim';

/** What the login needs from the provider's discovery document. */
interface ProviderEndpoints {
  issuer: string;
  authorization_endpoint: string;
  token_endpoint: string;
  code_challenge_methods_supported?: string[];
}

export interface BrowserLoginOptions {
  /** Open the system browser (the URL is printed on stderr either way). */
  openBrowser: boolean;
  /** Give up when no answer came back in this many milliseconds. */
  timeoutMs: number;
  /** Where progress and the URL go (stderr). */
  log: (line: string) => void;
}

const HTTP_TIMEOUT_MS = 30_000;

function base64url(bytes: Buffer): string {
  return bytes.toString('base64url');
}

/** A PKCE pair (RFC 7636): a 43-character verifier and its S256 challenge. */
export function pkcePair(): { verifier: string; challenge: string } {
  const verifier = base64url(randomBytes(32));
  const challenge = base64url(createHash('sha256').update(verifier, 'ascii').digest());
  return { verifier, challenge };
}

async function getJson<T>(url: string, what: string): Promise<T> {
  let res: Response;
  try {
    res = await fetch(url, {
      headers: { accept: 'application/json' },
      signal: AbortSignal.timeout(HTTP_TIMEOUT_MS),
    });
  } catch (e) {
    throw new CliError(`cannot reach ${what} at ${url}: ${networkReason(e)}`);
  }
  if (!res.ok) throw new CliError(`${what} answered HTTP ${res.status} at ${url}`);
  try {
    return (await res.json()) as T;
  } catch {
    throw new CliError(`${what} at ${url} did not answer JSON`);
  }
}

/** The provider's endpoints, from `<issuer>/.well-known/openid-configuration`. */
export async function discoverProvider(issuer: string): Promise<ProviderEndpoints> {
  const url = `${trimEnd(issuer, '/')}/.well-known/openid-configuration`;
  const doc = await getJson<Partial<ProviderEndpoints>>(url, 'the OpenID provider');
  if (doc.issuer !== issuer) {
    throw new CliError(
      `the OpenID provider's discovery document names the issuer ${String(doc.issuer)}, not ${issuer}`,
    );
  }
  if (typeof doc.authorization_endpoint !== 'string' || typeof doc.token_endpoint !== 'string') {
    throw new CliError(`the OpenID provider's discovery document at ${url} lacks its endpoints`);
  }
  const methods = doc.code_challenge_methods_supported;
  if (Array.isArray(methods) && !methods.includes('S256')) {
    throw new CliError('the OpenID provider does not support PKCE with S256');
  }
  return doc as ProviderEndpoints;
}

/** Opens the system browser; any failure is ignored (the URL is printed anyway). */
export function openBrowser(url: string): void {
  const [cmd, args] =
    process.platform === 'darwin'
      ? ['open', [url]]
      : process.platform === 'win32'
        ? ['rundll32', ['url.dll,FileProtocolHandler', url]]
        : ['xdg-open', [url]];
  try {
    const child = spawn(cmd, args, { stdio: 'ignore', detached: true });
    child.on('error', () => undefined);
    child.unref();
  } catch {
    // no browser here: the printed URL is the way
  }
}

/** The provider's token endpoint: the code and the PKCE verifier for an ID token. */
async function redeemCode(
  provider: ProviderEndpoints,
  params: Record<string, string>,
): Promise<string> {
  let res: Response;
  try {
    res = await fetch(provider.token_endpoint, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        accept: 'application/json',
      },
      body: new URLSearchParams(params).toString(),
      signal: AbortSignal.timeout(HTTP_TIMEOUT_MS),
    });
  } catch (e) {
    throw new CliError(`cannot reach the OpenID provider's token endpoint: ${networkReason(e)}`);
  }
  let body: Record<string, unknown> = {};
  try {
    body = (await res.json()) as Record<string, unknown>;
  } catch {
    // reported below
  }
  if (!res.ok) {
    const error = typeof body.error === 'string' ? body.error : `HTTP ${res.status}`;
    const description =
      typeof body.error_description === 'string' ? ` (${body.error_description})` : '';
    throw new CliError(
      `the OpenID provider refused the authorization code: ${error}${description}`,
    );
  }
  if (typeof body.id_token !== 'string') {
    throw new CliError('the OpenID provider returned no ID token (is the scope openid granted?)');
  }
  return body.id_token;
}

/** The nonce inside an ID token (read, not verified: the server verifies the token). */
function nonceOf(idToken: string): unknown {
  try {
    const payload: unknown = JSON.parse(
      Buffer.from(idToken.split('.')[1] ?? '', 'base64url').toString(),
    );
    return (payload as { nonce?: unknown }).nonce;
  } catch {
    return undefined;
  }
}

/**
 * The whole browser login against `server`: authorization code with PKCE (S256) as the public
 * client the server names, through a loopback redirect; then the ID token is exchanged at the
 * server for its own access and refresh tokens.
 */
export async function browserLogin(
  server: string,
  options: BrowserLoginOptions,
): Promise<TokenResponse> {
  const api = new ApiClient(server);
  const config = await api.json<AuthConfig>('GET', '/v1/auth/config', {
    auth: false,
    timeoutMs: HTTP_TIMEOUT_MS,
  });
  if (!config.issuer || !config.client_id) {
    throw new CliError(
      `${server} has no OpenID login configured (STATEHOUSE_OIDC_ISSUER); use \`statehouse login --token\` with an API token`,
    );
  }
  const provider = await discoverProvider(config.issuer);
  const state = base64url(randomBytes(32));
  const nonce = base64url(randomBytes(32));
  const pkce = pkcePair();
  const scopes = config.scopes.includes('openid') ? config.scopes : ['openid', ...config.scopes];

  const receiver = new LoopbackReceiver(state, config.issuer);
  const redirectUri = await receiver.listen();
  const seconds = Math.round(options.timeoutMs / 1000);
  const timer = setTimeout(
    () =>
      receiver.fail(
        new CliError(
          `no login answer came back within ${seconds} second${seconds === 1 ? '' : 's'}; start the login again`,
        ),
      ),
    options.timeoutMs,
  );
  try {
    const authUrl = new URL(provider.authorization_endpoint);
    for (const [k, v] of Object.entries({
      response_type: 'code',
      client_id: config.client_id,
      redirect_uri: redirectUri,
      scope: scopes.join(' '),
      state,
      nonce,
      code_challenge: pkce.challenge,
      code_challenge_method: 'S256',
    })) {
      authUrl.searchParams.set(k, v);
    }
    options.log(
      `To log in to ${server}, open this address in a browser:\n\n  ${authUrl.toString()}\n`,
    );
    if (options.openBrowser) openBrowser(authUrl.toString());
    options.log('Waiting for the login to finish in the browser (Ctrl-C to cancel)…');

    const callback = await receiver.result;
    clearTimeout(timer);
    try {
      const idToken = await redeemCode(provider, {
        grant_type: 'authorization_code',
        code: callback.code,
        redirect_uri: redirectUri,
        client_id: config.client_id,
        code_verifier: pkce.verifier,
      });
      if (nonceOf(idToken) !== nonce) {
        throw new CliError('the ID token does not carry the nonce this login sent');
      }
      const tokens = await exchangeIdToken(api, idToken, nonce);
      await callback.finish(true, `You are logged in to Statehouse at ${server}.`);
      return tokens;
    } catch (e) {
      await callback.finish(false, e instanceof Error ? e.message : String(e));
      throw e;
    }
  } finally {
    clearTimeout(timer);
    await receiver.close();
  }
}

async function exchangeIdToken(
  api: ApiClient,
  idToken: string,
  nonce: string,
): Promise<TokenResponse> {
  try {
    return await api.json<TokenResponse>('POST', '/v1/auth/exchange', {
      auth: false,
      json: { id_token: idToken, nonce },
      timeoutMs: HTTP_TIMEOUT_MS,
    });
  } catch (e) {
    if (e instanceof ApiError) throw new CliError(`the server refused the login: ${e.message}`);
    throw e;
  }
}
