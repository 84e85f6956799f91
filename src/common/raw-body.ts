import type { Readable } from 'node:stream';
import { DomainError } from './errors';

/**
 * Reads a small request body whole (LockInfo, JSON commands), refusing more than `limit` bytes
 * without buffering them. State bodies are never read this way: they are streamed.
 */
export async function readSmallBody(stream: Readable, limit: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  // Never destroy the request: that would cut the connection before the error is answered.
  for await (const chunk of stream.iterator({ destroyOnReturn: false })) {
    const buf = chunk as Buffer;
    size += buf.length;
    if (size > limit) {
      stream.resume(); // drain the rest so the answer can be sent
      throw new DomainError('too_large', `request body is larger than ${limit} bytes`);
    }
    chunks.push(buf);
  }
  return Buffer.concat(chunks, size);
}

/** Parses a `Content-Length` header; undefined when absent, an error when malformed. */
export function declaredLength(header: string | string[] | undefined): number | undefined {
  if (header === undefined) return undefined;
  const value = Array.isArray(header) ? header[0] : header;
  if (!/^\d+$/.test(value))
    throw new DomainError('invalid_request', 'Content-Length is not a number');
  return Number(value);
}

/** One header value (the first, when a client repeated it). */
export function headerValue(header: string | string[] | undefined): string | undefined {
  return Array.isArray(header) ? header[0] : header;
}
