import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { format, inspect } from 'node:util';
import { ConfigError, isLoopback, loadConfig } from '../../src/config/config';
import { Secret } from '../../src/config/secret';

const TOKEN = 'a'.repeat(16) + 'B'.repeat(16); // exactly 32 characters
const DB_PASSWORD = 'hunter2-very-secret-pw';
const DB_URL = `postgres://statehouse:${DB_PASSWORD}@db.internal:5432/statehouse`;

/** The ConfigError `env` produces; fails the test when loadConfig accepts it. */
/** A temporary directory for the describe block's files: made before its tests, removed after. */
function onTempDir(made: (dir: string) => void): void {
  let dir: string | undefined;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'statehouse-config-'));
    made(dir);
  });
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });
}

function configError(env: Record<string, string | undefined>): ConfigError {
  try {
    loadConfig(env);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return e as ConfigError;
  }
  throw new Error(`expected loadConfig to refuse ${JSON.stringify(Object.keys(env))}`);
}

describe('loadConfig defaults', () => {
  it('listens on port 8080 and 0.0.0.0 when nothing is set', () => {
    const config = loadConfig({});
    expect(config.port).toBe(8080);
    expect(config.host).toBe('0.0.0.0');
  });

  it('uses the embedded database with file blobs under ./data when DATABASE_URL is unset', () => {
    const config = loadConfig({});
    expect(config.databaseUrl).toBeUndefined();
    expect(config.storage.driver).toBe('fs');
    expect(config.dataDir).toBe(resolve('./data'));
    expect(config.storage.fsDir).toBe(resolve('./data/blobs'));
    expect(config.storage.s3).toBeUndefined();
  });

  it('stores blobs in postgres by default when DATABASE_URL is set', () => {
    const config = loadConfig({ DATABASE_URL: DB_URL });
    expect(config.storage.driver).toBe('postgres');
    expect(config.databaseUrl?.reveal()).toBe(DB_URL);
  });

  it('keeps fs storage with DATABASE_URL only when it is chosen explicitly', () => {
    const config = loadConfig({ DATABASE_URL: DB_URL, STATEHOUSE_STORAGE: 'fs' });
    expect(config.storage.driver).toBe('fs');
  });

  it('accepts 512 MiB states by default', () => {
    expect(loadConfig({}).maxStateBytes).toBe(512 * 1024 * 1024);
  });

  it('keeps every version by default', () => {
    expect(loadConfig({}).maxVersions).toBe(0);
  });

  it('derives the public URL from the port', () => {
    expect(loadConfig({}).publicUrl).toBe('http://localhost:8080');
    expect(loadConfig({ PORT: '9123' }).publicUrl).toBe('http://localhost:9123');
  });

  it('derives an https public URL when TLS files are set', () => {
    const config = loadConfig({
      PORT: '8443',
      STATEHOUSE_TLS_CERT_FILE: 'certs/server.crt',
      STATEHOUSE_TLS_KEY_FILE: 'certs/server.key',
    });
    expect(config.publicUrl).toBe('https://localhost:8443');
    expect(config.tls).toEqual({
      certFile: resolve('certs/server.crt'),
      keyFile: resolve('certs/server.key'),
    });
  });

  it('uses an explicit public URL without its trailing slash', () => {
    const config = loadConfig({ STATEHOUSE_PUBLIC_URL: 'https://state.example.com/' });
    expect(config.publicUrl).toBe('https://state.example.com');
  });

  it('has authentication enabled, no bootstrap token, no trusted proxies and no warnings', () => {
    const config = loadConfig({});
    expect(config.authDisabled).toBe(false);
    expect(config.bootstrapToken).toBeUndefined();
    expect(config.trustedProxies).toEqual([]);
    expect(config.tls).toBeUndefined();
    expect(config.logLevel).toBe('info');
    expect(config.warnings).toEqual([]);
  });
});

