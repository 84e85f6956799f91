import { KeyObject } from 'node:crypto';
import { decodeProtectedHeader, errors, JWTPayload, jwtVerify } from 'jose';
import type { CredentialParent } from '../../common/principal';
import { parseParent } from '../revocation/credential-parent';
import { tokenVerifications, VerifiedCredential } from './verification-counts';

/** Why a token was refused; each is a distinct, testable check. Never includes the token. */
export type TokenFailure =
  | 'malformed'
  | 'bad_algorithm'
  | 'unknown_key'
  | 'bad_signature'
  | 'expired'
  | 'not_yet_valid'
  | 'wrong_issuer'
  | 'wrong_audience'
  | 'missing_claim'
  | 'session_mismatch'
  | 'revoked';

export class TokenRejected extends Error {
  constructor(
    readonly reason: TokenFailure,
    message: string,
  ) {
    super(message);
    this.name = 'TokenRejected';
  }
}

/** The audiences Statehouse issues: the management API and doors, or S3 session tokens. */
export type Audience = 'api' | 's3';

export interface VerifiedClaims {
  sub: string;
  aud: string[];
  iat: number;
  exp: number;
  jti: string;
  email?: string;
  groups?: string[];
  sid?: string;
  /** The credential this one was derived from (`parent` claim). */
  parent?: CredentialParent;
}

export interface VerifyOptions {
  issuer: string;
  audience: Audience;
  /** Seconds of clock skew tolerated on exp/nbf/iat. */
  clockToleranceSeconds?: number;
  currentDate?: Date;
}

export const CLOCK_TOLERANCE_SECONDS = 30;

/**
 * Tokens whose signature and claims verified, so that a client presenting the same token on
 * every request (an S3 session token, an access token) costs one Ed25519 verification, not one
 * per request. A kept verdict is used only for the same issuer and audience and while the same
 * key object is still the verification key of its `kid` (a retired or replaced key ends it);
 * the time checks run again on every use, and anything they would refuse goes through the full
 * verification for its exact error. Revocation is not part of this: callers check it after
 * every verification, kept or not.
 */
const VERIFIED_MAX = 4096;
interface Verified {
  key: KeyObject;
  kid: string;
  issuer: string;
  audience: Audience;
  nbf: number | undefined;
  claims: VerifiedClaims;
}
const verified = new Map<string, Verified>();

/** Uses of a kept verdict since the process started (for tests). */
export const verifiedTokenReuse = { count: 0 };

function keptVerdict(
  token: string,
  keys: ReadonlyMap<string, KeyObject>,
  options: VerifyOptions,
): VerifiedClaims | undefined {
  const v = verified.get(token);
  if (!v || v.issuer !== options.issuer || v.audience !== options.audience) return undefined;
  if (keys.get(v.kid) !== v.key) return undefined;
  const now = Math.floor((options.currentDate?.getTime() ?? Date.now()) / 1000);
  const tolerance = options.clockToleranceSeconds ?? CLOCK_TOLERANCE_SECONDS;
  const { exp, iat } = v.claims;
  if (exp <= now - tolerance || iat > now + tolerance) return undefined;
  if (v.nbf !== undefined && v.nbf > now + tolerance) return undefined;
  verifiedTokenReuse.count++;
  return copyClaims(v.claims);
}

function keepVerdict(token: string, v: Verified): void {
  if (verified.size >= VERIFIED_MAX) verified.clear();
  verified.set(token, { ...v, claims: copyClaims(v.claims) });
}

/** Callers get their own copy: a kept verdict is never changed through what they were given. */
function copyClaims(c: VerifiedClaims): VerifiedClaims {
  const out: VerifiedClaims = { ...c, aud: [...c.aud] };
  if (c.groups) out.groups = [...c.groups];
  if (c.parent) out.parent = { ...c.parent };
  return out;
}

/**
 * Verifies a Statehouse-issued JWT: EdDSA only (so `none` and HMAC-with-the-public-key are
 * refused before any key is touched), a known `kid`, the signature, `iss`, `aud`, `exp`/`nbf`
 * with a small tolerance, and the claims every Statehouse token carries.
 */
export async function verifyStatehouseJwt(
  token: string,
  keys: ReadonlyMap<string, KeyObject>,
  options: VerifyOptions,
): Promise<VerifiedClaims> {
  const counts = tokenVerifications[CREDENTIAL_OF[options.audience]];
  const kept = keptVerdict(token, keys, options);
  if (kept) {
    counts.reused++;
    return kept;
  }
  try {
    const claims = await verifyFully(token, keys, options);
    counts.verified++;
    return claims;
  } catch (e) {
    counts.refused++;
    throw e;
  }
}

/** Which credential a token of each audience is (for the verification counts). */
const CREDENTIAL_OF: Record<Audience, VerifiedCredential> = {
  api: 'access_token',
  s3: 'session_token',
};

