import { Inject, Injectable } from '@nestjs/common';
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { APP_CONFIG, AppConfig } from '../config/config';
import { DomainError } from '../common/errors';
import { OidcService } from '../auth/oidc/oidc.service';
import { ApiTokenService } from '../auth/tokens/api-token.service';
import { Identity, sha256Hex } from '../auth/tokens/token.service';
import { TerraformLoginRepository } from './terraform-login.repository';

/** The OAuth client id Terraform is told to use (login.v1 `client`); the only one accepted. */
export const TERRAFORM_CLIENT_ID = 'terraform';
/** The loopback ports Terraform may listen on for the redirect (inclusive). */
export const LOGIN_PORTS: readonly [number, number] = [10000, 10010];
export const LOGIN_PATHS = {
  authorize: '/oauth/terraform/authorize',
  callback: '/oauth/terraform/callback',
  token: '/oauth/terraform/token',
} as const;
/** How long a person has to sign in at the provider. */
const AUTHORIZE_TTL_SECONDS = 600;
/** How long Terraform has to redeem its code. */
export const CODE_TTL_SECONDS = 60;

const LOOPBACK_REDIRECT = /^http:\/\/localhost:(\d{4,5})\/login$/;
const TERRAFORM_STATE = /^[\x21-\x7e]{1,256}$/;
const S256_CHALLENGE = /^[A-Za-z0-9_-]{43}$/;
const PKCE_VERIFIER = /^[A-Za-z0-9._~-]{43,128}$/;
const OUR_SECRET = /^[A-Za-z0-9_-]{43}$/;
const PROVIDER_CODE = /^[\x21-\x7e]{1,4096}$/;
const PROVIDER_ERROR = /^[\x21-\x7e]{1,100}$/;

/** A refusal shown in the browser (authorize, callback): a status and a sentence. */
export class LoginPageError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** A refusal of the token endpoint, in OAuth 2.0's form (RFC 6749 §5.2). */
export class OAuthError extends Error {
  constructor(
    readonly status: number,
    readonly error: string,
    message: string,
  ) {
    super(message);
  }
}

interface AuthorizeRow {
  redirectUri: string;
  terraformState: string;
  challenge: string;
  verifier: string;
  nonce: string;
  bindingSha256: string;
}

interface CodeRow {
  redirectUri: string;
  challenge: string;
  identity: Identity;
}

/** A browser is bound to its sign-in by a cookie named after the sign-in's state. */
export function bindingCookieName(state: string): string {
  return `statehouse_tf_login_${sha256Hex(state).slice(0, 16)}`;
}

const secret = (): string => randomBytes(32).toString('base64url');
const s256 = (verifier: string): string =>
  createHash('sha256').update(verifier, 'ascii').digest('base64url');
const sameText = (a: string, b: string): boolean => {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
};

/**
 * One parameter of a query or form: absent (undefined), or exactly one value. A repeated
 * parameter is refused rather than guessed at.
 */
function single(params: URLSearchParams, name: string, refuse: (m: string) => Error): string {
  const values = params.getAll(name);
  if (values.length > 1) throw refuse(`${name} is given more than once`);
  return values[0] ?? '';
}

/**
 * `terraform login` (login.v1): Statehouse as the OAuth authorization server for the CLI.
 * Terraform opens `authorize` in a browser with its PKCE challenge and a loopback redirect; the
 * person signs in at the configured OpenID provider (this server's own authorization-code step,
 * with its own PKCE and nonce, redirect `/oauth/terraform/callback`); the callback hands
 * Terraform's listener a single-use code that expires within 60 s; Terraform redeems it at
 * `token` with its verifier and gets an API token of that person. Every step's secret is kept
 * as its SHA-256 only and used once, on any replica.
 */