describe('loadConfig problem reporting', () => {
  it('reports every bad variable at once, naming each', () => {
    const err = configError({
      PORT: 'eighty',
      STATEHOUSE_STORAGE: 'floppy',
      STATEHOUSE_BOOTSTRAP_TOKEN: 'too-short',
    });
    expect(err.problems).toHaveLength(3);
    expect(err.message).toContain('PORT');
    expect(err.message).toContain('STATEHOUSE_STORAGE');
    expect(err.message).toContain('STATEHOUSE_BOOTSTRAP_TOKEN');
    expect(err.name).toBe('ConfigError');
  });

  it('lists each problem on its own line of the message', () => {
    const err = configError({ PORT: '-1', STATEHOUSE_MAX_VERSIONS: 'many' });
    expect(err.message.split('\n').filter((l) => l.startsWith('  - '))).toHaveLength(2);
  });

  it.each(['eighty', '-1', '65536', '80.5'])('refuses PORT=%s', (port) => {
    expect(configError({ PORT: port }).message).toMatch(/PORT must be an integer from 0 to 65535/);
  });

  it('names the valid drivers when STATEHOUSE_STORAGE is unknown', () => {
    const err = configError({ STATEHOUSE_STORAGE: 'floppy' });
    expect(err.message).toContain('STATEHOUSE_STORAGE');
    for (const driver of ['fs', 's3', 'postgres', 'memory']) {
      expect(err.message).toContain(driver);
    }
    expect(err.message).toContain('floppy');
  });

  it.each([undefined, 'production', 'development'])(
    'refuses memory storage when NODE_ENV is %s',
    (nodeEnv) => {
      const err = configError({ STATEHOUSE_STORAGE: 'memory', NODE_ENV: nodeEnv });
      expect(err.message).toMatch(/STATEHOUSE_STORAGE=memory is for tests only/);
    },
  );

  it('accepts memory storage when NODE_ENV=test', () => {
    expect(loadConfig({ STATEHOUSE_STORAGE: 'memory', NODE_ENV: 'test' }).storage.driver).toBe(
      'memory',
    );
  });

  it('requires a bucket for the s3 driver', () => {
    const err = configError({ STATEHOUSE_STORAGE: 's3' });
    expect(err.message).toContain('STATEHOUSE_STORAGE_S3_BUCKET');
  });

  it('reads the s3 driver settings', () => {
    const config = loadConfig({
      STATEHOUSE_STORAGE: 's3',
      STATEHOUSE_STORAGE_S3_BUCKET: 'blobs',
      STATEHOUSE_STORAGE_S3_PREFIX: '/statehouse/prod/',
      STATEHOUSE_STORAGE_S3_ENDPOINT: 'http://minio:9000/',
      STATEHOUSE_STORAGE_S3_FORCE_PATH_STYLE: 'true',
    });
    expect(config.storage.s3).toEqual({
      bucket: 'blobs',
      prefix: 'statehouse/prod',
      region: 'us-east-1',
      endpoint: 'http://minio:9000',
      forcePathStyle: true,
    });
  });

  it('refuses a log level it does not know', () => {
    expect(configError({ STATEHOUSE_LOG_LEVEL: 'loud' }).message).toContain('STATEHOUSE_LOG_LEVEL');
  });

  it('reads the log format (auto by default; json, text) and refuses others', () => {
    expect(loadConfig({}).logFormat).toBe('auto');
    expect(loadConfig({ STATEHOUSE_LOG_FORMAT: 'JSON' }).logFormat).toBe('json');
    expect(loadConfig({ STATEHOUSE_LOG_FORMAT: 'text' }).logFormat).toBe('text');
    expect(configError({ STATEHOUSE_LOG_FORMAT: 'pretty' }).problems).toEqual([
      'STATEHOUSE_LOG_FORMAT must be one of auto, json, text (got "pretty")',
    ]);
  });

  it('turns colours off when NO_COLOR is set to anything', () => {
    expect(loadConfig({}).logColor).toBe(true);
    expect(loadConfig({ NO_COLOR: '' }).logColor).toBe(true);
    expect(loadConfig({ NO_COLOR: '1' }).logColor).toBe(false);
  });

  it('gives requests in flight 25 s to finish on a signal unless STATEHOUSE_SHUTDOWN_TIMEOUT says otherwise', () => {
    expect(loadConfig({}).shutdownTimeoutSeconds).toBe(25);
    expect(loadConfig({ STATEHOUSE_SHUTDOWN_TIMEOUT: '2m' }).shutdownTimeoutSeconds).toBe(120);
    expect(configError({ STATEHOUSE_SHUTDOWN_TIMEOUT: '0' }).message).toContain(
      'STATEHOUSE_SHUTDOWN_TIMEOUT',
    );
  });

  it('keeps answering new connections for 2 s of the drain unless STATEHOUSE_SHUTDOWN_GRACE says otherwise; never past the timeout', () => {
    expect(loadConfig({}).shutdownGraceSeconds).toBe(2);
    expect(loadConfig({ STATEHOUSE_SHUTDOWN_GRACE: '0' }).shutdownGraceSeconds).toBe(0);
    expect(loadConfig({ STATEHOUSE_SHUTDOWN_GRACE: '10s' }).shutdownGraceSeconds).toBe(10);
    // The default fits itself into a shorter drain; a setting longer than it is refused.
    expect(loadConfig({ STATEHOUSE_SHUTDOWN_TIMEOUT: '1s' }).shutdownGraceSeconds).toBe(1);
    expect(
      configError({ STATEHOUSE_SHUTDOWN_TIMEOUT: '5s', STATEHOUSE_SHUTDOWN_GRACE: '10s' }).problems,
    ).toEqual([
      'STATEHOUSE_SHUTDOWN_GRACE (10s) must not be longer than STATEHOUSE_SHUTDOWN_TIMEOUT (5s): the grace is part of the drain',
    ]);
    expect(configError({ STATEHOUSE_SHUTDOWN_GRACE: 'soon' }).message).toContain(
      'STATEHOUSE_SHUTDOWN_GRACE',
    );
    expect(loadConfig({ STATEHOUSE_SHUTDOWN_GRACE: '1s' }).warnings).toEqual([]);
  });

  it('serves the S3 door on a listener of its own only when STATEHOUSE_S3_PORT is set, on another port than PORT', () => {
    expect(loadConfig({}).s3Door.port).toBeUndefined();
    expect(loadConfig({ STATEHOUSE_S3_PORT: '9000' }).s3Door.port).toBe(9000);
    expect(loadConfig({ PORT: '0', STATEHOUSE_S3_PORT: '0' }).s3Door.port).toBe(0);
    expect(configError({ STATEHOUSE_S3_PORT: 'nine' }).problems).toEqual([
      'STATEHOUSE_S3_PORT must be an integer from 0 to 65535 (got "nine")',
    ]);
    expect(configError({ STATEHOUSE_S3_PORT: '70000' }).message).toContain('STATEHOUSE_S3_PORT');
    expect(configError({ PORT: '9000', STATEHOUSE_S3_PORT: '9000' }).problems).toEqual([
      'STATEHOUSE_S3_PORT must differ from PORT (both 9000): it is a listener of its own',
    ]);
    expect(loadConfig({ STATEHOUSE_S3_PORT: '9000' }).warnings).toEqual([]);
  });

  it('refuses a public URL that is not http(s)', () => {
    expect(configError({ STATEHOUSE_PUBLIC_URL: 'ftp://state.example.com' }).message).toContain(
      'STATEHOUSE_PUBLIC_URL',
    );
  });
});

