/** The credentials whose verifications are counted (for /metrics). */
export type VerifiedCredential = 'access_token' | 'session_token' | 'api_token';

/**
 * How a presented credential was verified: `verified` (the full check: an Ed25519 signature and
 * the claims, or an API token's row looked up by its hash), `reused` (a JWT's kept verdict, only
 * the time checks run again), `refused`. One request that authenticates costs one of these.
 */
export type VerificationResult = 'verified' | 'reused' | 'refused';

const results = (): Record<VerificationResult, number> => ({ verified: 0, reused: 0, refused: 0 });

/** Verifications since the process started: plain counters, read at scrape time. */
export const tokenVerifications: Record<VerifiedCredential, Record<VerificationResult, number>> = {
  access_token: results(),
  session_token: results(),
  api_token: results(),
};
