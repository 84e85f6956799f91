/**
 * The image's HEALTHCHECK probe (src/health/healthcheck.ts): where it knocks, and what it
 * believes — with TLS, only a server presenting the configured certificate, whatever host the
 * certificate names.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer as createHttpServer, Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { probe, probeTarget } from '../../src/health/healthcheck';
import { selfSignedCertificate } from '../support/tls';

async function listen(server: Server): Promise<number> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return (server.address() as AddressInfo).port;
}

describe('healthcheck probe target', () => {
  it('probes a wildcard listener through loopback, and a specific address on itself', () => {
    expect(probeTarget({ port: 8080, host: '0.0.0.0', tls: undefined })).toEqual({
      url: 'http://127.0.0.1:8080/healthz',
    });
    expect(probeTarget({ port: 8080, host: '::', tls: undefined }).url).toBe(
      'http://[::1]:8080/healthz',
    );
    expect(probeTarget({ port: 9000, host: '10.1.2.3', tls: undefined }).url).toBe(
      'http://10.1.2.3:9000/healthz',
    );
  });

  it('refuses PORT=0, which no probe can find', () => {
    expect(() => probeTarget({ port: 0, host: '0.0.0.0', tls: undefined })).toThrow(/PORT=0/);
  });
});

describe('healthcheck probe over TLS', () => {
  let dir: string;
  let servers: Server[];
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'statehouse-probe-'));
  });
  beforeEach(() => {
    servers = [];
  });
  afterEach(async () => {
    for (const s of servers) await new Promise((r) => s.close(r));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  async function httpsServer(files: { cert: string; key: string }, status = 200) {
    const server = createHttpsServer(
      { cert: readFileSync(files.cert), key: readFileSync(files.key) },
      (_req, res) => res.writeHead(status).end('{"status":"ok"}'),
    );
    servers.push(server);
    return listen(server);
  }

  it('is healthy when the server presents the configured certificate, though it names another host', async () => {
    const own = selfSignedCertificate(dir, 'own', 'statehouse.example.com');
    const port = await httpsServer(own);
    const target = probeTarget({
      port,
      host: '0.0.0.0',
      tls: { certFile: own.cert, keyFile: own.key },
    });
    expect(target.url).toBe(`https://127.0.0.1:${port}/healthz`);
    expect(await probe(target)).toEqual({ healthy: true, detail: `${target.url} answered 200` });
  });

  it('is unhealthy when the server answering 200 presents any other certificate', async () => {
    const own = selfSignedCertificate(dir, 'own2', 'statehouse.example.com');
    const other = selfSignedCertificate(dir, 'other', 'statehouse.example.com');
    const port = await httpsServer(other);
    const target = probeTarget({
      port,
      host: '127.0.0.1',
      tls: { certFile: own.cert, keyFile: own.key },
    });
    expect(await probe(target)).toEqual({
      healthy: false,
      detail: `${target.url}: the server did not present the configured certificate`,
    });
  });

  it('is unhealthy on a 503, on plain http against a TLS listener, and with no listener', async () => {
    const own = selfSignedCertificate(dir, 'own3', 'statehouse.example.com');
    const tls = { certFile: own.cert, keyFile: own.key };
    const down = await httpsServer(own, 503);
    expect(await probe(probeTarget({ port: down, host: '127.0.0.1', tls }))).toMatchObject({
      healthy: false,
      detail: expect.stringMatching(/answered 503$/),
    });
    const up = await httpsServer(own);
    expect(
      (await probe(probeTarget({ port: up, host: '127.0.0.1', tls: undefined }))).healthy,
    ).toBe(false);
    const closed = createHttpServer();
    const gone = await listen(closed);
    await new Promise((r) => closed.close(r));
    expect(await probe(probeTarget({ port: gone, host: '127.0.0.1', tls }))).toMatchObject({
      healthy: false,
      detail: expect.stringMatching(/ECONNREFUSED/),
    });
  });
});
