/**
 * How the TFE door names things (pure): organization `acme` with workspace `network` is the unit
 * `acme/network`, its `default` workspace. Workspace ids carry the unit's id, state version ids
 * the unit's id and the version number, so every id is stable and holds no `/`.
 */
import { DomainError } from '../common/errors';

export {
  assertOrganization,
  MAX_ORGANIZATION_LENGTH,
  MAX_WORKSPACE_NAME_LENGTH,
  unitOfWorkspace,
} from '../common/tfe-workspace-names';

const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';
const WORKSPACE_ID = new RegExp(`^ws-(${UUID})$`);
const VERSION_ID = new RegExp(`^sv-(${UUID})-(\\d{1,9})$`);
const UPLOAD_ID = /^svu-[0-9a-f]{32}$/;

/** Organization and workspace of a unit this door serves, or undefined (one or 3+ segments). */
export function workspaceOfUnit(unit: string): { organization: string; name: string } | undefined {
  const parts = unit.split('/');
  if (parts.length !== 2) return undefined;
  return { organization: parts[0], name: parts[1] };
}

export const workspaceId = (unitId: string): string => `ws-${unitId}`;

export function unitIdOfWorkspaceId(id: string): string | undefined {
  return WORKSPACE_ID.exec(id)?.[1];
}

export const stateVersionId = (unitId: string, version: number): string =>
  `sv-${unitId}-${version}`;

export type StateVersionRef =
  { kind: 'version'; unitId: string; version: number } | { kind: 'upload'; id: string };

export function parseStateVersionId(id: string): StateVersionRef | undefined {
  const v = VERSION_ID.exec(id);
  if (v) return { kind: 'version', unitId: v[1], version: Number(v[2]) };
  if (UPLOAD_ID.test(id)) return { kind: 'upload', id };
  return undefined;
}

/** A key-only tag: what Terraform's `tags = [...]` and `workspace new` send. */
export function assertTagName(tag: unknown): string {
  if (typeof tag !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9:_.-]{0,254}$/.test(tag)) {
    throw new DomainError(
      'invalid_name',
      `tag ${JSON.stringify(String(tag).slice(0, 100))}: tags are 1-255 letters, digits, ":", "_", "." and "-", starting with a letter or digit`,
    );
  }
  return tag;
}

/** At most this many key-only tags on one workspace. */
export const MAX_TAGS = 100;

/** A workspace's tags: each checked, without repeats, sorted; at most {@link MAX_TAGS}. */
export function tagSet(tags: readonly unknown[]): string[] {
  const set = [...new Set(tags.map(assertTagName))].sort();
  if (set.length > MAX_TAGS) {
    throw new DomainError('invalid_request', `a workspace has at most ${MAX_TAGS} tags`);
  }
  return set;
}

const OUTPUT_ID = new RegExp(`^wsout-(${UUID})-(\\d{1,9})-((?:[0-9a-f]{2}){1,256})$`);

/** A state version output's id: the version's, and the output's name (hex). */
export const outputId = (unitId: string, version: number, name: string): string =>
  `wsout-${unitId}-${version}-${Buffer.from(name, 'utf8').toString('hex')}`;

export function parseOutputId(
  id: string,
): { unitId: string; version: number; name: string } | undefined {
  const m = OUTPUT_ID.exec(id);
  if (!m) return undefined;
  return { unitId: m[1], version: Number(m[2]), name: Buffer.from(m[3], 'hex').toString('utf8') };
}
