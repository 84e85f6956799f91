import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Door } from './door';

/**
 * A hot route served below Express and Nest (see `withLeanRoutes` in src/lean-routes.ts): one
 * operation of a door that every `terraform plan` calls, whose per-request cost in the
 * framework (router, middleware chain, guards, interceptors, per-request loggers) is larger
 * than the work itself. It must answer exactly as the door's controller does — the same
 * checks, the same services, the same errors in the door's format — and it takes a request
 * only when that is certain from the request line and headers; every other request goes to
 * Express as before.
 */
export interface LeanRoute {
  readonly door: Door;
  /** Whether this route serves the request; decided synchronously, before anything is read. */
  accepts(req: IncomingMessage): boolean;
  /** Serves it, inside its request context; answers every error itself, in the door's format. */
  serve(req: IncomingMessage, res: ServerResponse): Promise<void>;
  /** The `operation` label of the request metrics. */
  operation(req: IncomingMessage): string;
}
