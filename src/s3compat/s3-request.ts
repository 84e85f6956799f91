import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';
import { Readable } from 'node:stream';
import { readSmallBody } from '../common/raw-body';
import { feed } from '../common/streams';
import { S3Error } from './s3-errors';
import { decodePathPart, decodeQuery } from './s3-uri';

/** Where the S3 door is mounted on the main listener. */
export const S3_PREFIX = '/s3';

const AT_ROOT = Symbol('statehouse.s3-door-at-root');

/**
 * Marks a request that arrived at the root of the S3 door's own listener (STATEHOUSE_S3_PORT),
 * where `/<bucket>/<key>` needs no `/s3` in front.
 */
export function markAtRoot(req: IncomingMessage): void {
  (req as IncomingMessage & { [AT_ROOT]?: true })[AT_ROOT] = true;
}

/** The path the S3 door was reached under: `/s3` on the main listener, `` at the root of its own. */
export function s3BaseOf(req: IncomingMessage): string {
  return (req as IncomingMessage & { [AT_ROOT]?: true })[AT_ROOT] ? '' : S3_PREFIX;
}

/** Where an S3 request points, read from the raw URL. */
export interface S3Target {
  rawPath: string;
  rawQuery: string;
  /** Decoded bucket name; undefined for the service (`GET /s3`). */
  bucket?: string;
  /** Decoded object key; undefined for bucket-level requests. */
  key?: string;
  /** Decoded query parameters (first value wins); presence matters (`?uploads`). */
  query: Map<string, string>;
}

/**
 * Reads the target from the URL as received (`originalUrl`: path and query exactly as sent, what
 * the client signed) below `base` (`s3BaseOf`).
 */
export function parseTarget(originalUrl: string, base = S3_PREFIX): S3Target {
  const q = originalUrl.indexOf('?');
  const rawPath = q < 0 ? originalUrl : originalUrl.slice(0, q);
  const rawQuery = q < 0 ? '' : originalUrl.slice(q + 1);
  const query = new Map<string, string>();
  for (const [name, value] of decodeQuery(rawQuery)) if (!query.has(name)) query.set(name, value);
  const rest = rawPath.slice(base.length).replace(/^\//, '');
  if (rest === '') return { rawPath, rawQuery, query };
  const slash = rest.indexOf('/');
  const rawBucket = slash < 0 ? rest : rest.slice(0, slash);
  const rawKey = slash < 0 ? '' : rest.slice(slash + 1);
  return {
    rawPath,
    rawQuery,
    query,
    bucket: decodePathPart(rawBucket),
    key: rawKey === '' ? undefined : decodePathPart(rawKey),
  };
}

/**
 * The bucket a virtual-hosted-style request names in its Host (`tfstate.127.0.0.1:9000`,
 * `tfstate.statehouse.example.com`), or undefined for a path-style request. It counts only when
 * the Host is a configured bucket, a dot, and this server — an IP address, `localhost`, or a
 * host of its base URLs (`selfHosts`) — so a server whose own name starts like a bucket
 * (`tfstate.example.com`) is not misread.
 */
export function virtualHostedBucket(
  host: string | undefined,
  buckets: readonly string[],
  selfHosts: readonly string[],
): string | undefined {
  if (host === undefined || host.startsWith('[')) return undefined;
  const hostname = host.replace(/:\d*$/, '').toLowerCase();
  for (const bucket of buckets) {
    if (!hostname.startsWith(`${bucket}.`)) continue;
    const rest = hostname.slice(bucket.length + 1);
    if (isIP(rest) !== 0 || rest === 'localhost' || selfHosts.includes(rest)) return bucket;
  }
  return undefined;
}

/** Pipes the request through the body transforms (aws-chunked decoding, digest checks). */
export function decodedBody(
  req: IncomingMessage,
  transforms: readonly import('node:stream').Transform[],
): Readable {
  let stream: Readable = req;
  for (const t of transforms) stream = feed(stream, t);
  return stream;
}

/**
 * Reads a small decoded body whole (LockInfo, CompleteMultipartUpload XML). Beyond `limit` it
 * answers `EntityTooLarge` — the S3 door's answer to every oversized body — after draining the
 * rest, like the small bodies of the other doors (`readSmallBody`).
 */
export function readAllLimited(stream: Readable, limit: number, what: string): Promise<Buffer> {
  return readSmallBody(
    stream,
    limit,
    () => new S3Error('EntityTooLarge', `${what} is larger than ${limit} bytes`),
  );
}

/** HTTP date for Last-Modified. */
export function httpDate(d: Date): string {
  return d.toUTCString();
}

/** ISO 8601 with milliseconds, as S3 lists LastModified. */
export function isoDate(d: Date): string {
  return d.toISOString();
}

/**
 * A `Range: bytes=…` header against an object of `size` bytes: undefined for the whole object
 * (no header, or several ranges, which S3 also ignores), the inclusive range otherwise.
 */
export function parseRange(
  value: string | undefined,
  size: number,
): { start: number; end: number } | undefined {
  if (value === undefined) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/.exec(value.trim());
  if (!m || (m[1] === '' && m[2] === '')) {
    if (/^bytes=.*,/.test(value)) return undefined;
    throw new S3Error('InvalidRange', 'The requested range is not satisfiable');
  }
  let start: number;
  let end: number;
  if (m[1] === '') {
    const suffix = Number(m[2]);
    if (suffix === 0) throw new S3Error('InvalidRange', 'The requested range is not satisfiable');
    start = Math.max(0, size - suffix);
    end = size - 1;
  } else {
    start = Number(m[1]);
    end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
    if (m[2] !== '' && Number(m[2]) < start) return undefined; // invalid spec: ignored, as S3 does
  }
  if (start >= size) throw new S3Error('InvalidRange', 'The requested range is not satisfiable');
  return { start, end };
}

/** Sub-resources of objects and buckets this server does not implement (answered NotImplemented). */
export const UNSUPPORTED_SUB_RESOURCES: readonly string[] = [
  'acl',
  'tagging',
  'retention',
  'legal-hold',
  'torrent',
  'restore',
  'select',
  'attributes',
  'versionId',
  'versions',
  'policy',
  'cors',
  'lifecycle',
  'website',
  'notification',
  'replication',
  'encryption',
  'object-lock',
  'delete',
  'uploads',
];
