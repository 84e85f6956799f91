import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import { freshServerEnv } from './database';
import { freePort } from './ports';
import { RunningServer, spawnServer } from './server';
import { caAndServerCertificate } from './tls';

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

/** A server serving its own TLS, as the TFE door needs, and how to reach and stop it. */
export interface TlsServer {
  server: RunningServer;
  /** The test CA's certificate file (for SSL_CERT_FILE and `tlsFetch`). */
  ca: string;
  /** `127.0.0.1:PORT`: the hostname Terraform is given. */
  host: string;
  /** `https://127.0.0.1:PORT`, also its STATEHOUSE_PUBLIC_URL. */
  base: string;
  stop: () => Promise<void>;
}

/**
 * Starts a server on a fresh database with a certificate for 127.0.0.1 from a test CA written
 * into `dir`, and waits until it is ready over https. `env` is given the base URL first (a test
 * OpenID provider must know the server's callback before the server starts).
 */
export async function startTlsServer(
  dir: string,
  env: (base: string) => Record<string, string> | Promise<Record<string, string>> = () => ({}),
): Promise<TlsServer> {
  const certs = caAndServerCertificate(dir);
  const port = await freePort();
  const host = `127.0.0.1:${port}`;
  const base = `https://${host}`;
  const extra = await env(base);
  const fresh = await freshServerEnv();
  let server: RunningServer;
  try {
    server = await spawnServer({
      ...fresh.env,
      PORT: String(port),
      STATEHOUSE_TLS_CERT_FILE: certs.cert,
      STATEHOUSE_TLS_KEY_FILE: certs.key,
      STATEHOUSE_PUBLIC_URL: base,
      ...extra,
    });
  } catch (e) {
    await fresh.cleanup();
    throw e;
  }
  await waitReadyTls(base, certs.ca);
  return {
    server,
    ca: certs.ca,
    host,
    base,
    stop: async () => {
      await server.stop();
      await fresh.cleanup();
    },
  };
}