describe('DATABASE_URL secrecy', () => {
  it('refuses a non-postgres DATABASE_URL without echoing its password', () => {
    const err = configError({ DATABASE_URL: `mysql://root:${DB_PASSWORD}@db/statehouse` });
    expect(err.message).toContain('DATABASE_URL');
    expect(err.message).not.toContain(DB_PASSWORD);
    expect(err.problems.join('\n')).not.toContain(DB_PASSWORD);
  });

  it('refuses an unparseable DATABASE_URL without echoing it', () => {
    const err = configError({ DATABASE_URL: `not a url but ${DB_PASSWORD}` });
    expect(err.message).toContain('DATABASE_URL');
    expect(err.message).not.toContain(DB_PASSWORD);
  });

  it('never puts a valid DATABASE_URL password into the error of another problem', () => {
    const err = configError({
      DATABASE_URL: DB_URL,
      STATEHOUSE_AUTH_DISABLE: 'true',
      STATEHOUSE_HOST: '127.0.0.1',
    });
    expect(err.message).toContain('DATABASE_URL');
    expect(err.message).not.toContain(DB_PASSWORD);
  });

  it('holds DATABASE_URL as a Secret that serialises without the password', () => {
    const config = loadConfig({ DATABASE_URL: DB_URL });
    expect(config.databaseUrl).toBeInstanceOf(Secret);
    expect(JSON.stringify(config)).not.toContain(DB_PASSWORD);
    expect(inspect(config, { depth: Infinity })).not.toContain(DB_PASSWORD);
  });
});

