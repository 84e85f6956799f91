/** An error the CLI reports as one line, `statehouse: <message>`, with its exit code. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

/** A mistake in how the command was called (exit code 2). */
export class UsageError extends CliError {
  constructor(message: string) {
    super(message, 2);
    this.name = 'UsageError';
  }
}

/** One line for anything thrown: the message of our own errors, the cause of network ones. */
export function describeFailure(e: unknown): { message: string; exitCode: number } {
  if (e instanceof CliError) return { message: e.message, exitCode: e.exitCode };
  if (e instanceof Error) return { message: e.message || e.name, exitCode: 1 };
  return { message: String(e), exitCode: 1 };
}

/**
 * Node's fetch throws `TypeError('fetch failed')` with the reason in `cause`
 * (`ECONNREFUSED`, `ENOTFOUND`, a TLS error …): name the reason.
 */
export function networkReason(e: unknown): string {
  if (!(e instanceof Error)) return String(e);
  if (e.name === 'TimeoutError' || e.name === 'AbortError') return 'no answer in time';
  const cause: unknown = e.cause;
  if (cause instanceof Error) {
    const code = (cause as NodeJS.ErrnoException).code;
    if (cause instanceof AggregateError && cause.errors.length > 0) {
      return networkReason(new Error(e.message, { cause: cause.errors[0] as unknown }));
    }
    return code && !cause.message.includes(code) ? `${code}: ${cause.message}` : cause.message;
  }
  return e.message;
}
