import type { ErrorBody } from './api-types';
import { CliError, networkReason } from './errors';
import { trimEnd } from '../common/trim';

/** An error answer of the server: its status, `code` and `message`. */
export class ApiError extends CliError {
  constructor(
    message: string,
    readonly status: number,
    readonly code: string | undefined,
    readonly body: ErrorBody | undefined,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

/** Where the bearer token comes from, and what to do when the server refuses it. */
export interface Authenticator {
  /** The `Authorization` header value (refreshing a stored login first when it is due). */
  header(): Promise<string>;
  /** After a 401: get a new token if that can help; true when the request is worth retrying. */
  recover(): Promise<boolean>;
  /** Appended to the message of a 401, e.g. how to log in again. */
  readonly hint: string;
}

/** A raw request body, made anew for each attempt (a retry sends it again). */
export interface RawBody {
  data: ReadableStream<Uint8Array> | Uint8Array | string;
  length?: number;
  contentType?: string;
}

export interface RequestOptions {
  query?: Record<string, string | number | undefined>;
  json?: unknown;
  body?: () => RawBody;
  /** false: send no Authorization header (the login endpoints). */
  auth?: boolean;
  /** Abort when no answer comes in this many milliseconds. */
  timeoutMs?: number;
}

/** Normalises a server URL: http(s) only, no query or fragment, no trailing slash. */
export function normalizeServer(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new CliError(`not a URL: ${raw} (expected e.g. https://statehouse.example.com)`, 2);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new CliError(`the server URL must start with http:// or https://: ${raw}`, 2);
  }
  if (url.username || url.password) {
    throw new CliError('the server URL must not contain credentials', 2);
  }
  return `${url.origin}${trimEnd(url.pathname, '/')}`;
}

/** Turns an error answer into one line: the server's `message`, plus the lock holder if any. */
export async function apiError(res: Response, hint = ''): Promise<ApiError> {
  if (res.status >= 300 && res.status < 400) {
    await res.body?.cancel().catch(() => undefined);
    const to = res.headers.get('location') ?? 'another address';
    return new ApiError(
      `the server redirected to ${to}: use that address with --server or STATEHOUSE_SERVER`,
      res.status,
      undefined,
      undefined,
    );
  }
  const text = await res.text().catch(() => '');
  let body: ErrorBody | undefined;
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed === 'object' && parsed !== null) body = parsed;
  } catch {
    body = undefined;
  }
  let message =
    typeof body?.message === 'string' && body.message
      ? body.message
      : `HTTP ${res.status} ${res.statusText}`.trim();
  if (body?.lock) {
    const info = body.lock;
    const parts = [`lock ID ${String(info.ID)}`];
    if (typeof info.Who === 'string' && info.Who) parts.push(`who ${info.Who}`);
    if (typeof info.Operation === 'string' && info.Operation)
      parts.push(`operation ${info.Operation}`);
    if (typeof info.Created === 'string' && info.Created) parts.push(`since ${info.Created}`);
    message += ` (${parts.join(', ')})`;
  }
  if (res.status === 401 && hint) message += ` — ${hint}`;
  return new ApiError(message, res.status, body?.code, body);
}

/** The management API over fetch. */
export class ApiClient {
  constructor(
    readonly server: string,
    private readonly auth?: Authenticator,
  ) {}

  url(path: string, query?: RequestOptions['query']): string {
    const url = new URL(`${this.server}${path}`);
    for (const [k, v] of Object.entries(query ?? {})) {
      if (v !== undefined) url.searchParams.set(k, String(v));
    }
    return url.toString();
  }

  /** Sends a request; answers 2xx, or throws ApiError (after one retry with a renewed token). */
  async send(method: string, path: string, options: RequestOptions = {}): Promise<Response> {
    const useAuth = options.auth !== false;
    if (useAuth && !this.auth) throw new CliError('not authenticated');
    let res = await this.attempt(method, path, options, useAuth);
    if (res.status === 401 && useAuth && this.auth && (await this.auth.recover())) {
      await res.body?.cancel().catch(() => undefined);
      res = await this.attempt(method, path, options, useAuth);
    }
    if (!res.ok) throw await apiError(res, useAuth ? this.auth?.hint : '');
    return res;
  }

  async json<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    const res = await this.send(method, path, options);
    const text = await res.text();
    try {
      return JSON.parse(text) as T;
    } catch {
      throw new CliError(`the server answered ${method} ${path} with something that is not JSON`);
    }
  }

  /** A request whose answer has no body worth reading (204 and the like). */
  async call(method: string, path: string, options: RequestOptions = {}): Promise<void> {
    const res = await this.send(method, path, options);
    await res.body?.cancel().catch(() => undefined);
  }

  private async attempt(
    method: string,
    path: string,
    options: RequestOptions,
    useAuth: boolean,
  ): Promise<Response> {
    const headers: Record<string, string> = { accept: 'application/json' };
    if (useAuth && this.auth) headers.authorization = await this.auth.header();
    let body: RawBody['data'] | undefined;
    if (options.json !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(options.json);
    } else if (options.body) {
      const raw = options.body();
      body = raw.data;
      if (raw.contentType) headers['content-type'] = raw.contentType;
      if (raw.length !== undefined) headers['content-length'] = String(raw.length);
    }
    const url = this.url(path, options.query);
    try {
      return await fetch(url, {
        method,
        headers,
        body,
        redirect: 'manual',
        ...(body instanceof ReadableStream ? { duplex: 'half' } : {}),
        ...(options.timeoutMs ? { signal: AbortSignal.timeout(options.timeoutMs) } : {}),
      });
    } catch (e) {
      throw new CliError(`cannot reach the server at ${this.server}: ${networkReason(e)}`);
    }
  }
}