@Injectable()
export class TerraformLoginService {
  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly oidc: OidcService,
    private readonly apiTokens: ApiTokenService,
    private readonly repo: TerraformLoginRepository,
  ) {}

  /** login.v1 is offered only where people can sign in: with an OpenID provider configured. */
  get enabled(): boolean {
    return this.config.oidc !== undefined;
  }

  /** The login.v1 entry of Terraform's discovery document. */
  discovery(): Record<string, unknown> {
    return {
      client: TERRAFORM_CLIENT_ID,
      grant_types: ['authz_code'],
      authz: LOGIN_PATHS.authorize,
      token: LOGIN_PATHS.token,
      ports: [...LOGIN_PORTS],
    };
  }

  private get callbackUrl(): string {
    return `${this.config.publicUrl.replace(/\/$/, '')}${LOGIN_PATHS.callback}`;
  }

  private disabledPage(): LoginPageError {
    return new LoginPageError(
      404,
      'terraform login is not offered here: this server has no OpenID provider (STATEHOUSE_OIDC_ISSUER). Create an API token instead and put it in a credentials block or TF_TOKEN_<host>.',
    );
  }

  /**
   * Checks Terraform's authorization request and answers where to send the browser (the
   * provider) and the cookie that binds this browser to the sign-in.
   */
  async authorize(
    query: URLSearchParams,
  ): Promise<{ location: string; cookie: { name: string; value: string; maxAge: number } }> {
    if (!this.enabled) throw this.disabledPage();
    const bad = (m: string) =>
      new LoginPageError(400, `This is not a login request Terraform would make: ${m}.`);
    const get = (name: string) => single(query, name, bad);
    if (get('client_id') !== TERRAFORM_CLIENT_ID)
      throw bad(`client_id must be "${TERRAFORM_CLIENT_ID}"`);
    if (get('response_type') !== 'code') throw bad('response_type must be "code"');
    const redirectUri = get('redirect_uri');
    const port = LOOPBACK_REDIRECT.exec(redirectUri)?.[1];
    if (port === undefined || Number(port) < LOGIN_PORTS[0] || Number(port) > LOGIN_PORTS[1]) {
      throw bad(
        `redirect_uri must be http://localhost:<port>/login with a port from ${LOGIN_PORTS[0]} to ${LOGIN_PORTS[1]}`,
      );
    }
    const terraformState = get('state');
    if (!TERRAFORM_STATE.test(terraformState))
      throw bad('state must be 1 to 256 printable ASCII characters');
    if (get('code_challenge_method') !== 'S256') throw bad('code_challenge_method must be S256');
    const challenge = get('code_challenge');
    if (!S256_CHALLENGE.test(challenge))
      throw bad('code_challenge must be a base64url SHA-256 (43 characters)');

    const state = secret();
    const verifier = secret();
    const nonce = secret();
    const binding = secret();
    const location = await this.pageErrors(() =>
      this.oidc.authorizationUrl({
        redirectUri: this.callbackUrl,
        state,
        nonce,
        codeChallenge: s256(verifier),
      }),
    );
    const row: AuthorizeRow = {
      redirectUri,
      terraformState,
      challenge,
      verifier,
      nonce,
      bindingSha256: sha256Hex(binding),
    };
    const added = await this.repo.add(
      sha256Hex(state),
      'authorize',
      { ...row },
      AUTHORIZE_TTL_SECONDS,
    );
    if (!added) {
      throw new LoginPageError(503, 'Too many logins are in progress on this server; try again.');
    }
    return {
      location,
      cookie: { name: bindingCookieName(state), value: binding, maxAge: AUTHORIZE_TTL_SECONDS },
    };
  }

  /**
   * The provider's answer: the sign-in is taken out (once), the browser's cookie checked, the
   * provider's code redeemed and its ID token verified; Terraform's listener gets a new code.
   * Answers where to send the browser.
   */
  async callback(query: URLSearchParams, cookies: ReadonlyMap<string, string>): Promise<string> {
    if (!this.enabled) throw this.disabledPage();
    const bad = (m: string) => new LoginPageError(400, m);
    const get = (name: string) => single(query, name, bad);
    const state = get('state');
    if (!OUR_SECRET.test(state)) throw bad('This is not an answer to a login this server started.');
    const taken = await this.repo.take(sha256Hex(state), 'authorize');
    if (!taken) {
      throw bad('This login is unknown or was already completed. Run terraform login again.');
    }
    if (taken.expired)
      throw bad('This login took too long and has expired. Run terraform login again.');
    const row = taken.data as unknown as AuthorizeRow;
    const binding = cookies.get(bindingCookieName(state));
    if (binding === undefined || !sameText(sha256Hex(binding), row.bindingSha256)) {
      throw bad(
        'This login was started in another browser (its cookie is missing). Run terraform login again and finish it in the browser it opens.',
      );
    }
    const terraformAnswer = new URL(row.redirectUri);
    const error = get('error');
    if (error !== '') {
      // The person said no, or the provider refused: Terraform's listener is told, so it stops.
      terraformAnswer.searchParams.set(
        'error',
        PROVIDER_ERROR.test(error) ? error : 'access_denied',
      );
      terraformAnswer.searchParams.set('state', row.terraformState);
      return terraformAnswer.toString();
    }
    const code = get('code');
    if (!PROVIDER_CODE.test(code)) throw bad('The OpenID provider sent no usable code.');
    const identity = await this.pageErrors(() =>
      this.oidc.redeemCode({
        code,
        codeVerifier: row.verifier,
        redirectUri: this.callbackUrl,
        nonce: row.nonce,
      }),
    );
    const ours = secret();
    const codeRow: CodeRow = { redirectUri: row.redirectUri, challenge: row.challenge, identity };
    if (!(await this.repo.add(sha256Hex(ours), 'code', { ...codeRow }, CODE_TTL_SECONDS))) {
      throw new LoginPageError(503, 'Too many logins are in progress on this server; try again.');
    }
    terraformAnswer.searchParams.set('code', ours);
    terraformAnswer.searchParams.set('state', row.terraformState);
    return terraformAnswer.toString();
  }

  /**
   * Terraform's token request (a form): the code is taken out (once, whatever follows), then
   * the client, the redirect and the PKCE verifier are checked, and an API token of the person
   * is made.
   */
  async token(form: URLSearchParams): Promise<{ access_token: string; token_type: 'bearer' }> {
    if (!this.enabled) {
      throw new OAuthError(400, 'unsupported_grant_type', 'terraform login is not offered here');
    }
    const bad = (m: string) => new OAuthError(400, 'invalid_request', m);
    const get = (name: string) => single(form, name, bad);
    if (get('grant_type') !== 'authorization_code') {
      throw new OAuthError(400, 'unsupported_grant_type', 'only authorization_code is accepted');
    }
    if (get('client_id') !== TERRAFORM_CLIENT_ID) {
      throw new OAuthError(401, 'invalid_client', `client_id must be "${TERRAFORM_CLIENT_ID}"`);
    }
    const code = get('code');
    if (!OUR_SECRET.test(code)) throw new OAuthError(400, 'invalid_grant', 'unknown code');
    const verifier = get('code_verifier');
    const redirectUri = get('redirect_uri');
    const taken = await this.repo.take(sha256Hex(code), 'code');
    if (!taken) {
      throw new OAuthError(400, 'invalid_grant', 'the code is unknown or was already used');
    }
    if (taken.expired) throw new OAuthError(400, 'invalid_grant', 'the code has expired');
    const row = taken.data as unknown as CodeRow;
    if (!sameText(redirectUri, row.redirectUri)) {
      throw new OAuthError(
        400,
        'invalid_grant',
        'redirect_uri is not the one the code was sent to',
      );
    }
    if (!PKCE_VERIFIER.test(verifier) || !sameText(s256(verifier), row.challenge)) {
      throw new OAuthError(400, 'invalid_grant', 'code_verifier does not match the code_challenge');
    }
    const host = new URL(this.config.publicUrl).host;
    const made = await this.apiTokens.issueForLogin(row.identity, {
      name: `terraform login ${host} ${new Date().toISOString().slice(0, 10)}`,
      loginExpiresAt: new Date(Date.now() + this.config.tokens.refreshTtlSeconds * 1000),
      via: 'terraform-login',
    });
    return { access_token: made.token, token_type: 'bearer' };
  }

  /** The provider's refusals and outages, as pages. */
  private async pageErrors<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (e) {
      if (e instanceof DomainError) {
        const status = e.code === 'unavailable' ? 503 : e.code === 'unauthenticated' ? 401 : 400;
        throw new LoginPageError(status, `The sign-in did not succeed: ${e.message}.`);
      }
      throw e;
    }
  }
}
