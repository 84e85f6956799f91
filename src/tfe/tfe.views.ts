/**
 * The TFE door's resource objects, shaped as go-tfe v1.70 reads them (types, attribute names,
 * `Z` times). Pure functions of what the services found.
 */
import type { Principal } from '../common/principal';
import type { VersionView } from '../state/state.views';
import { ResourceObject, tfeTime } from './jsonapi';
import { stateVersionId, workspaceId } from './tfe-names';
import type { TfeProjectRow, TfeUploadRow } from './tfe.repository';
import type { TfeWorkspace } from './tfe-workspaces.service';

export function organizationResource(name: string, createdAt: Date): ResourceObject {
  return {
    id: name,
    type: 'organizations',
    attributes: {
      name,
      'external-id': name,
      email: '',
      'created-at': tfeTime(createdAt),
      'collaborator-auth-policy': 'password',
      'cost-estimation-enabled': false,
      'default-execution-mode': 'local',
      'saml-enabled': false,
      'two-factor-conformant': false,
      permissions: {
        'can-create-workspace': true,
        'can-update': false,
        'can-destroy': false,
        'can-manage-run-tasks': false,
      },
    },
  };
}

/** `operations: false`: Terraform then runs plans and applies locally (forceLocal). */
export function entitlementResource(organization: string): ResourceObject {
  return {
    id: organization,
    type: 'entitlement-sets',
    attributes: {
      operations: false,
      'state-storage': true,
      'private-module-registry': false,
      'private-run-tasks': false,
      sentinel: false,
      teams: false,
      'vcs-integrations': false,
      agents: false,
      'audit-logging': false,
      'cost-estimation': false,
      sso: false,
      'configuration-designer': false,
      'global-run-tasks': false,
      'module-tests-generation': false,
      'run-tasks': false,
      'self-serve-billing': false,
      'usage-reporting': false,
      'user-limit': null,
    },
  };
}

export function userResource(principal: Principal): ResourceObject {
  return {
    id: encodeURIComponent(principal.subject),
    type: 'users',
    attributes: {
      username: principal.subject,
      email: principal.email ?? '',
      'is-service-account': principal.kind === 'service',
      'two-factor': { enabled: false, verified: false },
      'avatar-url': '',
      permissions: { 'can-create-organizations': false, 'can-change-email': false },
    },
  };
}

export function projectResource(p: TfeProjectRow): ResourceObject {
  return {
    id: p.id,
    type: 'projects',
    attributes: { name: p.name, 'created-at': tfeTime(p.created_at), description: '' },
    relationships: { organization: { data: { id: p.organization, type: 'organizations' } } },
  };
}

