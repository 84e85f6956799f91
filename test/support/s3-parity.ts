import type { IncomingHttpHeaders } from 'node:http';
import { RawReply, RawRequest, S3Creds, sendRaw, signS3 } from './s3-signer';
import { apiFetch, onFreshServer, RunningServer, s3CredentialsFor } from './server';

/**
 * The parity check of the S3 routes served below Express (src/lean-routes.ts): a query
 * parameter the door ignores (`statehouse-parity`, signed like the rest) sends the same request
 * to the controller instead, and the two answers must be equal, header for header and byte for
 * byte, but for what differs between any two answers.
 */

/** What differs between any two answers: the request's ids, the time, the connection. */
const PER_ANSWER = new Set([
  'x-request-id',
  'x-amz-request-id',
  'date',
  'connection',
  'keep-alive',
]);

export type Signed = Parameters<typeof signS3>[2];
export type Tamper = (raw: RawRequest) => RawRequest;

/** An answer without what differs between any two answers (its ids replaced in the body). */
export function comparable(r: RawReply): {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
} {
  const headers: IncomingHttpHeaders = {};
  for (const [k, v] of Object.entries(r.headers)) if (!PER_ANSWER.has(k)) headers[k] = v;
  const ids = [r.headers['x-amz-request-id'], r.headers['x-request-id']].filter(
    (id): id is string => typeof id === 'string' && id !== '',
  );
  let text = r.text;
  for (const id of ids) text = text.split(id).join('<request-id>');
  return { status: r.status, headers, text };
}

/** The request with the parity parameter: served by the controller. */
export function throughController(r: Signed): Signed {
  return { ...r, query: { ...r.query, 'statehouse-parity': '1' } };
}

/**
 * The request through the lean route, then (after `between`, which puts back what the first
 * changed) through the controller; both answers.
 */
export async function bothWays(
  port: number,
  creds: S3Creds,
  r: Signed,
  tamper: Tamper = (raw) => raw,
  between: () => Promise<void> = () => Promise.resolve(),
): Promise<[RawReply, RawReply]> {
  const lean = await sendRaw(port, tamper(await signS3(port, creds, r)));
  await between();
  const routed = await sendRaw(port, tamper(await signS3(port, creds, throughController(r))));
  return [lean, routed];
}

/** Both ways answer `expected` (status, S3 error code), and alike. */
export async function expectSameBothWays(
  port: number,
  creds: S3Creds,
  r: Signed,
  expected: { status: number; code?: string },
  options: { tamper?: Tamper; between?: () => Promise<void> } = {},
): Promise<void> {
  const [lean, routed] = await bothWays(port, creds, r, options.tamper, options.between);
  expect(lean.status).toBe(expected.status);
  if (expected.code) expect(lean.text).toContain(`<Code>${expected.code}</Code>`);
  // The error's Resource names the path, without the query: the same for both.
  expect(comparable(lean)).toEqual(comparable(routed));
}

/** A request whose header signature is spoiled (its first four hex digits zeroed). */
export const badSignature: Tamper = (raw) => ({
  ...raw,
  headers: {
    ...raw.headers,
    authorization: raw.headers.authorization.replace(/Signature=[0-9a-f]{4}/, 'Signature=0000'),
  },
});

/** From here on deny by default: `admin` (made the RBAC admin) may do anything, others nothing. */
export async function onlyAdminAllowed(server: RunningServer, admin: string): Promise<void> {
  const init = await apiFetch(server, '/v1/rbac/init', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ admin: { subject: admin } }),
  });
  expect(init.status).toBeLessThan(300);
}

/** An unsigned request to `path` both ways: refused (403), alike. */
export async function expectUnsignedRefusedAlike(
  port: number,
  method: string,
  path: string,
): Promise<void> {
  const anon = (target: string) => sendRaw(port, { method, target, headers: {} });
  const [lean, routed] = [await anon(path), await anon(`${path}?statehouse-parity=1`)];
  expect(lean.status).toBe(403);
  expect(comparable(lean)).toEqual(comparable(routed));
}

/** A fresh server with two callers: `writer`, the RBAC admin, and `nobody`, allowed nothing. */
export interface ParityScope {
  server: RunningServer;
  writer: S3Creds;
  nobody: S3Creds;
  /** `expectSameBothWays` on this server. */
  expectSame(
    creds: S3Creds,
    r: Signed,
    expected: { status: number; code?: string },
    options?: { tamper?: Tamper; between?: () => Promise<void> },
  ): Promise<void>;
}

/**
 * Starts the scope's server for the enclosing `describe` and makes its callers (named after
 * `name`); `prepare` runs as the writer before RBAC is switched on (deny by default).
 */
export function parityScope(
  name: string,
  prepare: (scope: ParityScope) => Promise<void> = () => Promise.resolve(),
): ParityScope {
  const scope = {
    expectSame: (creds, r, expected, options) =>
      expectSameBothWays(scope.server.port, creds, r, expected, options),
  } as ParityScope;
  onFreshServer((s) => (scope.server = s));
  beforeAll(async () => {
    scope.writer = await s3CredentialsFor(scope.server, `svc:${name}-writer`);
    scope.nobody = await s3CredentialsFor(scope.server, `svc:${name}-nobody`);
    await prepare(scope);
    await onlyAdminAllowed(scope.server, `svc:${name}-writer`);
  });
  return scope;
}
