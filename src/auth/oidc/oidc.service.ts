import { Inject, Injectable, Logger } from '@nestjs/common';
import { createRemoteJWKSet, decodeJwt, errors, JWTPayload, jwtVerify } from 'jose';
import { APP_CONFIG, AppConfig } from '../../config/config';
import { DomainError } from '../../common/errors';
import { Identity } from '../tokens/token.service';

interface Discovery {
  issuer: string;
  jwks_uri: string;
  authorization_endpoint?: string;
  token_endpoint?: string;
}

const DISCOVERY_TTL_MS = 10 * 60 * 1000;
/** Asymmetric algorithms only: an ID token "signed" with a shared secret or none is refused. */
const ID_TOKEN_ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
];

/**
 * Verifies ID tokens from the configured OpenID provider against its discovery document and
 * JWKS: signature, `iss`, `aud` = the CLI's client id, `exp`, and `nonce` when the client sent
 * one. The email is kept only when the provider says it is verified.
 */
@Injectable()
export class OidcService {
  private readonly logger = new Logger('oidc');
  private discovery?: { doc: Discovery; jwks: ReturnType<typeof createRemoteJWKSet>; at: number };

  constructor(@Inject(APP_CONFIG) private readonly config: AppConfig) {}

  get enabled(): boolean {
    return this.config.oidc !== undefined;
  }

