/**
 * Start-up pieces shared by the server and the command that runs it: the error an operator can
 * act on (reported as one line, no stack), and notices held back until the server listens.
 */

/** The server cannot start for a reason the operator can fix; the message says which. */
export class StartupError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StartupError';
  }
}

const held: string[] = [];

/**
 * Keeps `text` (for stderr) until start-up is over, so that it is the last thing printed and
 * does not scroll away among the start-up lines. Printed also when the start fails.
 */
export function holdUntilStarted(text: string): void {
  held.push(text);
}

/** Prints (once) what was held back. */
export function printHeldNotices(
  write: (text: string) => void = (t) => process.stderr.write(t),
): void {
  for (const text of held.splice(0)) write(text);
}

/** A stop signal arrived while the server was still waiting to start (it stops cleanly). */
export class StartAborted extends Error {
  constructor(readonly signal: string) {
    super(`${signal} while waiting to start`);
    this.name = 'StartAborted';
  }
}
