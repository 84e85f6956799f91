import { describeFailure } from './errors';

/**
 * Wraps a command's action: any failure becomes one line `statehouse: <message>` on stderr
 * and the exit code (1, or 2 for usage errors). Nothing is thrown past it.
 */
export function handled<A extends unknown[]>(
  fn: (...args: A) => Promise<void>,
): (...args: A) => Promise<void> {
  return async (...args: A) => {
    try {
      await fn(...args);
    } catch (e) {
      const { message, exitCode } = describeFailure(e);
      process.stderr.write(`statehouse: ${message.replace(/\s*\n\s*/g, ' ')}\n`);
      process.exitCode = exitCode;
    }
  };
}
