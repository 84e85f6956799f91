import type { Principal } from '../common/principal';

/**
 * One way of proving identity with a bearer secret (bootstrap token, access token, API token…).
 * `verify` answers null when the secret is not of its kind (the next verifier is asked), a
 * principal when it is valid, and throws `unauthenticated` when it is of its kind but invalid.
 */
export interface CredentialVerifier {
  verify(secret: string): Promise<Principal | null>;
}

/** Multi-provider token: the identity issue adds its verifiers to this list. */
export const CREDENTIAL_VERIFIERS = Symbol('CREDENTIAL_VERIFIERS');
