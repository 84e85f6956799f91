import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import { freshServerEnv } from '../support/database';
import { runCli, spawnServer } from '../support/server';

describe('starting the server', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const c of cleanups) await c();
  });
  const fresh = async () => {
    const f = await freshServerEnv();
    cleanups.push(f.cleanup);
    return f;
  };

  it('a bad configuration stops the start, naming every bad variable', async () => {
    const { env } = await fresh();
    const r = await runCli(['serve'], {
      ...env,
      PORT: 'eighty',
      STATEHOUSE_STORAGE: 'nfs',
      STATEHOUSE_MAX_VERSIONS: '-1',
      STATEHOUSE_BOOTSTRAP_TOKEN: 'short',
    });
    expect(r.code).toBe(2);
    for (const name of [
      'PORT',
      'STATEHOUSE_STORAGE',
      'STATEHOUSE_MAX_VERSIONS',
      'STATEHOUSE_BOOTSTRAP_TOKEN',
    ]) {
      expect(r.output).toContain(name);
    }
    expect(r.output).toContain('fs, s3, postgres, memory');
    expect(r.output).not.toContain('short');
  });

  it('the memory blob driver is refused outside tests', async () => {
    const { env } = await fresh();
    const r = await runCli(['serve'], { ...env, STATEHOUSE_STORAGE: 'memory' });
    expect(r.code).toBe(2);
    expect(r.output).toMatch(/STATEHOUSE_STORAGE=memory is for tests only/);
  });

  it('without a configured token, the first start generates one, prints it once, and it works', async () => {
    const { env } = await fresh();
    const first = await spawnServer({ ...env, STATEHOUSE_BOOTSTRAP_TOKEN: '' });
    const printed = /\b(shb_[A-Za-z0-9_-]{43})\b/.exec(first.output());
    expect(printed).not.toBeNull();
    const token = printed![1];
    const ok = await fetch(`${first.url}/v1/units`, {
      headers: { Authorization: `Bearer ${token}` },
    });
    expect(ok.status).toBe(200);
    const bad = await fetch(`${first.url}/v1/units`, {
      headers: { Authorization: `Bearer ${token}x` },
    });
    expect(bad.status).toBe(401);
    // Printed once: the structured log never repeats it, even after it was used.
    expect(first.output().split(token).length - 1).toBe(1);
    await first.stop();

    const second = await spawnServer({ ...env, STATEHOUSE_BOOTSTRAP_TOKEN: '' });
    expect(second.output()).not.toContain('shb_');
    const again = await fetch(`${second.url}/v1/units`, {
      headers: { Authorization: `Bearer ${token}` },
    });
    expect(again.status).toBe(200);
    // An admin can disable it for good.
    const del = await fetch(`${second.url}/v1/auth/bootstrap`, {
      method: 'DELETE',
      headers: { Authorization: `Bearer ${token}` },
    });
    expect(del.status).toBe(204);
    const after = await fetch(`${second.url}/v1/units`, {
      headers: { Authorization: `Bearer ${token}` },
    });
    expect(after.status).toBe(401);
    await second.stop();
  });

  it('every use of the bootstrap token is logged as a security event, without the token', async () => {
    const { env } = await fresh();
    const s = await spawnServer(env);
    await fetch(`${s.url}/v1/units`, { headers: s.auth });
    await s.stop();
    const events = s
      .output()
      .split('\n')
      .filter((l) => l.includes('"auth.bootstrap_token_used"'));
    expect(events.length).toBeGreaterThanOrEqual(1);
    expect(JSON.parse(events[0])).toMatchObject({
      audit: { type: 'auth.bootstrap_token_used', actor: 'bootstrap-admin' },
    });
    expect(s.output()).not.toContain(s.token);
  });

  it('serves https directly with STATEHOUSE_TLS_CERT_FILE and STATEHOUSE_TLS_KEY_FILE', async () => {
    const { env, dataDir } = await fresh();
    const key = join(dataDir, 'tls.key');
    const cert = join(dataDir, 'tls.crt');
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-keyout',
        key,
        '-out',
        cert,
        '-days',
        '1',
        '-subj',
        '/CN=127.0.0.1',
        '-addext',
        'subjectAltName=IP:127.0.0.1,DNS:localhost',
      ],
      { stdio: 'ignore' },
    );
    const s = await spawnServer({
      ...env,
      STATEHOUSE_TLS_CERT_FILE: cert,
      STATEHOUSE_TLS_KEY_FILE: key,
    });
    try {
      expect(s.url).toMatch(/^https:/);
      const status = await new Promise<number>((resolve, reject) => {
        const req = httpsRequest(
          `${s.url}/v1/units`,
          { ca: readFileSync(cert), headers: s.auth },
          (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          },
        );
        req.on('error', reject);
        req.end();
      });
      expect(status).toBe(200);
    } finally {
      await s.stop();
    }
  });

  it('`statehouse migrate --check` finds entities and migrations in agreement', async () => {
    const { env } = await fresh();
    const r = await runCli(['migrate', '--check'], env);
    expect(r.output).toContain('entities and migrations agree');
    expect(r.code).toBe(0);
  });
});
