import { Injectable } from '@nestjs/common';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { RequestAuthenticator } from '../auth/auth.guard';
import type { LeanRoute } from '../common/lean-route';
import { sendState } from '../state/state-response';
import { StateReader } from '../state/state-reader';
import { answerBackendError } from './backend-exception.filter';
import { backendOperation } from './backend-operation';
import { BACKEND_PREFIX, backendTarget } from './backend.controller';

/**
 * The HTTP backend's GET of a state — what `terraform plan` asks of `backend "http"` — served
 * below Express (`LeanRoute`). The steps are the guard's and the controller's, in their order:
 * the credential (Bearer, or the basic-auth password), the unit and workspace from the raw URL,
 * then `StateReader.openForRead` (RBAC, the read, its audit event); errors are the backend
 * filter's answers. It takes only a GET of `/v1/backend/<unit>` with no body and no query
 * parameter but `workspace`, whose path decodes; the rest goes to the controller.
 */
@Injectable()
export class BackendReadRoute implements LeanRoute {
  readonly door = 'http' as const;

  constructor(
    private readonly authenticator: RequestAuthenticator,
    private readonly reader: StateReader,
  ) {}

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
    const q = url.indexOf('?');
    if (q >= 0) {
      for (const pair of url.slice(q + 1).split('&'))
        if (!pair.startsWith('workspace=')) return false;
    }
    try {
      for (const segment of (q < 0 ? url : url.slice(0, q)).split('/')) decodeURIComponent(segment);
    } catch {
      return false; // answered before the router (`rejectMalformedEncoding`)
    }
    return true;
  }

  operation(req: IncomingMessage): string {
    return backendOperation(req.method ?? '', req.url ?? '');
  }

  async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      const principal = await this.authenticator.principalOf(
        req.headers.authorization,
        'http',
        true,
      );
      const { addr } = backendTarget(req.url ?? '');
      await sendState(res, await this.reader.openForRead(principal, addr));
    } catch (e) {
      answerBackendError(e, res);
    }
  }
}
