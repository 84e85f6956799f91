import { assertWorkspace, DEFAULT_WORKSPACE, unitNameFromRawPath } from '../common/names';
import { trimEnd } from '../common/trim';
import type { RemoteStateSource } from '../state/state-inspector';
import { resolveKey } from '../common/s3-keys';
import { unitOfWorkspace } from '../common/tfe-workspace-names';

/** How this server is reached, for recognising its own addresses inside consumers' states. */
export interface SelfAddresses {
  /** Base URLs (scheme, host, port, optional path) this server answers on. */
  bases: readonly string[];
  /** The port of the S3 door's own listener (STATEHOUSE_S3_PORT), when there is one. */
  s3Port?: number;
  buckets: readonly string[];
  workspacePrefixes: readonly string[];
}

/**
 * Longer addresses are not this server's (a unit name is at most 256 characters, so its path at
 * most three times that encoded, plus a base URL): they are passed over before any parsing.
 */
const MAX_ADDRESS_LENGTH = 8192;

export interface StateRef {
  unit: string;
  workspace: string;
}

/** `http://h:1/x/` → `http://h:1/x` with the default port removed, for comparisons. */
export function normaliseBase(url: string): string | undefined {
  try {
    const u = new URL(url);
    const port =
      u.port === '' ||
      (u.protocol === 'http:' && u.port === '80') ||
      (u.protocol === 'https:' && u.port === '443')
        ? ''
        : `:${u.port}`;
    return `${u.protocol}//${u.hostname.toLowerCase()}${port}${trimEnd(u.pathname, '/')}`;
  } catch {
    return undefined;
  }
}

/**
 * Where S3 clients reach the S3 door of a server answering on `bases`: each base with `/s3`,
 * and — with STATEHOUSE_S3_PORT — the root of that listener at each base's scheme and host.
 */
export function s3EndpointsOf(bases: readonly string[], s3Port: number | undefined): string[] {
  const endpoints = bases.map((b) => `${trimEnd(b, '/')}/s3`);
  if (s3Port !== undefined) {
    for (const b of bases) {
      try {
        const u = new URL(b);
        endpoints.push(`${u.protocol}//${u.hostname}:${s3Port}`);
      } catch {
        // not a URL: not an address of this server
      }
    }
  }
  return [...new Set(endpoints)];
}

/** Whether `url` is one of `bases` (compared normalised). */
function isOneOf(url: string, bases: readonly string[]): boolean {
  const target = normaliseBase(url);
  return target !== undefined && bases.some((b) => normaliseBase(b) === target);
}

/**
 * The state of this server that a `terraform_remote_state` data source read, or undefined when
 * it read somewhere else (another server, a local file, a malformed config). Only the address
 * parts of the config are looked at; credentials are never copied anywhere.
 */
export function resolveRemoteState(
  source: RemoteStateSource,
  self: SelfAddresses,
): StateRef | undefined {
  try {
    const c = source.config;
    if (source.backend === 's3') {
      const endpoints = c.endpoints as Record<string, unknown> | undefined;
      const endpoint =
        typeof endpoints?.s3 === 'string'
          ? endpoints.s3
          : typeof c.endpoint === 'string'
            ? c.endpoint
            : undefined;
      if (!endpoint || endpoint.length > MAX_ADDRESS_LENGTH) return undefined;
      if (!isOneOf(endpoint, s3EndpointsOf(self.bases, self.s3Port))) return undefined;
      if (
        typeof c.bucket !== 'string' ||
        !self.buckets.includes(c.bucket) ||
        typeof c.key !== 'string' ||
        c.key.length > MAX_ADDRESS_LENGTH
      )
        return undefined;
      const workspace = source.workspace ?? DEFAULT_WORKSPACE;
      const prefix = typeof c.workspace_key_prefix === 'string' ? c.workspace_key_prefix : 'env:';
      const key = workspace === DEFAULT_WORKSPACE ? c.key : `${prefix}/${workspace}/${c.key}`;
      const r = resolveKey(key, self.workspacePrefixes);
      return r.kind === 'state' ? r.ref : undefined;
    }
    if (source.backend === 'http') {
      if (typeof c.address !== 'string' || c.address.length > MAX_ADDRESS_LENGTH) return undefined;
      const a = splitHttpAddress(c.address);
      if (!a) return undefined;
      const marker = a.path.indexOf('/v1/backend/');
      if (marker < 0 || !isOneOf(a.origin + a.path.slice(0, marker), self.bases)) return undefined;
      const params = new URLSearchParams(a.query);
      return {
        unit: unitNameFromRawPath(a.path.slice(marker + '/v1/backend/'.length)),
        workspace: assertWorkspace(params.get('workspace') ?? undefined),
      };
    }
    if (source.backend === 'remote') {
      // The TFE door: `hostname` (Terraform's default is HCP Terraform's, never this server),
      // `organization`, and `workspaces.name` — or `workspaces.prefix` plus the data source's
      // `workspace` — name the unit `<organization>/<workspace>`, its default workspace.
      if (typeof c.hostname !== 'string' || c.hostname.length > MAX_ADDRESS_LENGTH)
        return undefined;
      if (!isOneOf(`https://${c.hostname}`, self.bases)) return undefined;
      const ws = c.workspaces as Record<string, unknown> | undefined;
      if (typeof c.organization !== 'string') return undefined;
      const name =
        typeof ws?.name === 'string'
          ? ws.name
          : typeof ws?.prefix === 'string'
            ? `${ws.prefix}${source.workspace ?? DEFAULT_WORKSPACE}`
            : undefined;
      if (name === undefined) return undefined;
      return { unit: unitOfWorkspace(c.organization, name), workspace: DEFAULT_WORKSPACE };
    }
  } catch {
    return undefined; // a name that is not a valid unit here is not ours
  }
  return undefined;
}

/**
 * An `http(s)://authority/path?query` address split into its origin, its raw path as the server
 * would receive it (no dot-segment resolution) and its query (without `?`); undefined for any
 * other shape (another scheme, no authority, a fragment). By position, one pass: a regular
 * expression for this (`^(https?:\/\/[^/?#]+)([^?#]*)…$`) backtracks over every way to split the
 * authority from the path, and took 3.3 s for a 40,000-character address.
 */
export function splitHttpAddress(
  address: string,
): { origin: string; path: string; query: string } | undefined {
  if (address.includes('#')) return undefined;
  const head = address.slice(0, 8).toLowerCase();
  const schemeEnd = head.startsWith('http://') ? 7 : head.startsWith('https://') ? 8 : -1;
  if (schemeEnd < 0) return undefined;
  let authorityEnd = schemeEnd;
  while (
    authorityEnd < address.length &&
    address[authorityEnd] !== '/' &&
    address[authorityEnd] !== '?'
  )
    authorityEnd++;
  if (authorityEnd === schemeEnd) return undefined;
  const q = address.indexOf('?', authorityEnd);
  return {
    origin: address.slice(0, authorityEnd),
    path: address.slice(authorityEnd, q < 0 ? address.length : q),
    query: q < 0 ? '' : address.slice(q + 1),
  };
}