describe('bootstrap token', () => {
  let dir: string;
  onTempDir((d) => (dir = d));

  it('accepts a token of exactly 32 characters', () => {
    expect(loadConfig({ STATEHOUSE_BOOTSTRAP_TOKEN: TOKEN }).bootstrapToken?.reveal()).toBe(TOKEN);
  });

  it('refuses a token shorter than 32 characters without echoing it', () => {
    const short = TOKEN.slice(1);
    const err = configError({ STATEHOUSE_BOOTSTRAP_TOKEN: short });
    expect(err.message).toMatch(/STATEHOUSE_BOOTSTRAP_TOKEN must be at least 32 characters/);
    expect(err.message).not.toContain(short);
  });

  it('refuses a token with whitespace inside', () => {
    const err = configError({ STATEHOUSE_BOOTSTRAP_TOKEN: `${TOKEN} ${TOKEN}` });
    expect(err.message).toMatch(/STATEHOUSE_BOOTSTRAP_TOKEN must not contain whitespace/);
    expect(err.message).not.toContain(TOKEN);
  });

  it('reads the token from STATEHOUSE_BOOTSTRAP_TOKEN_FILE, without its trailing newline', () => {
    const file = join(dir, 'token');
    writeFileSync(file, `${TOKEN}\n`);
    const config = loadConfig({ STATEHOUSE_BOOTSTRAP_TOKEN_FILE: file });
    expect(config.bootstrapToken?.reveal()).toBe(TOKEN);
  });

  it('refuses a short token read from the file, naming the _FILE variable', () => {
    const file = join(dir, 'short-token');
    writeFileSync(file, 'short\n');
    const err = configError({ STATEHOUSE_BOOTSTRAP_TOKEN_FILE: file });
    expect(err.message).toMatch(/STATEHOUSE_BOOTSTRAP_TOKEN_FILE must be at least 32 characters/);
  });

  it('refuses a token file that cannot be read', () => {
    const err = configError({ STATEHOUSE_BOOTSTRAP_TOKEN_FILE: join(dir, 'missing') });
    expect(err.message).toMatch(/STATEHOUSE_BOOTSTRAP_TOKEN_FILE cannot be read/);
  });

  it('refuses both the token and the token file', () => {
    const file = join(dir, 'token-both');
    writeFileSync(file, TOKEN);
    const err = configError({
      STATEHOUSE_BOOTSTRAP_TOKEN: TOKEN,
      STATEHOUSE_BOOTSTRAP_TOKEN_FILE: file,
    });
    expect(err.message).toContain('set only one of STATEHOUSE_BOOTSTRAP_TOKEN');
    expect(err.message).not.toContain(TOKEN);
  });
});

