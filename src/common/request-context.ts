import { SetMetadata } from '@nestjs/common';
import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';

import type { Door } from './door';

export type { Door } from './door';

export interface RequestContext {
  requestId: string;
  /** The client address, after STATEHOUSE_TRUSTED_PROXIES is applied. */
  clientIp: string | undefined;
  /** Which door the request came through; known once its route is (`setRequestDoor`). */
  door?: Door;
  /** The request's own log line, for an HTTP request pino-http logs (`startRequestLine`). */
  line?: RequestLine;
}

/**
 * What pino-http's line for a request (written when it ends) carries besides the request:
 * the request's state read, logged there instead of on a line of its own, so a read costs one
 * line. `written` once the line is out; an event after that gets its own line.
 */
export interface RequestLine {
  audit?: object;
  written?: boolean;
}

const LINE = Symbol('statehouse:requestLine');

/** Gives the request (the context, and the message pino-http is handed) a line to fill in. */
export function startRequestLine(req: object, ctx: RequestContext): void {
  const line: RequestLine = {};
  ctx.line = line;
  (req as { [LINE]?: RequestLine })[LINE] = line;
}

/** The line a request was given, where no async context reaches (pino-http's callbacks). */
export function requestLineOf(req: object): RequestLine | undefined {
  return (req as { [LINE]?: RequestLine })[LINE];
}

const storage = new AsyncLocalStorage<RequestContext>();

/** What a client may send as its request's id (`X-Request-Id`); anything else gets a new one. */
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * A request's context as it arrives, before anything reads it: its id (the client's
 * `X-Request-Id` when well formed, else a random one, echoed back), its client address and the
 * line it is logged on. The same for every request, whichever path serves it.
 */
export function beginRequest(
  req: IncomingMessage & { id?: unknown },
  res: ServerResponse,
  clientIp: string | undefined,
): RequestContext {
  const incoming = req.headers['x-request-id'];
  const id = typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID();
  req.id = id;
  res.setHeader('X-Request-Id', id);
  const ctx: RequestContext = { requestId: id, clientIp };
  startRequestLine(req, ctx);
  return ctx;
}

/** Runs `fn` with the request's context available to everything it calls (audit, errors). */
export function runWithRequestContext<T>(ctx: RequestContext, fn: () => T): T {
  return storage.run(ctx, fn);
}

export function currentRequestContext(): RequestContext | undefined {
  return storage.getStore();
}

/** Records the door of the current request (the global guard does, from the route's `@ThroughDoor`). */
export function setRequestDoor(door: Door): void {
  const ctx = storage.getStore();
  if (ctx) ctx.door = door;
}

export const DOOR_KEY = 'statehouse:door';

/**
 * The door a controller's routes belong to (routes without one are the management API). The
 * route decides, not the path: a door may be served under more than one path.
 */
export const ThroughDoor = (door: Door): ClassDecorator & MethodDecorator =>
  SetMetadata(DOOR_KEY, door);
