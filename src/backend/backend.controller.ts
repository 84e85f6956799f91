import { All, Controller, Req, Res, UseFilters } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import { RawBody } from '../common/body-parsing';
import type { Request, Response } from 'express';
import { AllowBasicAuth, CurrentPrincipal } from '../common/route-auth';
import type { Principal } from '../common/principal';
import { DomainError } from '../common/errors';
import { assertWorkspace, unitNameFromRawPath } from '../common/names';
import { declaredLength, headerValue, readSmallBody } from '../common/raw-body';
import { ThroughDoor } from '../common/request-context';
import { sendState } from '../state/state-response';
import { lockIdFromBody, MAX_LOCK_INFO_BYTES } from '../state/locks/lock-info';
import { LocksService } from '../state/locks/locks.service';
import type { StateAddress } from '../state/state-types';
import { StateReader } from '../state/state-reader';
import { StateWriter } from '../state/state-writer';
import { BackendExceptionFilter } from './backend-exception.filter';

export const BACKEND_PREFIX = '/v1/backend/';

/**
 * Whether a backend URL's query holds nothing but `workspace` (no `?lock`, no `?ID=`) and its
 * path decodes — the requests the lean routes take (a malformed path is answered before the
 * router: `rejectMalformedEncoding`).
 */
export function isPlainBackendPath(url: string): boolean {
  const q = url.indexOf('?');
  if (q >= 0) {
    for (const pair of url.slice(q + 1).split('&'))
      if (!pair.startsWith('workspace=')) return false;
  }
  try {
    for (const segment of (q < 0 ? url : url.slice(0, q)).split('/')) decodeURIComponent(segment);
  } catch {
    return false;
  }
  return true;
}

/**
 * The state a backend URL names and its query (`?lock`, `?ID=`, `?workspace=`), read from the
 * raw URL. The unit is the part after the prefix the router matched, in whatever case it was
 * spelled (routes match case-insensitively): the unit part keeps its own spelling.
 */
export function backendTarget(url: string): { addr: StateAddress; query: URLSearchParams } {
  const path = url.toLowerCase().startsWith(BACKEND_PREFIX) ? url.slice(BACKEND_PREFIX.length) : '';
  const q = url.indexOf('?');
  const query = new URLSearchParams(q < 0 ? '' : url.slice(q + 1));
  const addr: StateAddress = {
    unit: unitNameFromRawPath(path),
    workspace: assertWorkspace(query.get('workspace') ?? undefined),
  };
  return { addr, query };
}

/**
 * Terraform's built-in `backend "http"` at `/v1/backend/<unit…>`: GET, POST/PUT (update with
 * `?ID=`), DELETE, LOCK, UNLOCK — and, for `lock_method`/`unlock_method` set to POST/PUT and
 * DELETE, the same URL with `?lock`. The unit is read from the raw URL, never from Express's
 * decoded wildcard. Documented in the README (Swagger has no LOCK/UNLOCK).
 */
@ApiExcludeController()
@ThroughDoor('http')
@AllowBasicAuth()
@RawBody()
@UseFilters(BackendExceptionFilter)
@Controller('v1/backend')
export class BackendController {
  constructor(
    private readonly reader: StateReader,
    private readonly writer: StateWriter,
    private readonly locks: LocksService,
  ) {}

  @All(['', '*unit'])
  async handle(
    @Req() req: Request,
    @Res() res: Response,
    @CurrentPrincipal() principal: Principal,
  ): Promise<void> {
    const { addr, query } = backendTarget(req.originalUrl);
    const lockUrl = query.has('lock');
    const method = req.method.toUpperCase();

    if (method === 'LOCK' || (lockUrl && (method === 'POST' || method === 'PUT'))) {
      const body = await readSmallBody(req, MAX_LOCK_INFO_BYTES);
      const held = await this.locks.acquire(principal, addr, body, {
        generateId: false,
        door: 'http',
      });
      res.status(200).type('application/json').send(held.infoJson);
      return;
    }
    if (method === 'UNLOCK' || (lockUrl && method === 'DELETE')) {
      const body = await readSmallBody(req, MAX_LOCK_INFO_BYTES);
      const id = lockIdFromBody(body);
      // `terraform force-unlock` sends an empty body: it cannot prove it holds the lock.
      if (id === undefined) await this.locks.forceUnlock(principal, addr, 'http');
      else await this.locks.release(principal, addr, id, 'http');
      res.status(200).end();
      return;
    }
    switch (method) {
      case 'GET':
      case 'HEAD': {
        if (method === 'HEAD') {
          const v = await this.reader.describeForRead(principal, addr);
          res
            .status(200)
            .set({ 'Content-Type': 'application/json', 'Content-Length': String(v.size) })
            .end();
          return;
        }
        await sendState(res, await this.reader.openForRead(principal, addr));
        return;
      }
      case 'POST':
      case 'PUT': {
        const id = query.get('ID') ?? undefined;
        const result = await this.writer.write({
          ...addr,
          principal,
          door: 'http',
          body: req,
          lockId: id === '' ? undefined : id,
          contentLength: declaredLength(req.headers['content-length']),
          contentMd5: headerValue(req.headers['content-md5']),
        });
        res.status(200).json(result);
        return;
      }
      case 'DELETE':
        await this.writer.deleteState(principal, addr, 'http', query.get('ID') ?? undefined);
        res.status(200).end();
        return;
      default:
        res.setHeader('Allow', 'GET, HEAD, POST, PUT, DELETE, LOCK, UNLOCK');
        throw new DomainError(
          'invalid_request',
          `method ${method} is not supported by the http backend`,
        );
    }
  }
}
