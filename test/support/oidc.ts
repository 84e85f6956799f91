import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { ROOT } from './paths';
import { stopChild } from './processes';

export interface TestOidcProvider {
  issuer: string;
  /** An ID token signed with the provider's real key, with these claims (iss/iat/exp defaulted). */
  mint: (claims: Record<string, unknown>, header?: Record<string, unknown>) => Promise<string>;
  stop: () => Promise<void>;
}

/**
 * Starts test/support/oidc-provider.mjs (the `oidc-provider` package) in its own process; with
 * `webRedirects`, its `statehouse-web` client accepts those redirect URIs.
 */
export async function startOidcProvider(webRedirects: string[] = []): Promise<TestOidcProvider> {
  const proc = spawn(
    process.execPath,
    [join(ROOT, 'test/support/oidc-provider.mjs'), '0', webRedirects.join(',')],
    { stdio: ['pipe', 'pipe', 'pipe'] },
  );
  let out = '';
  const issuer = await new Promise<string>((resolve, reject) => {
    proc.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const line = out.split('\n').find((l) => l.startsWith('{"issuer"'));
      if (line) resolve((JSON.parse(line) as { issuer: string }).issuer);
    });
    proc.stderr.on('data', (d: Buffer) => (out += d.toString()));
    proc.once('exit', (code) => reject(new Error(`OpenID provider exited (${code}): ${out}`)));
  });
  return {
    issuer,
    mint: async (claims, header) => {
      const res = await fetch(`${issuer}/test/mint`, {
        method: 'POST',
        body: JSON.stringify({ claims, header }),
      });
      return ((await res.json()) as { id_token: string }).id_token;
    },
    stop: () => stopChild(proc),
  };
}