describe('metrics token', () => {
  let dir: string;
  onTempDir((d) => (dir = d));

  it('is unset by default: /metrics is public', () => {
    expect(loadConfig({}).metricsToken).toBeUndefined();
  });

  it('is read from STATEHOUSE_METRICS_TOKEN or STATEHOUSE_METRICS_TOKEN_FILE', () => {
    expect(loadConfig({ STATEHOUSE_METRICS_TOKEN: TOKEN }).metricsToken?.reveal()).toBe(TOKEN);
    const file = join(dir, 'metrics-token');
    writeFileSync(file, `${TOKEN}\n`);
    expect(loadConfig({ STATEHOUSE_METRICS_TOKEN_FILE: file }).metricsToken?.reveal()).toBe(TOKEN);
  });

  it('is validated like the bootstrap token, never echoed', () => {
    const short = TOKEN.slice(1);
    expect(configError({ STATEHOUSE_METRICS_TOKEN: short }).message).toMatch(
      /STATEHOUSE_METRICS_TOKEN must be at least 32 characters/,
    );
    const both = configError({
      STATEHOUSE_METRICS_TOKEN: TOKEN,
      STATEHOUSE_METRICS_TOKEN_FILE: join(dir, 'metrics-token'),
    });
    expect(both.message).toContain('set only one of STATEHOUSE_METRICS_TOKEN and');
    expect(both.message).not.toContain(TOKEN);
    expect(configError({ STATEHOUSE_METRICS_TOKEN_FILE: join(dir, 'missing') }).message).toMatch(
      /STATEHOUSE_METRICS_TOKEN_FILE cannot be read/,
    );
  });
});

describe('STATEHOUSE_AUTH_DISABLE', () => {
  it('is refused with DATABASE_URL', () => {
    const err = configError({
      STATEHOUSE_AUTH_DISABLE: 'true',
      STATEHOUSE_HOST: '127.0.0.1',
      DATABASE_URL: DB_URL,
    });
    expect(err.message).toMatch(/STATEHOUSE_AUTH_DISABLE is refused when DATABASE_URL is set/);
  });

  it.each(['0.0.0.0', '10.1.2.3', '::', 'statehouse.example.com'])(
    'is refused on the non-loopback host %s',
    (host) => {
      const err = configError({ STATEHOUSE_AUTH_DISABLE: 'true', STATEHOUSE_HOST: host });
      expect(err.message).toMatch(/STATEHOUSE_AUTH_DISABLE is refused unless STATEHOUSE_HOST/);
    },
  );

  it('is refused on the default host', () => {
    expect(configError({ STATEHOUSE_AUTH_DISABLE: '1' }).message).toContain(
      'STATEHOUSE_AUTH_DISABLE',
    );
  });

  it.each(['127.0.0.1', '127.3.2.1', '::1', 'localhost'])(
    'is accepted, with a warning, on the loopback host %s',
    (host) => {
      const config = loadConfig({ STATEHOUSE_AUTH_DISABLE: 'yes', STATEHOUSE_HOST: host });
      expect(config.authDisabled).toBe(true);
      expect(config.warnings.join('\n')).toMatch(/authentication is DISABLED/);
    },
  );

  it('stays off when set to false, whatever the host', () => {
    expect(loadConfig({ STATEHOUSE_AUTH_DISABLE: 'false' }).authDisabled).toBe(false);
  });

  it('refuses a value that is not a boolean', () => {
    expect(configError({ STATEHOUSE_AUTH_DISABLE: 'maybe' }).message).toMatch(
      /STATEHOUSE_AUTH_DISABLE must be true or false/,
    );
  });

  it('recognises only loopback addresses as loopback', () => {
    expect(isLoopback('127.0.0.1')).toBe(true);
    expect(isLoopback('127.0.0.1.example.com')).toBe(false);
    expect(isLoopback('128.0.0.1')).toBe(false);
  });
});

describe('STATEHOUSE_MAX_STATE_BYTES sizes', () => {
  it.each([
    ['1048576', 1048576],
    ['64KiB', 64 * 1024],
    ['64 KiB', 64 * 1024],
    ['10MiB', 10 * 1024 ** 2],
    ['10mib', 10 * 1024 ** 2],
    ['2GiB', 2 * 1024 ** 3],
    ['1kb', 1000],
    ['3MB', 3_000_000],
  ])('reads %s as %d bytes', (raw, bytes) => {
    expect(loadConfig({ STATEHOUSE_MAX_STATE_BYTES: raw }).maxStateBytes).toBe(bytes);
  });

  it.each(['lots', '0', '1.5MiB', '5TiB', '-1', String(2 ** 40 + 1)])('refuses %s', (raw) => {
    expect(configError({ STATEHOUSE_MAX_STATE_BYTES: raw }).message).toContain(
      'STATEHOUSE_MAX_STATE_BYTES',
    );
  });
});

