import type { ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { currentRequestContext } from '../common/request-context';
import { sendWhole } from '../common/streams';
import type { S3RequestHead } from './s3-headers';
import { XML_HEADER } from './s3-xml';

/** What the door sends back. */
export interface S3Reply {
  status: number;
  headers?: Record<string, string>;
  body?: string | Buffer | Readable;
}

/** An ETag: the MD5 (hex) in quotes. */
export const quoted = (md5Hex: string): string => `"${md5Hex}"`;

export function xml(status: number, body: string, headers: Record<string, string> = {}): S3Reply {
  return {
    status,
    headers: { 'Content-Type': 'application/xml', ...headers },
    body: XML_HEADER + body,
  };
}

/** Echoes a requested server-side encryption: at rest, encryption is the storage's business. */
export function sse(head: S3RequestHead): Record<string, string> {
  return head.sse ? { 'x-amz-server-side-encryption': head.sse } : {};
}

/** Sends a reply (no body on HEAD); a body cut short closes the connection. */
export async function sendS3Reply(
  res: ServerResponse,
  reply: S3Reply,
  headOnly: boolean,
): Promise<void> {
  res.statusCode = reply.status;
  res.setHeader('x-amz-request-id', currentRequestContext()?.requestId ?? '');
  for (const [k, v] of Object.entries(reply.headers ?? {})) res.setHeader(k, v);
  const body = reply.body;
  if (headOnly || body === undefined) {
    if (body !== undefined && typeof body !== 'string' && !Buffer.isBuffer(body)) body.destroy();
    res.end();
    return;
  }
  if (typeof body === 'string' || Buffer.isBuffer(body)) {
    res.end(body);
    return;
  }
  if (sendWhole(res, body)) return;
  try {
    await pipeline(body, res);
  } catch {
    res.destroy(); // a cut connection, never a short body that looks whole
  }
}
