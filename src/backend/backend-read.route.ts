import { Injectable } from '@nestjs/common';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { RequestAuthenticator } from '../auth/auth.guard';
import type { Principal } from '../common/principal';
import { sendState } from '../state/state-response';
import { StateReader } from '../state/state-reader';
import type { StateAddress } from '../state/state-types';
import { BackendLeanRoute } from './backend-lean.route';
import { BACKEND_PREFIX, isPlainBackendPath } from './backend.controller';

/**
 * The HTTP backend's GET of a state — what `terraform plan` asks of `backend "http"` — served
 * below Express (`LeanRoute`). The steps are the guard's and the controller's, in their order:
 * the credential (Bearer, or the basic-auth password), the unit and workspace from the raw URL,
 * then `StateReader.openForRead` (RBAC, the read, its audit event); errors are the backend
 * filter's answers. It takes only a GET of `/v1/backend/<unit>` with no body and no query
 * parameter but `workspace`, whose path decodes; the rest goes to the controller.
 */
@Injectable()
export class BackendReadRoute extends BackendLeanRoute {
  constructor(
    authenticator: RequestAuthenticator,
    private readonly reader: StateReader,
  ) {
    super(authenticator);
  }

  accepts(req: IncomingMessage): boolean {
    if (req.method !== 'GET') return false;
    const url = req.url ?? '';
    if (!url.startsWith(BACKEND_PREFIX)) return false;
    const h = req.headers;
    if (
      (h['content-length'] !== undefined && h['content-length'] !== '0') ||
      h['transfer-encoding']
    )
      return false;
    return isPlainBackendPath(url);
  }

  protected async answer(
    principal: Principal,
    addr: StateAddress,
    _req: IncomingMessage,
    res: ServerResponse,
  ): Promise<void> {
    await sendState(res, await this.reader.openForRead(principal, addr));
  }
}
