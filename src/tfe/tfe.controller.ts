import {
  All,
  Controller,
  Delete,
  Get,
  HttpCode,
  Param,
  Patch,
  Post,
  Put,
  Req,
  Res,
  UseFilters,
} from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { RawBody } from '../common/body-parsing';
import { textProblem } from '../common/text';
import { DomainError } from '../common/errors';
import { DEFAULT_WORKSPACE } from '../common/names';
import type { Principal } from '../common/principal';
import { declaredLength, readSmallBody } from '../common/raw-body';
import { ThroughDoor } from '../common/request-context';
import { CurrentPrincipal, Public, SelfAuthenticated } from '../common/route-auth';
import { sendState } from '../state/state-response';
import { StateReader } from '../state/state-reader';
import { StateRepository } from '../state/state.repository';
import {
  isObject,
  JSONAPI_MEDIA_TYPE,
  pageRequest,
  paged,
  readDocument,
  RequestData,
  ResourceObject,
  stringAttribute,
} from './jsonapi';
import {
  outputId,
  parseOutputId,
  parseStateVersionId,
  stateVersionId,
  workspaceId,
} from './tfe-names';
import { TfeExceptionFilter } from './tfe-exception.filter';
import { TfeStateVersionsService, TfeStateVersion } from './tfe-state-versions.service';
import { TfeWorkspace, TfeWorkspacesService, WorkspaceInput } from './tfe-workspaces.service';
import {
  entitlementResource,
  organizationResource,
  outputResource,
  pendingStateVersionResource,
  projectResource,
  stateVersionResource,
  userResource,
  workspaceResource,
} from './tfe.views';

const MAX_DOCUMENT_BYTES = 1024 * 1024;

/** The two ways to name a workspace: organization and name, or id. */
const BY_NAME_OR_ID = ['organizations/:org/workspaces/:name', 'workspaces/:id'];

/** A JSON:API answer. */
function answer(res: Response, status: number, doc: unknown): void {
  res.status(status).type(JSONAPI_MEDIA_TYPE).send(JSON.stringify(doc));
}

