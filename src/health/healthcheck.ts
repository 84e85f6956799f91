import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { TLSSocket } from 'node:tls';
import { AppConfig, loadConfig } from '../config/config';

/**
 * The container image's HEALTHCHECK (`node dist/src/health/healthcheck.js`): asks this
 * container's own server for `/healthz` and exits 0 when it answers 200, 1 otherwise, printing
 * one line (Docker keeps it in `docker inspect`). It reads the settings the server reads, with
 * the server's own parser, so port, address and TLS cannot disagree with what is listening.
 *
 * With TLS on, the certificate usually names the public host, not 127.0.0.1, so ordinary
 * hostname verification would fail; turning verification off would accept anyone. Instead the
 * probe pins the certificate: the answer counts only when the peer presents exactly the
 * configured certificate (STATEHOUSE_TLS_CERT_FILE), which proves it holds the matching key.
 * Nothing secret is sent (`/healthz` takes no credentials).
 */

export interface ProbeTarget {
  url: string;
  /** DER of the certificate the server must present (TLS only). */
  pinnedCertificate?: Buffer;
}

export const PROBE_TIMEOUT_MS = 4000;

/** Where this container's server listens, as seen from inside the container. */
export function probeTarget(
  config: Pick<AppConfig, 'port' | 'host' | 'tls'>,
  readFile: (path: string) => Buffer = readFileSync,
): ProbeTarget {
  if (config.port === 0) throw new Error('PORT=0 (a random port) cannot be probed');
  const host = config.host === '0.0.0.0' ? '127.0.0.1' : config.host === '::' ? '::1' : config.host;
  const authority = `${host.includes(':') ? `[${host}]` : host}:${config.port}`;
  if (!config.tls) return { url: `http://${authority}/healthz` };
  const pem = readFile(config.tls.certFile);
  return {
    url: `https://${authority}/healthz`,
    pinnedCertificate: new X509Certificate(pem).raw,
  };
}

/** Resolves with a one-line verdict; `healthy` only for a 200 from the expected server. */
export function probe(
  target: ProbeTarget,
  timeoutMs = PROBE_TIMEOUT_MS,
): Promise<{ healthy: boolean; detail: string }> {
  return new Promise((resolve) => {
    const tls = target.pinnedCertificate !== undefined;
    const options = { method: 'GET', timeout: timeoutMs, headers: { Connection: 'close' } };
    const req = tls
      ? httpsRequest(target.url, { ...options, rejectUnauthorized: false })
      : httpRequest(target.url, options);
    req.once('response', (res) => {
      res.resume();
      if (tls) {
        const presented = (res.socket as TLSSocket).getPeerCertificate().raw;
        if (!presented || !presented.equals(target.pinnedCertificate as Buffer)) {
          resolve({
            healthy: false,
            detail: `${target.url}: the server did not present the configured certificate`,
          });
          return;
        }
      }
      resolve({
        healthy: res.statusCode === 200,
        detail: `${target.url} answered ${res.statusCode}`,
      });
    });
    req.once('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.once('error', (e) => resolve({ healthy: false, detail: `${target.url}: ${e.message}` }));
    req.end();
  });
}

async function main(): Promise<number> {
  let target: ProbeTarget;
  try {
    target = probeTarget(loadConfig());
  } catch (e) {
    process.stdout.write(`unhealthy: ${(e as Error).message.split('\n').join(' ')}\n`);
    return 1;
  }
  const { healthy, detail } = await probe(target);
  process.stdout.write(`${healthy ? 'healthy' : 'unhealthy'}: ${detail}\n`);
  return healthy ? 0 : 1;
}

if (require.main === module) {
  void main().then((code) => process.exit(code));
}
