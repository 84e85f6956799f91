'use strict';
// The example nginx configuration (deploy/nginx/statehouse.conf) run for real: the ingress suite
// (test/terraform/ingress.spec.ts, through test/support/nginx.ts) and scripts/bench-proxy.mjs.
// renderExample puts this machine's addresses, ports and certificate paths into the example —
// each replacement must match exactly once, so a change of the example cannot leave them
// running something else — and startNginx runs nginx in the foreground with it inside a main
// configuration of its own (pid, logs and temporary files in one directory, one worker).
const { spawn } = require('node:child_process');
const {
  accessSync,
  chmodSync,
  constants,
  mkdirSync,
  readFileSync,
  writeFileSync,
} = require('node:fs');
const { connect } = require('node:net');
const { delimiter, join } = require('node:path');

const NGINX_EXAMPLE = join(__dirname, '..', 'deploy', 'nginx', 'statehouse.conf');
const NGINX_MISSING =
  'nginx is not installed (neither on the PATH nor /usr/sbin/nginx): the ingress suite needs ' +
  "Debian's nginx and does not skip without it — apt-get install nginx (CI=true .ci/run does)";

function executable(file) {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Debian's nginx (/usr/sbin is not on every PATH), or the one on the PATH. */
function findNginx() {
  const dirs = [...(process.env.PATH || '').split(delimiter).filter((d) => d !== ''), '/usr/sbin'];
  return dirs.map((d) => join(d, 'nginx')).find(executable);
}

/** The example with `upstreams` (two ports on 127.0.0.1), `port`, `cert`, `key` and `edits`. */
function renderExample({ port, upstreams, cert, key, edits = [] }) {
  let text = readFileSync(NGINX_EXAMPLE, 'utf8');
  const replaceOnce = (from, to) => {
    const hits = text.split(from).length - 1;
    if (hits !== 1) throw new Error(`${NGINX_EXAMPLE}: expected one "${from}", found ${hits}`);
    text = text.replace(from, () => to);
  };
  replaceOnce('server 10.0.0.11:8080;', `server 127.0.0.1:${upstreams[0]};`);
  replaceOnce('server 10.0.0.12:8080;', `server 127.0.0.1:${upstreams[1]};`);
  replaceOnce('listen 443 ssl;', `listen 127.0.0.1:${port} ssl;`);
  replaceOnce('/etc/nginx/tls/statehouse.crt', cert);
  replaceOnce('/etc/nginx/tls/statehouse.key', key);
  for (const [from, to] of edits) replaceOnce(from, to);
  return text;
}

function accepts(port) {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/** Runs nginx with `site` (an http-context file) on 127.0.0.1:`port`; resolves once it listens. */
async function startNginx(dir, port, site) {
  const nginx = findNginx();
  if (nginx === undefined) throw new Error(NGINX_MISSING);
  mkdirSync(join(dir, 'tmp'), { recursive: true });
  // Started as root, nginx's worker runs as nobody: it must reach the temporary directory.
  chmodSync(dir, 0o755);
  chmodSync(join(dir, 'tmp'), 0o777);
  writeFileSync(join(dir, 'statehouse.conf'), site);
  const temp = ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'];
  writeFileSync(
    join(dir, 'nginx.conf'),
    [
      'daemon off;',
      'worker_processes 1;',
      `pid ${join(dir, 'nginx.pid')};`,
      `error_log ${join(dir, 'error.log')} info;`,
      'events { worker_connections 512; }',
      'http {',
      "    log_format upstream '$request_method $request_uri $status $upstream_addr $upstream_status';",
      `    access_log ${join(dir, 'access.log')} upstream;`,
      ...temp.map((t) => `    ${t}_temp_path ${join(dir, 'tmp', t)};`),
      `    include ${join(dir, 'statehouse.conf')};`,
      '}',
      '',
    ].join('\n'),
  );
  const proc = spawn(
    nginx,
    ['-p', dir, '-c', join(dir, 'nginx.conf'), '-e', join(dir, 'error.log')],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  proc.stdout.on('data', (d) => (out += d.toString()));
  proc.stderr.on('data', (d) => (out += d.toString()));
  const exited = new Promise((res) => proc.once('exit', () => res()));
  const read = (f) => () => {
    try {
      return readFileSync(join(dir, f), 'utf8');
    } catch {
      return '';
    }
  };
  const deadline = Date.now() + 15_000;
  while (!(await accepts(port))) {
    if (proc.exitCode !== null) {
      throw new Error(`nginx exited with ${proc.exitCode}:\n${out}\n${read('error.log')()}`);
    }
    if (Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new Error(`nginx did not listen on ${port}:\n${out}\n${read('error.log')()}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    port,
    url: `https://127.0.0.1:${port}`,
    proc,
    accessLog: read('access.log'),
    errorLog: read('error.log'),
    stop: async () => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      await exited;
    },
  };
}

module.exports = { NGINX_EXAMPLE, NGINX_MISSING, findNginx, renderExample, startNginx };