describe('STATEHOUSE_TRUSTED_PROXIES', () => {
  it('accepts addresses and CIDR ranges of both families, trimmed', () => {
    const config = loadConfig({
      STATEHOUSE_TRUSTED_PROXIES: ' 10.0.0.0/8, 192.168.1.7 ,fd00::/8,::1 ',
    });
    expect(config.trustedProxies).toEqual(['10.0.0.0/8', '192.168.1.7', 'fd00::/8', '::1']);
  });

  it.each(['10.0.0.0/33', 'fd00::/129', 'proxy.internal', '10.0.0.0/8/1', '10.0.0.0/', '10.0.0/8'])(
    'refuses the entry %s, naming it',
    (entry) => {
      const err = configError({ STATEHOUSE_TRUSTED_PROXIES: `127.0.0.1,${entry}` });
      expect(err.problems).toHaveLength(1);
      expect(err.message).toContain(`STATEHOUSE_TRUSTED_PROXIES entry "${entry}"`);
    },
  );
});

describe('TLS', () => {
  it('refuses a certificate without a key', () => {
    const err = configError({ STATEHOUSE_TLS_CERT_FILE: 'server.crt' });
    expect(err.message).toMatch(/STATEHOUSE_TLS_CERT_FILE and STATEHOUSE_TLS_KEY_FILE/);
  });

  it('refuses a key without a certificate', () => {
    const err = configError({ STATEHOUSE_TLS_KEY_FILE: 'server.key' });
    expect(err.message).toMatch(/STATEHOUSE_TLS_CERT_FILE and STATEHOUSE_TLS_KEY_FILE/);
  });
});

describe('unknown settings', () => {
  it('warns about an unknown STATEHOUSE_ variable instead of failing', () => {
    const config = loadConfig({ STATEHOUSE_PROT: '9090' });
    expect(config.warnings).toHaveLength(1);
    expect(config.warnings[0]).toContain('STATEHOUSE_PROT');
  });

  it('does not warn about known settings or variables outside STATEHOUSE_', () => {
    const config = loadConfig({
      STATEHOUSE_HOST: '127.0.0.1',
      STATEHOUSE_SERVER: 'http://localhost:8080',
      HOME: '/root',
      PATH: '/usr/bin',
    });
    expect(config.warnings).toEqual([]);
  });
});

describe('Secret', () => {
  const VALUE = 'correct-horse-battery-staple';
  const secret = new Secret(VALUE);

  it('gives its value only through reveal()', () => {
    expect(secret.reveal()).toBe(VALUE);
  });

  it('never shows its value in JSON.stringify', () => {
    expect(JSON.stringify(secret)).not.toContain(VALUE);
    expect(JSON.stringify({ nested: { secret } })).not.toContain(VALUE);
  });

  it('never shows its value in String() or a template', () => {
    expect(String(secret)).not.toContain(VALUE);
    // A template is exactly how a secret slips into a message by accident.
    // eslint-disable-next-line @typescript-eslint/restrict-template-expressions
    expect(`${secret}`).not.toContain(VALUE);
    expect(String(secret)).toBe('[redacted]');
  });

  it('never shows its value in util.inspect or format', () => {
    expect(inspect(secret)).not.toContain(VALUE);
    expect(inspect({ secret }, { showHidden: true, depth: Infinity })).not.toContain(VALUE);
    expect(format('%s %o %O %j', secret, secret, secret, secret)).not.toContain(VALUE);
  });

  it('never shows its value when spread or listed', () => {
    expect(JSON.stringify({ ...secret })).not.toContain(VALUE);
    expect(Object.values(secret)).not.toContain(VALUE);
  });
});

