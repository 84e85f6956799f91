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
}

export const BOOTSTRAP_ADMIN = 'bootstrap-admin';

/** Every caller when STATEHOUSE_AUTH_DISABLE is set (development only). */
export const ANONYMOUS_ADMIN = 'anonymous';

/** The request property where the guard leaves the principal. */
export const PRINCIPAL_KEY = 'principal';
