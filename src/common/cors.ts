/**
 * Cross-origin requests from browsers (CORS) to the management API: off unless
 * STATEHOUSE_CORS_ORIGINS lists the web origins allowed (a console served from elsewhere). The
 * rules are plain functions; `http-hygiene.ts` applies them to requests.
 *
 * No answer ever carries `Access-Control-Allow-Credentials`: nothing here authenticates by
 * cookie, and a browser page sends its bearer token explicitly (an allowed request header), so
 * a page from another origin never rides on credentials the browser holds. Nor is a wildcard
 * ever answered: each origin is listed.
 */

/** The methods the management API answers (preflight `Access-Control-Allow-Methods`). */
export const CORS_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE'] as const;
/** The request headers a page may send (`Access-Control-Allow-Headers`). */
export const CORS_REQUEST_HEADERS = [
  'Authorization',
  'Content-Type',
  'Content-MD5',
  'X-Request-Id',
] as const;
/** The answer headers a page may read besides the CORS-safelisted ones. */
export const CORS_EXPOSED_HEADERS = ['X-Request-Id', 'Retry-After', 'WWW-Authenticate'] as const;
/** How long a browser may cache a preflight's answer. */
export const CORS_MAX_AGE_SECONDS = 600;

/**
 * An entry of STATEHOUSE_CORS_ORIGINS as a browser's `Origin` header spells it (lower-case
 * scheme and host, no default port), or what is wrong with it.
 */
export function parseCorsOrigin(entry: string): { origin: string } | { problem: string } {
  const shape = 'must be an origin like https://console.example.com (scheme, host, optional port)';
  if (entry.includes('*')) {
    return {
      problem: `"${entry}": wildcards are not allowed (a page of any origin could call the API); list each origin`,
    };
  }
  if (entry.toLowerCase() === 'null') {
    return {
      problem: `"${entry}": the opaque origin of sandboxed pages and files cannot be allowed (any such page sends it)`,
    };
  }
  let url: URL;
  try {
    url = new URL(entry);
  } catch {
    return { problem: `"${entry}" ${shape}` };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    return { problem: `"${entry}" ${shape}: only http and https` };
  }
  if (url.username !== '' || url.password !== '' || entry.includes('?') || entry.includes('#')) {
    return { problem: `"${entry}" ${shape}: no user, query or fragment` };
  }
  if (url.pathname !== '/') {
    return { problem: `"${entry}" ${shape}: no path (a browser's Origin never has one)` };
  }
  return { origin: url.origin };
}

/** What the CORS rules make of a request. */
export type CorsAnswer =
  /** Go on to the route, with these headers on the answer (none when CORS is off). */
  | { kind: 'continue'; headers: Record<string, string> }
  /** A preflight from an allowed origin: answer 204 with these headers, now. */
  | { kind: 'preflight'; headers: Record<string, string> }
  /** A preflight from an origin not allowed: refuse it (no Access-Control-Allow-* header). */
  | { kind: 'refused'; headers: Record<string, string>; origin: string };

export interface CorsRequest {
  method: string;
  /** The `Origin` header, when sent. */
  origin: string | undefined;
  /** `Access-Control-Request-Method`, which only a preflight sends. */
  requestMethod: string | undefined;
}

/**
 * The CORS answer to a request, given the allowed origins (none: CORS is off, and nothing is
 * added — not even `Vary`). The origin is compared exactly, as the browser serialised it.
 */
export function corsAnswer(allowed: ReadonlySet<string>, req: CorsRequest): CorsAnswer {
  if (allowed.size === 0) return { kind: 'continue', headers: {} };
  const preflight =
    req.method.toUpperCase() === 'OPTIONS' &&
    req.origin !== undefined &&
    req.requestMethod !== undefined;
  const permitted = req.origin !== undefined && allowed.has(req.origin);
  if (preflight) {
    const vary = { Vary: 'Origin, Access-Control-Request-Method, Access-Control-Request-Headers' };
    if (!permitted) return { kind: 'refused', headers: vary, origin: req.origin as string };
    return {
      kind: 'preflight',
      headers: {
        ...vary,
        'Access-Control-Allow-Origin': req.origin as string,
        'Access-Control-Allow-Methods': CORS_METHODS.join(', '),
        'Access-Control-Allow-Headers': CORS_REQUEST_HEADERS.join(', '),
        'Access-Control-Max-Age': String(CORS_MAX_AGE_SECONDS),
      },
    };
  }
  if (!permitted) return { kind: 'continue', headers: { Vary: 'Origin' } };
  return {
    kind: 'continue',
    headers: {
      Vary: 'Origin',
      'Access-Control-Allow-Origin': req.origin as string,
      'Access-Control-Expose-Headers': CORS_EXPOSED_HEADERS.join(', '),
    },
  };
}
