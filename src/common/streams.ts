import type { Readable, Transform } from 'node:stream';

/**
 * Pipes a request body into a transform without ever destroying the request: when the
 * transform fails (body too large, not a state), the rest of the body is drained so the
 * connection can still carry the error answer. A failing source (client gone) fails the
 * transform, so whoever consumes it sees the error.
 */
export function feed<T extends Transform>(source: Readable, into: T): T {
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
