/** Every action a principal can be allowed or denied, as one dotted enum. */
export const ACTIONS = [
  'unit.create',
  'unit.read',
  'unit.write',
  'unit.delete',
  'unit.purge',
  'unit.lock',
  'unit.force-unlock',
  'outputs.read',
  'outputs.read-sensitive',
  'version.read',
  'version.restore',
  'graph.read',
  'graph.write',
  'rbac.manage',
  'token.manage',
  'audit.read',
] as const;
export type Action = (typeof ACTIONS)[number];

/** What an action is about: a unit (and workspace), or `*` for server-wide actions. */
export interface Resource {
  unit: string;
  workspace?: string;
}
