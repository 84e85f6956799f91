import { execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { freshServerEnvs, ON_POSTGRES } from '../support/database';
import { CLI, TEST_TOKEN } from '../support/paths';
import { childEnv, NODE, runCli, spawnServer } from '../support/server';

describe('starting the server', () => {
  const fresh = freshServerEnvs();

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

  describe('what start-up prints', () => {
    /** `statehouse serve` on a pseudo-terminal (util-linux `script`), stopped with Ctrl-C. */
    async function serveOnTerminal(
      env: Record<string, string>,
    ): Promise<{ output: string; code: number | null }> {
      const proc = spawn('script', ['-qfec', `exec '${NODE}' '${CLI}' serve`, '/dev/null'], {
        env: {
          ...childEnv(),
          NODE_ENV: 'production',
          PORT: '0',
          STATEHOUSE_HOST: '127.0.0.1',
          STATEHOUSE_BOOTSTRAP_TOKEN: TEST_TOKEN,
          ...env,
        },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      let output = '';
      proc.stdout.on('data', (d: Buffer) => (output += d.toString()));
      proc.stderr.on('data', (d: Buffer) => (output += d.toString()));
      const exited = new Promise<number | null>((r) => proc.once('exit', (c) => r(c)));
      const deadline = Date.now() + 60_000;
      while (!/listening on/.test(output)) {
        if (proc.exitCode !== null) break;
        if (Date.now() > deadline) proc.kill('SIGKILL');
        await new Promise((r) => setTimeout(r, 50));
      }
      await new Promise((r) => setTimeout(r, 500)); // whatever follows "listening on"
      proc.stdin.write('\x03'); // Ctrl-C: SIGINT to the terminal's foreground process
      return { code: await exited, output: output.replace(/\r\n/g, '\n') };
    }

    // time and level, as the text format begins each line
    const TEXT_LINE =
      // eslint-disable-next-line no-control-regex
      /^(\x1b\[2m)?\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}(\x1b\[0m)? (\x1b\[\d+m)?(TRACE|DEBUG|INFO |WARN |ERROR|FATAL)/;
    const logLines = (output: string): string[] =>
      output.split('\n').filter((l) => l.trim() !== '' && !/^[ =^]/.test(l));

    it('on a terminal: one readable line per event, in colour, without Nest\'s module and route lines; the bootstrap-token box comes after "listening on"; Ctrl-C stops it (130)', async () => {
      const { env } = await fresh();
      const { output, code } = await serveOnTerminal({ ...env, STATEHOUSE_BOOTSTRAP_TOKEN: '' });
      const lines = logLines(output);
      expect(lines.length).toBeGreaterThan(2);
      for (const line of lines) expect(line).toMatch(TEXT_LINE);
      expect(output).toContain('\x1b['); // colours: this is a terminal
      expect(output).not.toMatch(/^\{/m);
      expect(output).not.toMatch(/Mapped \{|dependencies initialized|Starting Nest application/);

      const listening = output.indexOf('Statehouse listening on http://127.0.0.1:');
      const box = output.indexOf('Statehouse generated a bootstrap token');
      expect(listening).toBeGreaterThan(-1);
      expect(box).toBeGreaterThan(listening);
      // Nothing but the box between "listening on" and Ctrl-C.
      const afterListening = output.slice(
        output.indexOf('\n', listening) + 1,
        output.indexOf('^C'),
      );
      expect(afterListening.trim()).toMatch(
        /^=+\n Statehouse generated a bootstrap token[\s\S]*\n=+$/,
      );

      expect(code).toBe(130);
      expect(output).toContain('stopped cleanly');
    });

    it('STATEHOUSE_LOG_FORMAT=json on a terminal: JSON lines', async () => {
      const { env } = await fresh();
      const { output } = await serveOnTerminal({ ...env, STATEHOUSE_LOG_FORMAT: 'json' });
      const lines = logLines(output.replace(/\^C/g, ''));
      expect(lines.length).toBeGreaterThan(2);
      for (const line of lines) expect(() => JSON.parse(line) as unknown).not.toThrow();
    });

    it('not on a terminal: JSON lines, no colours; each start-up line carries the time it was written', async () => {
      const { env } = await fresh();
      const s = await spawnServer(env);
      await s.stop();
      const out = s.output();
      expect(out).not.toContain('\x1b[');
      const records = out
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as { time: number; msg: string; level: number });
      const listening = records.findIndex((r) => r.msg.startsWith('Statehouse listening on'));
      expect(listening).toBeGreaterThan(0);
      const startUp = records.slice(0, listening + 1);
      for (let i = 1; i < startUp.length; i++) {
        expect(startUp[i].time).toBeGreaterThanOrEqual(startUp[i - 1].time);
      }
      // Written as they happened, not all at once when the modules were ready.
      expect(startUp[listening].time - startUp[0].time).toBeGreaterThan(20);
      expect(records.some((r) => r.msg.startsWith('Mapped {'))).toBe(false);
    });

    it("STATEHOUSE_LOG_LEVEL=debug shows Nest's route lines, at debug level", async () => {
      const { env } = await fresh();
      const s = await spawnServer({ ...env, STATEHOUSE_LOG_LEVEL: 'debug' });
      await s.stop();
      const mapped = s
        .output()
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as { msg: string; level: number })
        .filter((r) => r.msg.startsWith('Mapped {/v1/units, GET}'));
      expect(mapped).toEqual([expect.objectContaining({ level: 20 })]);
    });

    it('STATEHOUSE_LOG_FORMAT=text when not on a terminal: text lines without colours', async () => {
      const { env } = await fresh();
      const s = await spawnServer({ ...env, STATEHOUSE_LOG_FORMAT: 'text' });
      await s.stop();
      expect(s.output()).not.toContain('\x1b[');
      const lines = logLines(s.output());
      expect(lines.length).toBeGreaterThan(2);
      for (const line of lines) expect(line).toMatch(TEXT_LINE);
    });

    it('a bad STATEHOUSE_LOG_FORMAT stops the start, naming it (exit 2)', async () => {
      const { env } = await fresh();
      const r = await runCli(['serve'], { ...env, STATEHOUSE_LOG_FORMAT: 'fancy' });
      expect(r.code).toBe(2);
      expect(r.output).toContain('STATEHOUSE_LOG_FORMAT must be one of auto, json, text');
    });

    (ON_POSTGRES ? it.skip : it)(
      'a second server on the same data directory prints its one-line reason, no stack (exit 1; embedded only)',
      async () => {
        const { env, dataDir } = await fresh();
        const first = await spawnServer(env);
        try {
          const second = await runCli(['serve'], {
            ...env,
            PORT: '0',
            STATEHOUSE_HOST: '127.0.0.1',
            STATEHOUSE_BOOTSTRAP_TOKEN: TEST_TOKEN,
          });
          expect(second.code).toBe(1);
          const lines = second.output.trim().split('\n');
          expect(lines).toHaveLength(1);
          expect(lines[0]).toContain(
            `statehouse: the data directory ${dataDir} is in use by another Statehouse process (pid ${first.proc.pid} on host `,
          );
          expect(lines[0]).toMatch(
            /\): the embedded database serves one process — use DATABASE_URL for several replicas$/,
          );
        } finally {
          await first.stop();
        }
      },
    );

    it('an unreachable DATABASE_URL: one line naming it, without its password (exit 1)', async () => {
      const closed = createServer();
      await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
      const port = (closed.address() as { port: number }).port;
      await new Promise((r) => closed.close(r)); // nothing listens there now
      const r = await runCli(['serve'], {
        DATABASE_URL: `postgres://statehouse:pw-not-to-print@127.0.0.1:${port}/statehouse`,
        PORT: '0',
        STATEHOUSE_BOOTSTRAP_TOKEN: TEST_TOKEN,
      });
      expect(r.code).toBe(1);
      expect(r.output).toContain(
        `statehouse: cannot use the database of DATABASE_URL: connect ECONNREFUSED 127.0.0.1:${port}\n`,
      );
      expect(r.output).not.toMatch(/\n\s+at /);
      expect(r.output).not.toContain('pw-not-to-print');
    });

    it('an unreadable TLS file: one line naming the setting (exit 1)', async () => {
      const { env, dataDir } = await fresh();
      const r = await runCli(['serve'], {
        ...env,
        STATEHOUSE_TLS_CERT_FILE: join(dataDir, 'missing.crt'),
        STATEHOUSE_TLS_KEY_FILE: join(dataDir, 'missing.key'),
        STATEHOUSE_BOOTSTRAP_TOKEN: TEST_TOKEN,
      });
      expect(r.code).toBe(1);
      expect(r.output.trim()).toMatch(
        /^statehouse: STATEHOUSE_TLS_CERT_FILE cannot be read: ENOENT: no such file or directory, open '[^']+missing\.crt'$/,
      );
    });

    it('a port in use: one line naming PORT (exit 1)', async () => {
      const { env } = await fresh();
      const taken = createServer();
      await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
      const port = (taken.address() as { port: number }).port;
      try {
        const r = await runCli(['serve'], {
          ...env,
          PORT: String(port),
          STATEHOUSE_HOST: '127.0.0.1',
          STATEHOUSE_BOOTSTRAP_TOKEN: TEST_TOKEN,
        });
        expect(r.code).toBe(1);
        expect(r.output).toContain(
          `statehouse: cannot listen on 127.0.0.1:${port}: the address is in use (PORT)\n`,
        );
        expect(r.output).not.toMatch(/\n\s+at /);
      } finally {
        await new Promise((r) => taken.close(r));
      }
    });
  });
});
