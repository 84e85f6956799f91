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
    const oidc = this.config.oidc;
    if (!oidc)
      throw new DomainError(
        'invalid_request',
        'OIDC login is not configured on this server (STATEHOUSE_OIDC_ISSUER)',
      );
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