/** The signature and claims of a token with no kept verdict; a valid one's verdict is kept. */
async function verifyFully(
  token: string,
  keys: ReadonlyMap<string, KeyObject>,
  options: VerifyOptions,
): Promise<VerifiedClaims> {
  let header: ReturnType<typeof decodeProtectedHeader>;
  try {
    header = decodeProtectedHeader(token);
  } catch {
    throw new TokenRejected('malformed', 'the token is not a JWT');
  }
  if (header.alg !== 'EdDSA') {
    throw new TokenRejected(
      'bad_algorithm',
      `algorithm ${String(header.alg)} is not accepted (EdDSA only)`,
    );
  }
  const key = typeof header.kid === 'string' ? keys.get(header.kid) : undefined;
  if (!key)
    throw new TokenRejected('unknown_key', 'the token was signed with an unknown key (kid)');
  let payload: JWTPayload;
  try {
    ({ payload } = await jwtVerify(token, key, {
      algorithms: ['EdDSA'],
      issuer: options.issuer,
      audience: options.audience,
      clockTolerance: options.clockToleranceSeconds ?? CLOCK_TOLERANCE_SECONDS,
      currentDate: options.currentDate,
      requiredClaims: ['sub', 'exp', 'iat', 'jti'],
    }));
  } catch (e) {
    throw mapJoseError(e);
  }
  const aud = Array.isArray(payload.aud) ? payload.aud : [payload.aud as string];
  if (typeof payload.sub !== 'string' || payload.sub === '') {
    throw new TokenRejected('missing_claim', 'the token has no subject');
  }
  const claims: VerifiedClaims = {
    sub: payload.sub,
    aud,
    iat: payload.iat as number,
    exp: payload.exp as number,
    jti: payload.jti as string,
  };
  if (typeof payload.email === 'string') claims.email = payload.email;
  if (Array.isArray(payload.groups)) {
    claims.groups = payload.groups.filter((g): g is string => typeof g === 'string');
  }
  if (typeof payload.sid === 'string') claims.sid = payload.sid;
  const parent = parseParent(payload.parent);
  if (parent) claims.parent = parent;
  keepVerdict(token, {
    key,
    kid: header.kid as string,
    issuer: options.issuer,
    audience: options.audience,
    nbf: typeof payload.nbf === 'number' ? payload.nbf : undefined,
    claims,
  });
  return claims;
}

/**
 * An S3 session token is valid only as the partner of the access key it was issued with: its
 * audience is exactly `["s3"]` (so no access token can pose as one, and it cannot be used on
 * the API), its `sid` equals the session id inside the access key id, and it names the
 * credential it was minted from (`parent`), so revoking that revokes it.
 */
export async function verifySessionToken(
  token: string,
  keys: ReadonlyMap<string, KeyObject>,
  options: Omit<VerifyOptions, 'audience'>,
  accessKeySessionId: string,
): Promise<VerifiedClaims> {
  const claims = await verifyStatehouseJwt(token, keys, { ...options, audience: 's3' });
  if (claims.aud.length !== 1 || claims.aud[0] !== 's3') {
    throw new TokenRejected('wrong_audience', 'a session token must have the audience "s3" only');
  }
  if (claims.sid === undefined) {
    throw new TokenRejected('missing_claim', 'the session token has no session id (sid)');
  }
  if (claims.sid !== accessKeySessionId) {
    throw new TokenRejected('session_mismatch', 'the session token belongs to other credentials');
  }
  if (claims.parent === undefined) {
    throw new TokenRejected(
      'missing_claim',
      'the session token names no credential it was minted from (parent)',
    );
  }
  return claims;
}

function mapJoseError(e: unknown): TokenRejected {
  if (e instanceof errors.JWTExpired) return new TokenRejected('expired', 'the token has expired');
  if (e instanceof errors.JWTClaimValidationFailed) {
    switch (e.claim) {
      case 'nbf':
      case 'iat':
        return new TokenRejected('not_yet_valid', 'the token is not valid yet');
      case 'iss':
        return new TokenRejected('wrong_issuer', 'the token was issued by someone else');
      case 'aud':
        return new TokenRejected(
          'wrong_audience',
          'the token is not meant for this use (audience)',
        );
      default:
        return new TokenRejected(
          'missing_claim',
          `the token's ${e.claim} claim is missing or invalid`,
        );
    }
  }
  if (e instanceof errors.JWSSignatureVerificationFailed) {
    return new TokenRejected('bad_signature', 'the token signature does not verify');
  }
  if (e instanceof errors.JOSEAlgNotAllowed) {
    return new TokenRejected('bad_algorithm', 'the token algorithm is not accepted');
  }
  return new TokenRejected('malformed', 'the token is malformed');
}
