/**
 * The credential a derived credential was minted from. Every access token names its login
 * session (refresh-token family) and every S3 session token names the API token or login
 * session behind the caller that minted it: revoking that parent (revoking the API token,
 * logging out) revokes everything derived from it. How a parent is written in a signed claim
 * is the auth module's (`src/auth/revocation/credential-parent.ts`).
 */
export type ParentKind = 'api_token' | 'refresh_family';

export interface CredentialParent {
  kind: ParentKind;
  id: string;
}

/** Who is calling. Every request that reaches a controller has one. */
export interface Principal {
  /** Stable identifier used for lock ownership, audit and RBAC (`bootstrap-admin`, `user:…`, `svc:…`). */
  subject: string;
  /** `bootstrap`: the break-glass admin (or, with auth disabled, the anonymous admin). */
  kind: 'bootstrap' | 'user' | 'service';
  /** How the caller proved it (for audit). */
  via: 'bootstrap-token' | 'auth-disabled' | 'access-token' | 'api-token' | 's3-signature';
  email?: string;
  groups?: string[];
  /**
   * What credentials minted for this caller (S3 credentials) derive from, and the latest moment
   * they may stay valid (epoch seconds: the end of the API token or login session, or of the
   * groups and email they would carry). Absent for bootstrap-admin, which mints nothing, and for
   * callers that cannot mint (S3 signatures).
   */
  credential?: { parent: CredentialParent; notAfter?: number };
}

export const BOOTSTRAP_ADMIN = 'bootstrap-admin';

/** Every caller when STATEHOUSE_AUTH_DISABLE is set (development only). */
export const ANONYMOUS_ADMIN = 'anonymous';

/** The request property where the guard leaves the principal. */
export const PRINCIPAL_KEY = 'principal';
