import { AsyncLocalStorage } from 'node:async_hooks';

export interface RequestContext {
  requestId: string;
  /** The client address, after STATEHOUSE_TRUSTED_PROXIES is applied. */
  clientIp: string | undefined;
}

const storage = new AsyncLocalStorage<RequestContext>();

/** Runs `fn` with the request's context available to everything it calls (audit, errors). */
export function runWithRequestContext<T>(ctx: RequestContext, fn: () => T): T {
  return storage.run(ctx, fn);
}

export function currentRequestContext(): RequestContext | undefined {
  return storage.getStore();
}
