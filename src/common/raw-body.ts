import type { Readable } from 'node:stream';
import { DomainError } from './errors';

/**
 * Reads a small request body whole (LockInfo, JSON commands, an S3 part list), refusing more
 * than `limit` bytes without buffering them. State bodies are never read this way: they are
 * streamed.
 *
 * Beyond the limit the rest of the body is drained — read and dropped to its end — so the
 * refusal is answered on a connection that stays usable; the request is never destroyed (that
 * would cut the connection before the answer is sent). The body is read with a 'data' listener
 * that stays attached to the end: leaving an async iterator early and calling `resume()` does
 * not reliably restart a stream the iterator paused, and the connection then stalls.
 */
export function readSmallBody(
  stream: Readable,
  limit: number,
  tooLarge: () => Error = () =>
    new DomainError('too_large', `request body is larger than ${limit} bytes`),
): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let refused = false;
    stream.on('data', (chunk: Buffer) => {
      if (refused) return; // draining
      size += chunk.length;
      if (size > limit) {
        refused = true;
        chunks.length = 0;
        reject(tooLarge());
        return;
      }
      chunks.push(chunk);
    });
    stream.once('end', () => {
      if (!refused) resolve(Buffer.concat(chunks, size));
    });
    stream.once('error', (e) => {
      if (!refused) reject(e);
      refused = true;
    });
  });
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
