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
      process.stderr.write(`statehouse: ${oneLine(message)}\n`);
      process.exitCode = exitCode;
    }
  };
}

/** The message on one line: its lines trimmed and joined by a space. */
function oneLine(message: string): string {
  return message
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '')
    .join(' ');
}
