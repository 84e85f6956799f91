import type { CredentialParent, ParentKind } from '../../common/principal';

/**
 * How a credential's parent (`CredentialParent`, in src/common/principal.ts) is written in the
 * signed `parent` claim of access tokens and S3 session tokens:
 *
 *   parent = "api_token:<uuid>" | "refresh_family:<uuid>"
 */
const PARENT =
  /^(api_token|refresh_family):([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/;

export function formatParent(parent: CredentialParent): string {
  return `${parent.kind}:${parent.id}`;
}

/** The parent named by a claim value; undefined when it is absent or not one of ours. */
export function parseParent(value: unknown): CredentialParent | undefined {
  if (typeof value !== 'string') return undefined;
  const m = PARENT.exec(value);
  return m ? { kind: m[1] as ParentKind, id: m[2] } : undefined;
}

/** Seconds since the epoch. */
export const epochSeconds = (ms: number = Date.now()): number => Math.floor(ms / 1000);

/**
 * When a credential minted now with `ttlSeconds` must expire: its own lifetime, but never
 * later than the end of what it derives from (`notAfter`, epoch seconds, when it has one).
 */
export function derivedExpiry(nowSeconds: number, ttlSeconds: number, notAfter?: number): number {
  const own = nowSeconds + ttlSeconds;
  return notAfter === undefined ? own : Math.min(own, notAfter);
}
