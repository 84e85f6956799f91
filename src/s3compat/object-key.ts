import { resolveKey } from '../common/s3-keys';
import type { StateAddress } from '../state/state-types';
import { S3Error } from './s3-errors';

/** Resolves a key to a state or its lock object; a key that can name neither is refused. */
export function resolveObject(
  key: string,
  workspacePrefixes: readonly string[],
): { kind: 'state' | 'lock'; addr: StateAddress } {
  const r = resolveKey(key, workspacePrefixes);
  if (r.kind === 'invalid') throw new S3Error('InvalidArgument', `Invalid state key: ${r.reason}`);
  return { kind: r.kind, addr: r.ref };
}
