import { createHash } from 'node:crypto';
import type { Principal } from '../common/principal';

/** The sha256 of a presented secret, computed on first use and then kept (one per request). */
export type SecretDigest = () => Buffer;

/** `secret`'s digest function: every verifier that asks gets the one hash. */
export function secretDigest(secret: string): SecretDigest {
  let digest: Buffer | undefined;
  return () => (digest ??= createHash('sha256').update(secret, 'utf8').digest());
}

/**
 * One way of proving identity with a bearer secret (bootstrap token, access token, API token…).
 * `verify` answers null when the secret is not of its kind (the next verifier is asked), a
 * principal when it is valid, and throws `unauthenticated` when it is of its kind but invalid.
 */
export interface CredentialVerifier {
  /** `digest`, when given, is the secret's sha256 (`secretDigest`), shared by every verifier. */
  verify(secret: string, digest?: SecretDigest): Promise<Principal | null>;
}

/** Multi-provider token: the identity issue adds its verifiers to this list. */
export const CREDENTIAL_VERIFIERS = Symbol('CREDENTIAL_VERIFIERS');
