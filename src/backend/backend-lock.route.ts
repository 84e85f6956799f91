import { Injectable } from '@nestjs/common';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { RequestAuthenticator } from '../auth/auth.guard';
import type { Principal } from '../common/principal';
import { readSmallBody } from '../common/raw-body';
import { lockIdFromBody, MAX_LOCK_INFO_BYTES } from '../state/locks/lock-info';
import { LocksService } from '../state/locks/locks.service';
import type { StateAddress } from '../state/state-types';
import { BackendLeanRoute } from './backend-lean.route';
import { BACKEND_PREFIX, isPlainBackendPath } from './backend.controller';

/**
 * The HTTP backend's LOCK and UNLOCK — two of every `terraform plan`'s and `apply`'s requests —
 * served below Express (`LeanRoute`), with the controller's steps in its order: the credential,
 * the unit and workspace from the raw URL, the body (the LockInfo, at most
 * MAX_LOCK_INFO_BYTES), then `LocksService.acquire` or `release` (`forceUnlock` for the empty
 * body of `terraform force-unlock`); errors are the backend filter's answers (a held lock: 423
 * with the holder's LockInfo). The `?lock` forms (`lock_method = "POST"` …) stay with the
 * controller.
 */
@Injectable()
export class BackendLockRoute extends BackendLeanRoute {
  constructor(
    authenticator: RequestAuthenticator,
    private readonly locks: LocksService,
  ) {
    super(authenticator);
  }

  accepts(req: IncomingMessage): boolean {
    if (req.method !== 'LOCK' && req.method !== 'UNLOCK') return false;
    const url = req.url ?? '';
    return url.startsWith(BACKEND_PREFIX) && isPlainBackendPath(url);
  }

  protected async answer(
    principal: Principal,
    addr: StateAddress,
    req: IncomingMessage,
    res: ServerResponse,
  ): Promise<void> {
    const body = await readSmallBody(req, MAX_LOCK_INFO_BYTES);
    if (req.method === 'LOCK') {
      const held = await this.locks.acquire(principal, addr, body, {
        generateId: false,
        door: 'http',
      });
      res.statusCode = 200;
      res.setHeader('Content-Type', 'application/json; charset=utf-8');
      res.setHeader('Content-Length', Buffer.byteLength(held.infoJson));
      res.end(held.infoJson);
      return;
    }
    const id = lockIdFromBody(body);
    if (id === undefined) await this.locks.forceUnlock(principal, addr, 'http');
    else await this.locks.release(principal, addr, id, 'http');
    res.statusCode = 200;
    res.end();
  }
}
