import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestAuthenticator } from '../auth/auth.guard';
import type { LeanRoute } from '../common/lean-route';
import type { Principal } from '../common/principal';
import type { StateAddress } from '../state/state-types';
import { answerBackendError } from './backend-exception.filter';
import { backendOperation } from './backend-operation';
import { backendTarget } from './backend.controller';

/**
 * What the HTTP backend's lean routes share, in the order of the guard and the controller: the
 * credential (Bearer, or the basic-auth password), then the unit and workspace from the raw
 * URL, then the operation; every error is the backend filter's answer.
 */
export abstract class BackendLeanRoute implements LeanRoute {
  readonly door = 'http' as const;

  protected constructor(private readonly authenticator: RequestAuthenticator) {}

  abstract accepts(req: IncomingMessage): boolean;

  /** The operation itself, for the caller and the state its URL names. */
  protected abstract answer(
    principal: Principal,
    addr: StateAddress,
    req: IncomingMessage,
    res: ServerResponse,
  ): Promise<void>;

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
      await this.answer(principal, backendTarget(req.url ?? '').addr, req, res);
    } catch (e) {
      answerBackendError(e, res);
    }
  }
}