export function workspaceResource(ws: TfeWorkspace): ResourceObject {
  const may = (action: Parameters<TfeWorkspace['may']['explain']>[0]) =>
    ws.may.explain(action, ws.addr).allowed;
  const updated = ws.current
    ? new Date(
        Math.max(Date.parse(ws.current.createdAt), ws.attrs ? +new Date(ws.attrs.updated_at) : 0),
      )
    : (ws.attrs?.updated_at ?? ws.unit.created_at);
  const relationships: ResourceObject['relationships'] = {
    organization: { data: { id: ws.organization, type: 'organizations' } },
  };
  if (ws.attrs?.project_id) {
    relationships.project = { data: { id: ws.attrs.project_id, type: 'projects' } };
  }
  if (ws.current) {
    relationships['current-state-version'] = {
      data: { id: stateVersionId(ws.unit.id, ws.current.version), type: 'state-versions' },
    };
  }
  return {
    id: workspaceId(ws.unit.id),
    type: 'workspaces',
    attributes: {
      name: ws.name,
      'created-at': tfeTime(ws.unit.created_at),
      'updated-at': tfeTime(updated),
      'execution-mode': 'local',
      operations: false,
      'terraform-version': ws.attrs?.terraform_version ?? 'latest',
      'tag-names': ws.attrs?.tag_names ?? [],
      locked: ws.lock !== null,
      'auto-apply': false,
      'allow-destroy-plan': true,
      description: '',
      environment: 'default',
      'file-triggers-enabled': false,
      'global-remote-state': false,
      'queue-all-runs': false,
      'resource-count': 0,
      source: 'statehouse',
      'speculative-enabled': false,
      'structured-run-output-enabled': false,
      'working-directory': '',
      'setting-overwrites': { 'execution-mode': false, 'agent-pool': false },
      actions: { 'is-destroyable': may('unit.delete') },
      permissions: {
        'can-update': may('unit.write'),
        'can-destroy': may('unit.delete'),
        // Present, so Terraform deletes with safe-delete unless told -force.
        'can-force-delete': may('unit.delete'),
        'can-lock': may('unit.lock'),
        'can-unlock': may('unit.lock'),
        'can-force-unlock': may('unit.force-unlock'),
        'can-read-state-versions': may('unit.read') || may('outputs.read'),
        'can-create-state-versions': may('unit.write'),
        'can-read-settings': true,
        'can-update-variable': false,
        'can-queue-run': false,
        'can-queue-apply': false,
        'can-queue-destroy': false,
      },
    },
    relationships,
    links: { self: `/api/v2/organizations/${ws.organization}/workspaces/${ws.name}` },
  };
}

export interface StateVersionUrls {
  download?: string;
  upload?: string;
  jsonUpload?: string;
}

export function pendingStateVersionResource(
  row: Pick<TfeUploadRow, 'id' | 'serial' | 'created_at'>,
  urls: StateVersionUrls,
): ResourceObject {
  return {
    id: row.id,
    type: 'state-versions',
    attributes: {
      'created-at': tfeTime(row.created_at),
      serial: Number(row.serial),
      status: 'pending',
      'hosted-state-upload-url': urls.upload ?? null,
      'hosted-json-state-upload-url': urls.jsonUpload ?? null,
      'hosted-state-download-url': null,
      'hosted-json-state-download-url': null,
      'resources-processed': false,
    },
  };
}

export function stateVersionResource(
  unitId: string,
  view: VersionView,
  downloadUrl: string,
  outputIds: string[] = [],
): ResourceObject {
  return {
    id: stateVersionId(unitId, view.version),
    type: 'state-versions',
    attributes: {
      'created-at': tfeTime(view.createdAt),
      serial: view.serial ?? 0,
      status: 'finalized',
      'state-version': 4,
      'terraform-version': view.terraformVersion ?? '',
      lineage: view.lineage ?? '',
      'hosted-state-download-url': downloadUrl,
      'hosted-json-state-download-url': null,
      'resources-processed': true,
      size: view.size,
      md5: view.md5,
    },
    relationships: {
      outputs: { data: outputIds.map((id) => ({ id, type: 'state-version-outputs' })) },
    },
  };
}

/** The old-style `type` of an output, from its cty type (what `detailed-type` carries). */
export function legacyOutputType(ctyType: unknown): string {
  if (typeof ctyType === 'string') return ctyType === 'dynamic' ? 'string' : ctyType;
  if (Array.isArray(ctyType)) {
    const kind: unknown = (ctyType as unknown[])[0];
    if (kind === 'list' || kind === 'tuple' || kind === 'set') return 'array';
    if (kind === 'map' || kind === 'object') return 'object';
  }
  return 'string';
}

export function outputResource(
  id: string,
  name: string,
  output: { value?: unknown; type?: unknown; sensitive?: unknown },
  withValue: boolean,
): ResourceObject {
  const sensitive = output.sensitive === true;
  const attributes: Record<string, unknown> = {
    name,
    sensitive,
    type: legacyOutputType(output.type),
    value: sensitive && !withValue ? null : (output.value ?? null),
  };
  if (output.type !== undefined) attributes['detailed-type'] = output.type;
  return { id, type: 'state-version-outputs', attributes };
}