  async verifyIdToken(idToken: string, nonce?: string): Promise<Identity> {
    const oidc = this.required();
    // Name the failed check precisely: a token from another provider would otherwise only fail
    // its signature (this provider does not publish that key). Nothing here is trusted yet.
    let claimedIssuer: unknown;
    try {
      claimedIssuer = decodeJwt(idToken).iss;
    } catch {
      throw new DomainError('unauthenticated', 'ID token rejected: it is not a valid ID token');
    }
    if (claimedIssuer !== oidc.issuer) {
      throw new DomainError(
        'unauthenticated',
        'ID token rejected: it comes from another issuer (iss)',
      );
    }
    const { jwks } = await this.load();
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(idToken, jwks, {
        issuer: oidc.issuer,
        audience: oidc.clientId,
        algorithms: ID_TOKEN_ALGORITHMS,
        clockTolerance: 30,
        requiredClaims: ['sub', 'exp', 'iat'],
      }));
    } catch (e) {
      if (
        e instanceof errors.JWKSTimeout ||
        e instanceof errors.JWKSInvalid ||
        e instanceof TypeError
      ) {
        this.logger.warn({ err: e }, "cannot read the OpenID provider's keys");
        throw new DomainError('unavailable', 'the OpenID provider cannot be reached; try again');
      }
      throw new DomainError('unauthenticated', `ID token rejected: ${describe(e)}`);
    }
    if (nonce !== undefined && payload.nonce !== nonce) {
      throw new DomainError(
        'unauthenticated',
        'ID token rejected: the nonce does not match the one this login sent (nonce)',
      );
    }
    const groupsClaim = payload[oidc.groupsClaim];
    return {
      subject: `user:${payload.sub as string}`,
      ...(payload.email_verified === true && typeof payload.email === 'string'
        ? { email: payload.email }
        : {}),
      groups: Array.isArray(groupsClaim)
        ? groupsClaim.filter((g): g is string => typeof g === 'string')
        : [],
    };
  }

  /**
   * Where to send a browser to sign in at the provider (authorization code with PKCE S256),
   * coming back to `redirectUri` with `state`. For the server's own sign-in (`terraform login`);
   * the CLI's login builds its own.
   */
  async authorizationUrl(request: {
    redirectUri: string;
    state: string;
    nonce: string;
    codeChallenge: string;
  }): Promise<string> {
    const oidc = this.required();
    const { doc } = await this.load();
    if (typeof doc.authorization_endpoint !== 'string') {
      throw new DomainError(
        'unavailable',
        'the OpenID provider publishes no authorization_endpoint in its discovery document',
      );
    }
    const url = new URL(doc.authorization_endpoint);
    url.searchParams.set('response_type', 'code');
    url.searchParams.set('client_id', oidc.clientId);
    url.searchParams.set('redirect_uri', request.redirectUri);
    url.searchParams.set('scope', oidc.scopes.join(' '));
    url.searchParams.set('state', request.state);
    url.searchParams.set('nonce', request.nonce);
    url.searchParams.set('code_challenge', request.codeChallenge);
    url.searchParams.set('code_challenge_method', 'S256');
    return url.toString();
  }

  /**
   * Redeems an authorization code at the provider's token endpoint (public client, PKCE) and
   * verifies the ID token it answers with, `nonce` included.
   */
  async redeemCode(request: {
    code: string;
    codeVerifier: string;
    redirectUri: string;
    nonce: string;
  }): Promise<Identity> {
    const oidc = this.required();
    const { doc } = await this.load();
    if (typeof doc.token_endpoint !== 'string') {
      throw new DomainError(
        'unavailable',
        'the OpenID provider publishes no token_endpoint in its discovery document',
      );
    }
    let answer: { id_token?: unknown; error?: unknown; error_description?: unknown };
    let status: number;
    try {
      const res = await fetch(doc.token_endpoint, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          accept: 'application/json',
        },
        body: new URLSearchParams({
          grant_type: 'authorization_code',
          code: request.code,
          redirect_uri: request.redirectUri,
          client_id: oidc.clientId,
          code_verifier: request.codeVerifier,
        }).toString(),
        signal: AbortSignal.timeout(10_000),
      });
      status = res.status;
      answer = JSON.parse(await boundedText(res, MAX_TOKEN_ANSWER_BYTES)) as typeof answer;
    } catch (e) {
      this.logger.warn({ err: e }, "cannot redeem a code at the OpenID provider's token endpoint");
      throw new DomainError('unavailable', 'the OpenID provider cannot be reached; try again');
    }
    if (status !== 200 || typeof answer.id_token !== 'string') {
      const error =
        typeof answer.error === 'string' ? answer.error.slice(0, 100) : `HTTP ${status}`;
      throw new DomainError(
        'unauthenticated',
        `the OpenID provider refused the sign-in code: ${error}`,
      );
    }
    return this.verifyIdToken(answer.id_token, request.nonce);
  }

  private required(): NonNullable<AppConfig['oidc']> {
    const oidc = this.config.oidc;
    if (!oidc)
      throw new DomainError(
        'invalid_request',
        'OIDC login is not configured on this server (STATEHOUSE_OIDC_ISSUER)',
      );
    return oidc;
  }

  /** The provider's discovery document (cached), checked to name the configured issuer. */
  async load(): Promise<{ doc: Discovery; jwks: ReturnType<typeof createRemoteJWKSet> }> {
    const oidc = this.config.oidc as NonNullable<AppConfig['oidc']>;
    if (this.discovery && Date.now() - this.discovery.at < DISCOVERY_TTL_MS) return this.discovery;
    const url = `${oidc.issuer.replace(/\/$/, '')}/.well-known/openid-configuration`;
    let doc: Discovery;
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(5000) });
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      doc = (await res.json()) as Discovery;
    } catch (e) {
      this.logger.warn({ err: e, url }, "cannot read the OpenID provider's discovery document");
      throw new DomainError('unavailable', 'the OpenID provider cannot be reached; try again');
    }
    if (doc.issuer !== oidc.issuer || typeof doc.jwks_uri !== 'string') {
      throw new DomainError(
        'unavailable',
        'the OpenID provider discovery document does not match STATEHOUSE_OIDC_ISSUER',
      );
    }
    this.discovery = { doc, jwks: createRemoteJWKSet(new URL(doc.jwks_uri)), at: Date.now() };
    return this.discovery;
  }
}

/** The most a provider's token answer may be (an ID token and an access token, with room). */
const MAX_TOKEN_ANSWER_BYTES = 256 * 1024;

/** A response body as text, refused beyond `limit` bytes without reading the rest. */
async function boundedText(res: Response, limit: number): Promise<string> {
  const reader = res.body?.getReader() as ReadableStreamDefaultReader<Uint8Array> | undefined;
  if (!reader) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel();
      throw new Error(`the answer is larger than ${limit} bytes`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function describe(e: unknown): string {
  if (e instanceof errors.JWTExpired) return 'it has expired (exp)';
  if (e instanceof errors.JWTClaimValidationFailed) {
    if (e.claim === 'iss') return 'it comes from another issuer (iss)';
    if (e.claim === 'aud') return 'it was issued for another client (aud)';
    if (e.claim === 'nbf' || e.claim === 'iat') return 'it is not valid yet';
    return `its ${e.claim} claim is invalid`;
  }
  if (e instanceof errors.JWSSignatureVerificationFailed) return 'the signature does not verify';
  if (e instanceof errors.JWKSNoMatchingKey)
    return 'it was signed with a key the provider does not publish (kid)';
  if (e instanceof errors.JOSEAlgNotAllowed) return 'its algorithm is not accepted';
  return 'it is not a valid ID token';
}