describe('graph and testing settings', () => {
  it('STATEHOUSE_ALIASES unset: localhost and 127.0.0.1 at PORT, and the listening port later', () => {
    const c = loadConfig({ PORT: '9000' });
    expect(c.aliases).toEqual(['http://localhost:9000', 'http://127.0.0.1:9000']);
    expect(c.defaultAliases).toBe(true);
  });

  it('STATEHOUSE_ALIASES: comma-separated base URLs, trailing slashes dropped', () => {
    const c = loadConfig({
      STATEHOUSE_ALIASES: 'https://statehouse.internal:8443/, http://10.0.0.5:8080',
    });
    expect(c.aliases).toEqual(['https://statehouse.internal:8443', 'http://10.0.0.5:8080']);
    expect(c.defaultAliases).toBe(false);
  });

  it.each(['statehouse.internal', 'ftp://x', 'https://u:p@x', 'https://x/?a=1'])(
    'refuses the alias %s, naming it',
    (alias) => {
      expect(configError({ STATEHOUSE_ALIASES: alias }).message).toContain(
        `STATEHOUSE_ALIASES: "${alias}"`,
      );
    },
  );

  it('test failpoints: off by default; known names accepted with a warning; others refused', () => {
    expect(loadConfig({}).failpoints.size).toBe(0);
    const c = loadConfig({ STATEHOUSE_TEST_FAILPOINTS: 'write.after-commit' });
    expect([...c.failpoints]).toEqual(['write.after-commit']);
    expect(c.warnings.join('\n')).toMatch(/kills itself there\. Testing only/);
    expect(configError({ STATEHOUSE_TEST_FAILPOINTS: 'somewhere' }).message).toContain(
      'write.before-graph, write.after-commit',
    );
  });
});

describe('STATEHOUSE_INSPECTION_MAX_BYTES and STATEHOUSE_INSPECTION_QUEUE', () => {
  it('default to twice the largest state and 32 waiting writes', () => {
    expect(loadConfig({}).inspection).toEqual({ maxBytes: 1024 * 1024 * 1024, queue: 32 });
    expect(loadConfig({ STATEHOUSE_MAX_STATE_BYTES: '64MiB' }).inspection.maxBytes).toBe(
      128 * 1024 * 1024,
    );
  });

  it('are read as a size and a count', () => {
    const c = loadConfig({
      STATEHOUSE_INSPECTION_MAX_BYTES: '3GiB',
      STATEHOUSE_INSPECTION_QUEUE: '0',
    });
    expect(c.inspection).toEqual({ maxBytes: 3 * 1024 ** 3, queue: 0 });
  });

  it('refuse a budget smaller than the largest state, and nonsense, naming the variable', () => {
    expect(
      configError({ STATEHOUSE_MAX_STATE_BYTES: '64MiB', STATEHOUSE_INSPECTION_MAX_BYTES: '32MiB' })
        .message,
    ).toContain('STATEHOUSE_INSPECTION_MAX_BYTES must be at least STATEHOUSE_MAX_STATE_BYTES');
    expect(configError({ STATEHOUSE_INSPECTION_MAX_BYTES: 'lots' }).message).toContain(
      'STATEHOUSE_INSPECTION_MAX_BYTES',
    );
    expect(configError({ STATEHOUSE_INSPECTION_QUEUE: '-1' }).message).toContain(
      'STATEHOUSE_INSPECTION_QUEUE',
    );
  });
});

describe('STATEHOUSE_MIGRATE', () => {
  it('is on by default, embedded and with DATABASE_URL (the server migrates at start)', () => {
    expect(loadConfig({}).migrate).toBe(true);
    expect(loadConfig({ DATABASE_URL: DB_URL }).migrate).toBe(true);
  });

  it.each([
    ['false', false],
    ['0', false],
    ['no', false],
    ['true', true],
    ['on', true],
  ])('"%s" reads as %s', (raw, expected) => {
    expect(loadConfig({ DATABASE_URL: DB_URL, STATEHOUSE_MIGRATE: raw }).migrate).toBe(expected);
  });

  it('anything else is refused, naming it', () => {
    expect(configError({ STATEHOUSE_MIGRATE: 'later' }).problems).toEqual([
      'STATEHOUSE_MIGRATE must be true or false (got "later")',
    ]);
  });

  it('is a known setting (no "unknown setting" warning)', () => {
    expect(loadConfig({ STATEHOUSE_MIGRATE: 'false' }).warnings).toEqual([]);
  });
});
