import type { Readable } from 'node:stream';
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
