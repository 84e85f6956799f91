import { readFileSync } from 'node:fs';
import { request } from 'node:https';

export interface TlsAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  json: () => Record<string, unknown>;
}

/** A request over https that trusts the test CA `caFile` (Node's fetch cannot be given one). */
export function tlsFetch(
  base: string,
  caFile: string,
  path: string,
  init: { method?: string; headers?: Record<string, string>; body?: string | Buffer } = {},
): Promise<TlsAnswer> {
  const url = new URL(path, base);
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { method: init.method ?? 'GET', headers: init.headers, ca: readFileSync(caFile) },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            text,
            json: () => JSON.parse(text) as Record<string, unknown>,
          });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(init.body);
  });
}

/** A request over https (as `tlsFetch`) with `token` as the bearer. */
export function bearerTlsFetch(
  base: string,
  caFile: string,
  token: string,
  path: string,
  init: Parameters<typeof tlsFetch>[3] = {},
): Promise<TlsAnswer> {
  return tlsFetch(base, caFile, path, {
    ...init,
    headers: { Authorization: `Bearer ${token}`, ...(init.headers ?? {}) },
  });
}

/** Waits until `/readyz` answers 200 over https. */
export async function waitReadyTls(
  base: string,
  caFile: string,
  timeoutMs = 60_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await tlsFetch(base, caFile, '/readyz').catch(() => undefined);
    if (r?.status === 200) return;
    if (Date.now() > deadline) throw new Error(`${base} never became ready`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

/** A CLI config that gives Terraform `token` for `host` (a `credentials` block). */
export function credentialsConfig(host: string, token: string): string {
  return `credentials "${host}" {\n  token = "${token}"\n}\n`;
}
