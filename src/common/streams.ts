import type { Readable, Transform } from 'node:stream';

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
