import { CredsCache } from './creds-cache';
import { resolveServer } from './session';

/**
 * The `--server` value of a command line that is exactly `creds --json` (in any order after
 * `creds`, with at most one `--server URL` or `--server=URL` anywhere), `null` for such a line
 * without `--server`; undefined for any other line, which the full CLI parses (and refuses, if
 * it is wrong) as always.
 */
export function credsJsonServer(args: readonly string[]): string | null | undefined {
  let creds = false;
  let json = false;
  let server: string | null = null;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === 'creds' && !creds) creds = true;
    else if (arg === '--json' && creds && !json) json = true;
    else if ((arg === '--server' || arg.startsWith('--server=')) && server === null) {
      const value = arg === '--server' ? args[++i] : arg.slice('--server='.length);
      if (value === undefined || value === '' || value.startsWith('-')) return undefined;
      server = value;
    } else return undefined;
  }
  return creds && json ? server : undefined;
}

/**
 * Answers `statehouse creds --json` from the credentials cache: true when it printed them.
 * Loads only the cache, the credentials file and the server rule shared with the full CLI;
 * anything unexpected (a bad URL, an unreadable credentials file) is left to the full CLI,
 * which reports it as it always did.
 */
export function answerCredsFromCache(args: readonly string[]): boolean {
  const given = credsJsonServer(args);
  if (given === undefined) return false;
  let text: string;
  try {
    const creds = new CredsCache().get(resolveServer(given ?? undefined));
    if (!creds) return false;
    text = `${JSON.stringify(creds, null, 2)}\n`;
  } catch {
    return false;
  }
  process.stdout.write(text);
  return true;
}
