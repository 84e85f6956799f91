import { createHash } from 'node:crypto';
import { DomainError } from '../common/errors';
import type { VersionRow } from './state.repository';
import { versionView, VersionView } from './state.views';

/**
 * What an outputs-only reader is served of a version: a v4 state of its outputs and no
 * resources; the view's size and hashes describe exactly these bytes.
 */
export function outputsOnlyState(
  version: VersionRow,
  sensitive: boolean,
): { view: VersionView; bytes: Buffer } {
  if (version.encrypted) {
    throw new DomainError(
      'forbidden',
      'this state is client-side encrypted: its outputs cannot be served to an outputs-only reader',
    );
  }
  const bytes = Buffer.from(
    JSON.stringify(
      {
        version: 4,
        terraform_version: version.terraform_version ?? '1.0.0',
        serial: Number(version.serial),
        lineage: version.lineage,
        outputs: visibleOutputs(version.outputs, sensitive),
        resources: [],
        check_results: null,
      },
      null,
      2,
    ) + '\n',
  );
  return {
    bytes,
    view: {
      ...versionView(version),
      size: bytes.length,
      md5: createHash('md5').update(bytes).digest('hex'),
      sha256: createHash('sha256').update(bytes).digest('hex'),
    },
  };
}

/** The outputs a reader may see: sensitive ones only with `outputs.read-sensitive`. */
export function visibleOutputs(
  outputs: Record<string, unknown> | null,
  sensitive: boolean,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(outputs ?? {})) {
    if (!sensitive && (value as { sensitive?: unknown } | null)?.sensitive === true) continue;
    out[name] = value;
  }
  return out;
}