async function documentOf(req: Request, type?: string): Promise<RequestData> {
  const contentType = (req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
  if (
    contentType !== '' &&
    contentType !== JSONAPI_MEDIA_TYPE &&
    contentType !== 'application/json'
  ) {
    req.resume();
    throw new DomainError(
      'invalid_request',
      `Content-Type must be ${JSONAPI_MEDIA_TYPE}, not ${contentType.slice(0, 100)}`,
    );
  }
  return readDocument(await readSmallBody(req, MAX_DOCUMENT_BYTES), type);
}

/** The query of a request as sent (`search[name]` and the like are plain keys). */
function queryOf(req: Request): URLSearchParams {
  const q = req.originalUrl.indexOf('?');
  return new URLSearchParams(q < 0 ? '' : req.originalUrl.slice(q + 1));
}

function workspaceInput(data: RequestData): WorkspaceInput {
  const a = data.attributes;
  const tags = a['tag-names'];
  if (tags !== undefined && tags !== null && !Array.isArray(tags)) {
    throw new DomainError('invalid_request', '"tag-names" must be a list');
  }
  const tagRelations = relationshipList(data.relationships, 'tags').map((t) => {
    const attrs = isObject(t) && isObject(t.attributes) ? t.attributes : {};
    return attrs.name;
  });
  const project = data.relationships.project;
  const projectData = isObject(project) && isObject(project.data) ? project.data : undefined;
  const projectId = projectData ? stringAttribute(projectData, 'id', 200) : undefined;
  const allTags = [...((tags as unknown[] | undefined | null) ?? []), ...tagRelations];
  return {
    name: stringAttribute(a, 'name', 200),
    terraformVersion: stringAttribute(a, 'terraform-version', 200),
    executionMode: stringAttribute(a, 'execution-mode', 200),
    tagNames: allTags.length > 0 ? (allTags as string[]) : undefined,
    projectId,
  };
}

function relationshipList(relationships: Record<string, unknown>, name: string): unknown[] {
  const rel = relationships[name];
  if (rel === undefined || rel === null) return [];
  const data = isObject(rel) ? rel.data : undefined;
  if (!Array.isArray(data)) {
    throw new DomainError('invalid_request', `"relationships.${name}.data" must be a list`);
  }
  if (data.length > 100) throw new DomainError('invalid_request', `at most 100 ${name} at once`);
  return data;
}

/**
 * The TFE door (`/api/v2`): what Terraform's `cloud {}` block, `backend "remote"` and
 * `terraform_remote_state { backend = "remote" }` call in local execution — organizations,
 * workspaces (units `org/name`), their locks, state versions and outputs. Documented in the
 * README ("The TFE door"), not in Swagger: it is go-tfe's contract, not ours.
 */
@ApiExcludeController()
@ThroughDoor('tfe')
@RawBody()
@UseFilters(TfeExceptionFilter)
@Controller('api/v2')
export class TfeController {
  constructor(
    private readonly workspaces: TfeWorkspacesService,
    private readonly versions: TfeStateVersionsService,
    private readonly reader: StateReader,
    private readonly states: StateRepository,
  ) {}

  /** Terraform reads only the headers (`TFP-API-Version`); it sends its token, not needed here. */
  @Public()
  @Get('ping')
  @HttpCode(204)
  ping(): void {}

  @Get('account/details')
  account(@Res() res: Response, @CurrentPrincipal() p: Principal): void {
    answer(res, 200, { data: userResource(p) });
  }

  /** The organization (`organizations/:org`) or its entitlements (`…/entitlement-set`). */
  @Get(['organizations/:org', 'organizations/:org/entitlement-set'])
  async organization(
    @Param('org') org: string,
    @Req() req: Request,
    @Res() res: Response,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    await this.workspaces.assertOrganization(p, org);
    const entitlements = req.path.toLowerCase().endsWith('/entitlement-set');
    answer(res, 200, {
      data: entitlements ? entitlementResource(org) : organizationResource(org, new Date(0)),
    });
  }

  /** The organization's workspaces (`workspaces`) or projects (`projects`), paged. */
  @Get(['organizations/:org/workspaces', 'organizations/:org/projects'])
  async list(
    @Param('org') org: string,
    @Req() req: Request,
    @Res() res: Response,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    const q = queryOf(req);
    const page = pageRequest(Object.fromEntries(q));
    await this.workspaces.assertOrganization(p, org);
    if (req.path.toLowerCase().endsWith('/projects')) {
      const names = q.get('filter[names]');
      const found = await this.workspaces.listProjects(
        p,
        org,
        names === null ? undefined : names.split(','),
      );
      const { items, meta } = paged(found, page);
      answer(res, 200, { data: items.map(projectResource), meta });
      return;
    }
    const tags = q.get('search[tags]');
    const found = await this.workspaces.list(p, org, {
      name: q.get('search[name]') ?? undefined,
      tags: tags
        ? tags
            .split(',')
            .map((t) => t.trim())
            .filter((t) => t !== '')
        : undefined,
      projectId: q.get('filter[project][id]') ?? undefined,
    });
    const { items, meta } = paged(found, page);
    const shown = await this.workspaces.describeAll(p, items);
    answer(res, 200, { data: shown.map(workspaceResource), meta });
  }

  /** Creates a workspace (`workspaces`) or a project (`projects`) of an organization. */
  @Post(['organizations/:org/workspaces', 'organizations/:org/projects'])
  async create(
    @Param('org') org: string,
    @Req() req: Request,
    @Res() res: Response,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    const project = req.path.toLowerCase().endsWith('/projects');
    const data = await documentOf(req, project ? 'projects' : 'workspaces');
    const input = workspaceInput(data);
    if (input.name === undefined) {
      throw new DomainError(
        'invalid_name',
        `a ${project ? 'project' : 'workspace'} needs a "name"`,
      );
    }
    // Creating needs unit.create on what is created (a 403 otherwise), not a visible organization.
    const created = project
      ? projectResource(await this.workspaces.createProject(p, org, input.name))
      : workspaceResource(await this.workspaces.create(p, org, { ...input, name: input.name }));
    answer(res, 201, { data: created });
  }

  /** A workspace by organization and name, or by id. */
  private target(p: Principal, params: Record<string, string>): Promise<TfeWorkspace> {
    return params.org !== undefined
      ? this.workspaces.byName(p, params.org, params.name)
      : this.workspaces.byId(p, params.id);
  }

  @Get(BY_NAME_OR_ID)
  async show(
    @Param() params: Record<string, string>,
    @Res() res: Response,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    answer(res, 200, { data: workspaceResource(await this.target(p, params)) });
  }

  @Patch(BY_NAME_OR_ID)
  async update(
    @Param() params: Record<string, string>,
    @Req() req: Request,
    @Res() res: Response,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    const input = workspaceInput(await documentOf(req, 'workspaces'));
    const ws = await this.target(p, params);
    answer(res, 200, { data: workspaceResource(await this.workspaces.update(p, ws, input)) });
  }

  @Delete(BY_NAME_OR_ID)
  @HttpCode(204)
  async delete(
    @Param() params: Record<string, string>,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    await this.workspaces.delete(p, await this.target(p, params), false);
  }

  /** `actions/lock`, `unlock`, `force-unlock` and `safe-delete`. */
  @Post(BY_NAME_OR_ID.map((path) => `${path}/actions/:action`))
  async action(
    @Param() params: Record<string, string>,
    @Req() req: Request,
    @Res() res: Response,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    const body = await readSmallBody(req, MAX_DOCUMENT_BYTES);
    const ws = await this.target(p, params);
    switch (params.action) {
      case 'safe-delete':
        await this.workspaces.delete(p, ws, true);
        res.status(204).end();
        return;
      case 'lock':
        await this.workspaces.lock(p, ws, readLockReason(body));
        break;
      case 'unlock':
        await this.workspaces.unlock(p, ws);
        break;
      case 'force-unlock':
        await this.workspaces.forceUnlock(p, ws);
        break;
      default:
        throw new DomainError(
          'not_found',
          `there is no workspace action ${params.action.slice(0, 40)}`,
        );
    }
    answer(res, 200, {
      data: workspaceResource(await this.workspaces.byId(p, workspaceId(ws.unit.id))),
    });
  }

  @Get('workspaces/:id/relationships/tags')
  async tags(
    @Param('id') id: string,
    @Res() res: Response,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    const ws = await this.workspaces.byId(p, id);
    const tags = ws.attrs?.tag_names ?? [];
    answer(res, 200, {
      data: tags.map((t) => ({ id: t, type: 'tags', attributes: { name: t } })),
    });
  }

  /** POST adds key-only tags, DELETE removes them. */
  @Post('workspaces/:id/relationships/tags')
  @HttpCode(204)
  addTags(
    @Param('id') id: string,
    @Req() req: Request,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    return this.changeTags(p, id, req, 'add');
  }

  @Delete('workspaces/:id/relationships/tags')
  @HttpCode(204)
  removeTags(
    @Param('id') id: string,
    @Req() req: Request,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    return this.changeTags(p, id, req, 'remove');
  }

  private async changeTags(p: Principal, id: string, req: Request, how: 'add' | 'remove') {
    const tags = await tagNamesOf(req);
    const ws = await this.workspaces.byId(p, id);
    if (how === 'add') await this.workspaces.addTags(p, ws, tags);
    else await this.workspaces.removeTags(p, ws, tags);
  }

  @Get('projects/:id')
  async project(
    @Param('id') id: string,
    @Res() res: Response,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    answer(res, 200, { data: projectResource(await this.workspaces.project(p, id)) });
  }

  @Post('workspaces/:id/state-versions')
  async createStateVersion(
    @Param('id') id: string,
    @Req() req: Request,
    @Res() res: Response,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    const data = await documentOf(req, 'state-versions');
    const a = data.attributes;
    const serial = a.serial;
    if (typeof serial !== 'number' || !Number.isSafeInteger(serial) || serial < 0) {
      throw new DomainError('invalid_name', '"serial" must be a whole number of at least 0');
    }
    const md5 = stringAttribute(a, 'md5', 64);
    if (md5 === undefined || !/^[0-9a-f]{32}$/i.test(md5)) {
      throw new DomainError('invalid_name', '"md5" must be the hex MD5 of the state (32 digits)');
    }
    const lineage = stringAttribute(a, 'lineage', 200);
    if (a.state !== undefined && a.state !== null) {
      throw new DomainError(
        'invalid_request',
        'inline "state" is not taken here: upload the state to the hosted-state-upload-url this create answers',
      );
    }
    const ws = await this.workspaces.byId(p, id);
    const announced = await this.versions.announce(p, ws, {
      serial,
      md5: md5.toLowerCase(),
      lineage: lineage === '' ? undefined : lineage,
    });
    const upload = this.versions.publicUrl(
      `/api/v2/state-versions/${announced.id}/upload?capability=${announced.capability}`,
    );
    const jsonUpload = this.versions.publicUrl(
      `/api/v2/state-versions/${announced.id}/upload/json?capability=${announced.capability}`,
    );
    answer(res, 201, {
      data: pendingStateVersionResource(
        { id: announced.id, serial: String(serial), created_at: announced.createdAt },
        { upload, jsonUpload },
      ),
    });
  }

  /** The raw state, sent without credentials: the capability in the URL is the credential. */
  @SelfAuthenticated()
  @Put('state-versions/:id/upload')
  async upload(@Param('id') id: string, @Req() req: Request, @Res() res: Response): Promise<void> {
    const capability = queryOf(req).get('capability') ?? '';
    await this.versions.upload(id, capability, req, declaredLength(req.headers['content-length']));
    res.status(200).end();
  }

  /** The JSON state (`terraform show -json`): accepted and not kept — nothing here reads it. */
  @Public()
  @Put('state-versions/:id/upload/json')
  uploadJson(@Req() req: Request, @Res() res: Response): void {
    req.resume();
    res.status(200).end();
  }

  @Get('workspaces/:id/current-state-version')
  async current(
    @Param('id') id: string,
    @Res() res: Response,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    const ws = await this.workspaces.byId(p, id);
    if (!ws.current) throw new DomainError('not_found', `workspace ${ws.name} has no state yet`);
    const found = await this.versions.find(p, {
      kind: 'version',
      unitId: ws.unit.id,
      version: ws.current.version,
    });
    answer(res, 200, { data: this.versionResource(found) });
  }

  @Get('state-versions/:id')
  async showVersion(
    @Param('id') id: string,
    @Res() res: Response,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    answer(res, 200, { data: this.versionResource(await this.findVersion(p, id)) });
  }

  @Get('state-versions/:id/download')
  async download(
    @Param('id') id: string,
    @Res() res: Response,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    const found = await this.findVersion(p, id);
    if (found.kind === 'pending') {
      throw new DomainError('not_found', `state version ${id} has not been uploaded yet`);
    }
    await sendState(res, await this.versions.open(p, found));
  }

  /** The current outputs: of a workspace, or of its current state version. */
  @Get(['workspaces/:id/current-state-version-outputs', 'state-versions/:id/outputs'])
  async outputs(
    @Param('id') id: string,
    @Res() res: Response,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    if (id.startsWith('ws-')) {
      const ws = await this.workspaces.byId(p, id);
      answer(res, 200, { data: await this.outputList(p, ws.unit.name, ws.unit.id) });
      return;
    }
    const found = await this.findVersion(p, id);
    if (found.kind === 'pending' || !found.current) {
      throw new DomainError('not_found', 'only the current state version has outputs here');
    }
    answer(res, 200, { data: await this.outputList(p, found.unit, found.unitId) });
  }

  /**
   * The current outputs the caller may read, without sensitive values (those come one by one);
   * a sensitive output the caller may not read is not listed at all.
   */
  private async outputList(p: Principal, unit: string, unitId: string): Promise<ResourceObject[]> {
    const outputs = await this.reader.outputs(p, { unit, workspace: DEFAULT_WORKSPACE });
    return Object.entries(outputs.outputs).map(([name, o]) =>
      outputResource(outputId(unitId, outputs.version, name), name, o as object, false),
    );
  }

  /** One output with its value, sensitive or not (`outputs.read-sensitive` for a sensitive one). */
  @Get('state-version-outputs/:id')
  async output(
    @Param('id') id: string,
    @Res() res: Response,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    const ref = parseOutputId(id);
    const unit = ref && (await this.states.findUnitById(ref.unitId));
    if (!ref || !unit || unit.deleted_at) {
      throw new DomainError('not_found', `state version output ${id.slice(0, 100)} not found`);
    }
    const outputs = await this.reader.outputs(p, { unit: unit.name, workspace: DEFAULT_WORKSPACE });
    const output = outputs.outputs[ref.name];
    if (outputs.version !== ref.version || output === undefined) {
      throw new DomainError(
        'not_found',
        `state version output ${id.slice(0, 100)} not found (or not readable by you, or no longer current)`,
      );
    }
    answer(res, 200, { data: outputResource(id, ref.name, output as object, true) });
  }

  private async findVersion(p: Principal, id: string): Promise<TfeStateVersion> {
    const ref = parseStateVersionId(id);
    if (!ref) throw new DomainError('not_found', `state version ${id.slice(0, 100)} not found`);
    return this.versions.find(p, ref);
  }

  private versionResource(found: TfeStateVersion): ResourceObject {
    if (found.kind === 'pending') return pendingStateVersionResource(found.upload, {});
    const id = stateVersionId(found.unitId, found.view.version);
    return stateVersionResource(
      found.unitId,
      found.view,
      this.versions.publicUrl(`/api/v2/state-versions/${id}/download`),
    );
  }
}

/** `{"reason": …}` of a lock request (go-tfe's WorkspaceLockOptions), anything else ignored. */
function readLockReason(body: Buffer): string | undefined {
  if (body.length === 0) return undefined;
  const parsed = parseJson(body);
  if (!isObject(parsed)) return undefined;
  const reason = parsed.reason;
  if (reason === undefined || reason === null) return undefined;
  if (typeof reason !== 'string' || reason.length > 1000) {
    throw new DomainError(
      'invalid_request',
      '"reason" must be a string of at most 1000 characters',
    );
  }
  const problem = textProblem(reason);
  if (problem) throw new DomainError('invalid_request', `"reason" has ${problem}`);
  return reason;
}

function parseJson(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString('utf8'));
  } catch {
    throw new DomainError('invalid_request', 'the request body is not valid JSON');
  }
}

async function tagNamesOf(req: Request): Promise<unknown[]> {
  const doc = parseJson(await readSmallBody(req, MAX_DOCUMENT_BYTES));
  const data = isObject(doc) ? doc.data : undefined;
  if (!Array.isArray(data))
    throw new DomainError('invalid_request', '"data" must be a list of tags');
  if (data.length > 100) throw new DomainError('invalid_request', 'at most 100 tags at once');
  return data.map((t) => (isObject(t) && isObject(t.attributes) ? t.attributes.name : undefined));
}

/** Anything else under `/api/v2`: a JSON:API 404 naming it (never a 5xx, which go-tfe retries). */
@ApiExcludeController()
@ThroughDoor('tfe')
@RawBody()
@UseFilters(TfeExceptionFilter)
@Controller('api/v2')
export class TfeFallbackController {
  @All(['', '*rest'])
  unknown(@Req() req: Request): never {
    req.resume();
    const path = req.originalUrl.split('?')[0].slice(0, 200);
    throw new DomainError(
      'not_found',
      `${req.method} ${path} is not part of this server's TFE API (local execution only: workspaces, state versions, outputs)`,
    );
  }
}
