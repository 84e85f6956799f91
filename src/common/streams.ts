import { Readable } from 'node:stream';
import type { Transform } from 'node:stream';

/**
 * A body whose bytes are already in memory, whole (a blob the cache holds, a synthesized
 * state). It reads like any stream, and a sender that sees one answers with `res.end(bytes)`
 * instead of piping it (`sendWhole`): no stream machinery per request — `stream.pipeline`'s own
 * AbortController, aborted with a DOMException and its stack at every end, cost more than the
 * write of a state held in memory.
 */
export class BytesReadable extends Readable {
  private pending: Buffer | undefined;

  constructor(readonly bytes: Buffer) {
    super();
    this.pending = bytes.length > 0 ? bytes : undefined;
  }

  override _read(): void {
    const chunk = this.pending;
    this.pending = undefined;
    this.push(chunk ?? null);
  }
}

/**
 * Ends `res` with the body's bytes when they are in memory whole (`BytesReadable`): true when
 * it did, false when the caller must stream the body.
 */
export function sendWhole(res: { end(bytes: Buffer): unknown }, body: Readable): boolean {
  if (!(body instanceof BytesReadable) || body.readableDidRead || body.destroyed) return false;
  res.end(body.bytes);
  return true;
}

/**
 * Pipes a request body into a transform without ever destroying the request: when the
 * transform fails (body too large, not a state), the rest of the body is drained so the
 * connection can still carry the error answer. A failing source (client gone) fails the
 * transform, so whoever consumes it sees the error.
 *
 * The source may already be over when this is called — a small body flows whole through a
 * checking transform (hash, checksum) while the caller was still authorising, and that
 * transform may have failed at its end already. Its error (or its end) is passed on, never
 * waited for: an event that has already happened does not happen again.
 */
export function feed<T extends Transform>(source: Readable, into: T): T {
  // The consumer may start reading later (after opening a file, say): until then an error is
  // kept on the stream (`errored`, which for-await and pipeline report) rather than thrown as
  // an unhandled 'error' event.
  into.on('error', ignore);
  if (source.errored) {
    into.destroy(source.errored);
    return into;
  }
  if (source.destroyed) {
    into.destroy(new Error('the request body was closed before it was read'));
    return into;
  }
  if (source.readableEnded) {
    into.end();
    return into;
  }
  const onSourceError = (e: Error): void => {
    into.destroy(e);
  };
  source.once('error', onSourceError);
  source.once('aborted', () => into.destroy(new Error('client closed the request')));
  into.once('error', () => {
    source.unpipe(into);
    source.off('error', onSourceError);
    source.resume();
  });
  source.pipe(into);
  return into;
}

function ignore(): void {}
