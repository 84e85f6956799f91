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
import { CurrentPrincipal, Public } from '../common/route-auth';
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
import { outputId, parseOutputId, parseStateVersionId, stateVersionId } from './tfe-names';
import { TfeExceptionFilter } from './tfe-exception.filter';
import { TfeStateVersionsService, TfeStateVersion } from './tfe-state-versions.service';
import { TfeWorkspacesService, WorkspaceInput } from './tfe-workspaces.service';
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

  @Get('organizations/:org')
  async organization(
    @Param('org') org: string,
    @Res() res: Response,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    await this.workspaces.assertOrganization(p, org);
    answer(res, 200, { data: organizationResource(org, new Date(0)) });
  }

  @Get('organizations/:org/entitlement-set')
  async entitlements(
    @Param('org') org: string,
    @Res() res: Response,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    await this.workspaces.assertOrganization(p, org);
    answer(res, 200, { data: entitlementResource(org) });
  }

  @Get('organizations/:org/workspaces')
  async list(
    @Param('org') org: string,
    @Req() req: Request,
    @Res() res: Response,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    const q = queryOf(req);
    const page = pageRequest(Object.fromEntries(q));
    await this.workspaces.assertOrganization(p, org);
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
    answer(res, 200, { data: items.map(workspaceResource), meta });
  }

  @Post('organizations/:org/workspaces')
  async create(
    @Param('org') org: string,
    @Req() req: Request,
    @Res() res: Response,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    const input = workspaceInput(await documentOf(req, 'workspaces'));
    if (input.name === undefined)
      throw new DomainError('invalid_name', 'a workspace needs a "name"');
    await this.workspaces.assertOrganization(p, org);
    const ws = await this.workspaces.create(p, org, { ...input, name: input.name });
    answer(res, 201, { data: workspaceResource(ws) });
  }

  @Get('organizations/:org/workspaces/:name')
  async showByName(
    @Param('org') org: string,
    @Param('name') name: string,
    @Res() res: Response,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    answer(res, 200, { data: workspaceResource(await this.workspaces.byName(p, org, name)) });
  }

  @Get('workspaces/:id')
  async showById(
    @Param('id') id: string,
    @Res() res: Response,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    answer(res, 200, { data: workspaceResource(await this.workspaces.byId(p, id)) });
  }

  @Patch('organizations/:org/workspaces/:name')
  async updateByName(
    @Param('org') org: string,
    @Param('name') name: string,
    @Req() req: Request,
    @Res() res: Response,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    const input = workspaceInput(await documentOf(req, 'workspaces'));
    const ws = await this.workspaces.byName(p, org, name);
    answer(res, 200, { data: workspaceResource(await this.workspaces.update(p, ws, input)) });
  }

  @Patch('workspaces/:id')
  async updateById(
    @Param('id') id: string,
    @Req() req: Request,
    @Res() res: Response,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    const input = workspaceInput(await documentOf(req, 'workspaces'));
    const ws = await this.workspaces.byId(p, id);
    answer(res, 200, { data: workspaceResource(await this.workspaces.update(p, ws, input)) });
  }

  @Delete('organizations/:org/workspaces/:name')
  @HttpCode(204)
  async deleteByName(
    @Param('org') org: string,
    @Param('name') name: string,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    await this.workspaces.delete(p, await this.workspaces.byName(p, org, name), false);
  }

  @Post('organizations/:org/workspaces/:name/actions/safe-delete')
  @HttpCode(204)
  async safeDeleteByName(
    @Param('org') org: string,
    @Param('name') name: string,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    await this.workspaces.delete(p, await this.workspaces.byName(p, org, name), true);
  }

  @Delete('workspaces/:id')
  @HttpCode(204)
  async deleteById(@Param('id') id: string, @CurrentPrincipal() p: Principal): Promise<void> {
    await this.workspaces.delete(p, await this.workspaces.byId(p, id), false);
  }

  @Post('workspaces/:id/actions/safe-delete')
  @HttpCode(204)
  async safeDeleteById(@Param('id') id: string, @CurrentPrincipal() p: Principal): Promise<void> {
    await this.workspaces.delete(p, await this.workspaces.byId(p, id), true);
  }

  @Post('workspaces/:id/actions/lock')
  async lock(
    @Param('id') id: string,
    @Req() req: Request,
    @Res() res: Response,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    const body = await readSmallBody(req, MAX_DOCUMENT_BYTES);
    const reason = readLockReason(body);
    const ws = await this.workspaces.byId(p, id);
    await this.workspaces.lock(p, ws, reason);
    answer(res, 200, { data: workspaceResource(await this.workspaces.byId(p, id)) });
  }

  @Post('workspaces/:id/actions/unlock')
  async unlock(
    @Param('id') id: string,
    @Req() req: Request,
    @Res() res: Response,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    req.resume();
    const ws = await this.workspaces.byId(p, id);
    await this.workspaces.unlock(p, ws);
    answer(res, 200, { data: workspaceResource(await this.workspaces.byId(p, id)) });
  }

  @Post('workspaces/:id/actions/force-unlock')
  async forceUnlock(
    @Param('id') id: string,
    @Req() req: Request,
    @Res() res: Response,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    req.resume();
    const ws = await this.workspaces.byId(p, id);
    await this.workspaces.forceUnlock(p, ws);
    answer(res, 200, { data: workspaceResource(await this.workspaces.byId(p, id)) });
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

  @Post('workspaces/:id/relationships/tags')
  @HttpCode(204)
  async addTags(
    @Param('id') id: string,
    @Req() req: Request,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    const tags = await tagNamesOf(req);
    await this.workspaces.addTags(p, await this.workspaces.byId(p, id), tags);
  }

  @Delete('workspaces/:id/relationships/tags')
  @HttpCode(204)
  async removeTags(
    @Param('id') id: string,
    @Req() req: Request,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    const tags = await tagNamesOf(req);
    await this.workspaces.removeTags(p, await this.workspaces.byId(p, id), tags);
  }

  @Get('organizations/:org/projects')
  async projects(
    @Param('org') org: string,
    @Req() req: Request,
    @Res() res: Response,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    const q = queryOf(req);
    const page = pageRequest(Object.fromEntries(q));
    const names = q.get('filter[names]');
    const found = await this.workspaces.listProjects(
      p,
      org,
      names === null ? undefined : names.split(','),
    );
    const { items, meta } = paged(found, page);
    answer(res, 200, { data: items.map(projectResource), meta });
  }

  @Post('organizations/:org/projects')
  async createProject(
    @Param('org') org: string,
    @Req() req: Request,
    @Res() res: Response,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    const data = await documentOf(req, 'projects');
    const name = stringAttribute(data.attributes, 'name', 200);
    if (name === undefined) throw new DomainError('invalid_name', 'a project needs a "name"');
    await this.workspaces.assertOrganization(p, org);
    answer(res, 201, { data: projectResource(await this.workspaces.createProject(p, org, name)) });
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
  @Public()
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

  @Get('workspaces/:id/current-state-version-outputs')
  async currentOutputs(
    @Param('id') id: string,
    @Res() res: Response,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    const ws = await this.workspaces.byId(p, id);
    const outputs = await this.reader.outputs(p, ws.addr);
    answer(res, 200, {
      data: Object.entries(outputs.outputs).map(([name, o]) =>
        outputResource(outputId(ws.unit.id, outputs.version, name), name, o as object, false),
      ),
    });
  }

  @Get('state-versions/:id/outputs')
  async versionOutputs(
    @Param('id') id: string,
    @Res() res: Response,
    @CurrentPrincipal() p: Principal,
  ): Promise<void> {
    const found = await this.findVersion(p, id);
    if (found.kind === 'pending' || !found.current) {
      throw new DomainError('not_found', 'only the current state version has outputs here');
    }
    const addr = { unit: found.unit, workspace: DEFAULT_WORKSPACE };
    const outputs = await this.reader.outputs(p, addr);
    answer(res, 200, {
      data: Object.entries(outputs.outputs).map(([name, o]) =>
        outputResource(outputId(found.unitId, outputs.version, name), name, o as object, false),
      ),
    });
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
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    throw new DomainError('invalid_request', 'the lock request body is not valid JSON');
  }
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

async function tagNamesOf(req: Request): Promise<unknown[]> {
  const text = await readSmallBody(req, MAX_DOCUMENT_BYTES);
  let doc: unknown;
  try {
    doc = JSON.parse(text.toString('utf8'));
  } catch {
    throw new DomainError('invalid_request', 'the request body is not valid JSON');
  }
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
