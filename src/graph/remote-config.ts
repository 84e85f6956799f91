import { assertWorkspace, DEFAULT_WORKSPACE, unitNameFromRawPath } from '../common/names';
import type { RemoteStateSource } from '../state/state-inspector';
import { resolveKey } from '../s3compat/s3-keys';

/** How this server is reached, for recognising its own addresses inside consumers' states. */
export interface SelfAddresses {
  /** Base URLs (scheme, host, port, optional path) this server answers on. */
  bases: readonly string[];
  buckets: readonly string[];
  workspacePrefixes: readonly string[];
}

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
    return `${u.protocol}//${u.hostname.toLowerCase()}${port}${u.pathname.replace(/\/+$/, '')}`;
  } catch {
    return undefined;
  }
}

function underSelf(url: string, self: SelfAddresses, suffix: string): string | undefined {
  const target = normaliseBase(url);
  if (!target) return undefined;
  for (const base of self.bases) {
    const b = normaliseBase(base);
    if (!b) continue;
    const root = `${b}${suffix}`;
    if (target === root || target.startsWith(`${root}/`)) return target.slice(root.length);
  }
  return undefined;
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
      if (!endpoint || underSelf(endpoint, self, '/s3') !== '') return undefined;
      if (
        typeof c.bucket !== 'string' ||
        !self.buckets.includes(c.bucket) ||
        typeof c.key !== 'string'
      )
        return undefined;
      const workspace = source.workspace ?? DEFAULT_WORKSPACE;
      const prefix = typeof c.workspace_key_prefix === 'string' ? c.workspace_key_prefix : 'env:';
      const key = workspace === DEFAULT_WORKSPACE ? c.key : `${prefix}/${workspace}/${c.key}`;
      const r = resolveKey(key, self.workspacePrefixes);
      return r.kind === 'state' ? r.ref : undefined;
    }
    if (source.backend === 'http') {
      if (typeof c.address !== 'string') return undefined;
      // The raw path, as the server would receive it (no dot-segment resolution).
      const m = /^(https?:\/\/[^/?#]+)([^?#]*)(\?[^#]*)?$/i.exec(c.address);
      if (!m) return undefined;
      const marker = m[2].indexOf('/v1/backend/');
      if (marker < 0 || underSelf(m[1] + m[2].slice(0, marker), self, '') !== '') return undefined;
      const params = new URLSearchParams(m[3]?.slice(1) ?? '');
      return {
        unit: unitNameFromRawPath(m[2].slice(marker + '/v1/backend/'.length)),
        workspace: assertWorkspace(params.get('workspace') ?? undefined),
      };
    }
  } catch {
    return undefined; // a name that is not a valid unit here is not ours
  }
  return undefined;
}
