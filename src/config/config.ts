import { createPrivateKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { resolve } from 'node:path';
import { BLOB_DRIVERS, BlobDriverName } from '../storage/blob-store';
import { parseCorsOrigin } from '../common/cors';
import { trimBoth, trimEnd } from '../common/trim';
import { Secret } from './secret';

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
const LOG_LEVELS: readonly LogLevel[] = [
  'fatal',
  'error',
  'warn',
  'info',
  'debug',
  'trace',
  'silent',
];

/** `auto`: one human-readable line per event on a terminal, JSON lines otherwise. */
export type LogFormat = 'auto' | 'json' | 'text';
const LOG_FORMATS: readonly LogFormat[] = ['auto', 'json', 'text'];

export interface S3StorageConfig {
  bucket: string;
  prefix: string;
  region: string;
  endpoint: string | undefined;
  forcePathStyle: boolean;
}

/** Every setting, read once at start. Nothing else in the program reads `process.env`. */
export interface AppConfig {
  port: number;
  host: string;
  dataDir: string;
  /** Undefined means the embedded database in `dataDir`. */
  databaseUrl: Secret | undefined;
  databasePoolSize: number;
  /**
   * STATEHOUSE_MIGRATE: `serve` applies pending migrations at start. When false (replicas whose
   * migrations a Job runs), a server whose schema is behind waits, not ready, for `statehouse
   * migrate`; `statehouse migrate` itself always migrates.
   */
  migrate: boolean;
  storage: {
    driver: BlobDriverName;
    fsDir: string;
    s3: S3StorageConfig | undefined;
  };
  maxVersions: number;
  maxStateBytes: number;
  /**
   * State bytes being inspected at once (per replica), and how many writes may wait for room
   * (see state/inspection-budget.ts).
   */
  inspection: { maxBytes: number; queue: number };
  trustedProxies: string[];
  /**
   * Web origins whose pages may call the management API from a browser (CORS); empty: CORS
   * is off. Each as browsers send `Origin` (see common/cors.ts).
   */
  corsOrigins: string[];
  publicUrl: string;
  /**
   * Other base URLs clients reach this server by (besides `publicUrl`), to recognise its own
   * addresses inside consumers' `terraform_remote_state` configs.
   */
  aliases: string[];
  /** STATEHOUSE_ALIASES was not set: loopback at the port actually listened on (PORT=0). */
  defaultAliases: boolean;
  bootstrapToken: Secret | undefined;
  /** When set, `/metrics` answers only `Authorization: Bearer <it>`; unset, it is public. */
  metricsToken: Secret | undefined;
  authDisabled: boolean;
  tls: { certFile: string; keyFile: string } | undefined;
  logLevel: LogLevel;
  logFormat: LogFormat;
  /** Colours in the text format (on a terminal only); off when NO_COLOR is set. */
  logColor: boolean;
  /** How long in-flight requests may take to finish after SIGTERM or SIGINT. */
  shutdownTimeoutSeconds: number;
  /**
   * How long, within that, new connections are still accepted after the signal (each of their
   * requests answered 503 with `Connection: close`), for a load balancer that has not yet seen
   * /readyz turn 503; then they are refused.
   */
  shutdownGraceSeconds: number;
  oidc: { issuer: string; clientId: string; scopes: string[]; groupsClaim: string } | undefined;
  tokens: {
    /** PKCS#8 PEM of the Ed25519 signing key, when configured (else generated and stored). */
    privateKeyPem: Secret | undefined;
    kid: string | undefined;
    accessTtlSeconds: number;
    refreshTtlSeconds: number;
  };
  sts: {
    /** The key id new credentials are issued under. */
    kid: string;
    /** Configured HMAC secrets by key id (others are generated and stored). */
    hmacKeys: Map<string, Secret>;
    ttlSeconds: number;
  };
  /** Requests per minute per client address on the login and token endpoints. */
  authRateLimitPerMinute: number;
  s3Door: {
    /**
     * STATEHOUSE_S3_PORT: the S3 door is also served at the root of a listener of its own on
     * this port (0: any free port), for clients that cannot put a path in their endpoint.
     */
    port: number | undefined;
    /** Bucket names the `/s3` door answers for. */
    buckets: string[];
    /** Terraform `workspace_key_prefix` values understood in object keys. */
    workspacePrefixes: string[];
  };
  /**
   * Testing only: named points where the process kills itself (SIGKILL), to prove what a crash
   * there leaves behind. Empty in any real deployment.
   */
  failpoints: ReadonlySet<Failpoint>;
  /** Settings that were accepted but deserve a word at start (never secrets). */
  warnings: string[];
}

/** Where `STATEHOUSE_TEST_FAILPOINTS` may kill the process. */
export const FAILPOINTS = ['write.before-graph', 'write.after-commit'] as const;
export type Failpoint = (typeof FAILPOINTS)[number];

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

const KNOWN = new Set([
  'PORT',
  'STATEHOUSE_HOST',
  'STATEHOUSE_DATA_DIR',
  'DATABASE_URL',
  'STATEHOUSE_DATABASE_POOL_SIZE',
  'STATEHOUSE_MIGRATE',
  'STATEHOUSE_STORAGE',
  'STATEHOUSE_STORAGE_FS_DIR',
  'STATEHOUSE_STORAGE_S3_BUCKET',
  'STATEHOUSE_STORAGE_S3_PREFIX',
  'STATEHOUSE_STORAGE_S3_REGION',
  'STATEHOUSE_STORAGE_S3_ENDPOINT',
  'STATEHOUSE_STORAGE_S3_FORCE_PATH_STYLE',
  'STATEHOUSE_MAX_VERSIONS',
  'STATEHOUSE_MAX_STATE_BYTES',
  'STATEHOUSE_INSPECTION_MAX_BYTES',
  'STATEHOUSE_INSPECTION_QUEUE',
  'STATEHOUSE_TRUSTED_PROXIES',
  'STATEHOUSE_CORS_ORIGINS',
  'STATEHOUSE_PUBLIC_URL',
  'STATEHOUSE_ALIASES',
  'STATEHOUSE_TEST_FAILPOINTS',
  'STATEHOUSE_BOOTSTRAP_TOKEN',
  'STATEHOUSE_BOOTSTRAP_TOKEN_FILE',
  'STATEHOUSE_METRICS_TOKEN',
  'STATEHOUSE_METRICS_TOKEN_FILE',
  'STATEHOUSE_AUTH_DISABLE',
  'STATEHOUSE_TLS_CERT_FILE',
  'STATEHOUSE_TLS_KEY_FILE',
  'STATEHOUSE_LOG_LEVEL',
  'STATEHOUSE_LOG_FORMAT',
  'STATEHOUSE_SHUTDOWN_TIMEOUT',
  'STATEHOUSE_SHUTDOWN_GRACE',
  'STATEHOUSE_OIDC_ISSUER',
  'STATEHOUSE_OIDC_CLIENT_ID',
  'STATEHOUSE_OIDC_SCOPES',
  'STATEHOUSE_OIDC_GROUPS_CLAIM',
  'STATEHOUSE_TOKENS_PRIVATE_KEY_FILE',
  'STATEHOUSE_TOKENS_KID',
  'STATEHOUSE_TOKENS_ACCESS_TTL',
  'STATEHOUSE_TOKENS_REFRESH_TTL',
  'STATEHOUSE_STS_KID',
  'STATEHOUSE_STS_TTL',
  'STATEHOUSE_AUTH_RATE_LIMIT',
  'STATEHOUSE_S3_DOOR_BUCKETS',
  'STATEHOUSE_S3_WORKSPACE_PREFIXES',
  'STATEHOUSE_S3_PORT',
  // read by the CLI, not the server
  'STATEHOUSE_SERVER',
  'STATEHOUSE_TOKEN',
]);

/** STATEHOUSE_SHUTDOWN_TIMEOUT's default: how long a stop may wait for requests in flight. */
export const DEFAULT_SHUTDOWN_TIMEOUT_SECONDS = 25;
/** STATEHOUSE_SHUTDOWN_GRACE's default: new connections are still answered (503) this long. */
export const DEFAULT_SHUTDOWN_GRACE_SECONDS = 2;

const DURATION_UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400 };

const SIZE_UNITS: Record<string, number> = {
  '': 1,
  b: 1,
  k: 1024,
  kb: 1000,
  kib: 1024,
  m: 1024 ** 2,
  mb: 1000 ** 2,
  mib: 1024 ** 2,
  g: 1024 ** 3,
  gb: 1000 ** 3,
  gib: 1024 ** 3,
};

/**
 * Reads and validates the environment. Collects every problem before failing so an operator
 * fixes them all in one go; the message names each bad variable but never echoes a secret.
 */
export function loadConfig(env: Env = process.env): AppConfig {
  const problems: string[] = [];
  const warnings: string[] = [];
  const str = (name: string): string | undefined => {
    const v = env[name];
    return v === undefined || v.trim() === '' ? undefined : v.trim();
  };
  const int = (name: string, def: number, min: number, max: number): number => {
    const raw = str(name);
    if (raw === undefined) return def;
    if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
      problems.push(`${name} must be an integer from ${min} to ${max} (got "${raw}")`);
      return def;
    }
    return Number(raw);
  };
  const bool = (name: string, def = false): boolean => {
    const raw = str(name)?.toLowerCase();
    if (raw === undefined) return def;
    if (['1', 'true', 'yes', 'on'].includes(raw)) return true;
    if (['0', 'false', 'no', 'off'].includes(raw)) return false;
    problems.push(`${name} must be true or false (got "${raw}")`);
    return def;
  };
  const size = (name: string, def: number): number => {
    const raw = str(name);
    if (raw === undefined) return def;
    const m = /^(\d+)\s*([a-z]*)$/i.exec(raw);
    const unit = m ? SIZE_UNITS[m[2].toLowerCase()] : undefined;
    if (!m || unit === undefined || Number(m[1]) * unit < 1 || Number(m[1]) * unit > 2 ** 40) {
      problems.push(`${name} must be a size in bytes, optionally with KiB/MiB/GiB (got "${raw}")`);
      return def;
    }
    return Number(m[1]) * unit;
  };
  const url = (name: string): string | undefined => {
    const raw = str(name);
    if (raw === undefined) return undefined;
    try {
      const u = new URL(raw);
      if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('scheme');
      return trimEnd(raw, '/');
    } catch {
      problems.push(`${name} must be an http(s) URL (got "${raw}")`);
      return undefined;
    }
  };

  const duration = (name: string, def: number, min: number, max: number): number => {
    const raw = str(name);
    if (raw === undefined) return def;
    const m = /^(\d+)\s*(s|m|h|d)?$/i.exec(raw);
    const secs = m ? Number(m[1]) * DURATION_UNITS[(m[2] ?? 's').toLowerCase()] : NaN;
    if (!m || secs < min || secs > max) {
      problems.push(
        `${name} must be a duration like 900, 15m, 1h or 30d, from ${min}s to ${max}s (got "${raw}")`,
      );
      return def;
    }
    return secs;
  };

  for (const name of Object.keys(env)) {
    if (name.startsWith('STATEHOUSE_STS_HMAC_')) continue;
    if (name.startsWith('STATEHOUSE_') && !KNOWN.has(name)) {
      warnings.push(`unknown setting ${name} is ignored (check its spelling)`);
    }
  }

  const port = int('PORT', 8080, 0, 65535);
  const s3Port =
    str('STATEHOUSE_S3_PORT') === undefined ? undefined : int('STATEHOUSE_S3_PORT', 0, 0, 65535);
  if (s3Port !== undefined && s3Port !== 0 && s3Port === port) {
    problems.push(
      `STATEHOUSE_S3_PORT must differ from PORT (both ${port}): it is a listener of its own`,
    );
  }
  const host = str('STATEHOUSE_HOST') ?? '0.0.0.0';
  const dataDir = resolve(str('STATEHOUSE_DATA_DIR') ?? './data');

  let databaseUrl: Secret | undefined;
  const dbRaw = str('DATABASE_URL');
  if (dbRaw !== undefined) {
    try {
      const u = new URL(dbRaw);
      if (u.protocol !== 'postgres:' && u.protocol !== 'postgresql:') throw new Error('scheme');
      databaseUrl = new Secret(dbRaw);
    } catch {
      // The URL may hold a password: name the variable, never the value.
      problems.push('DATABASE_URL must be a postgres:// or postgresql:// URL');
    }
  }
  const databasePoolSize = int('STATEHOUSE_DATABASE_POOL_SIZE', 10, 1, 1000);
  const migrate = bool('STATEHOUSE_MIGRATE', true);

  const driverRaw = str('STATEHOUSE_STORAGE');
  let driver: BlobDriverName = dbRaw === undefined ? 'fs' : 'postgres';
  if (driverRaw !== undefined) {
    if ((BLOB_DRIVERS as readonly string[]).includes(driverRaw)) {
      driver = driverRaw as BlobDriverName;
    } else {
      problems.push(
        `STATEHOUSE_STORAGE must be one of ${BLOB_DRIVERS.join(', ')} (got "${driverRaw}")`,
      );
    }
  }
  if (driver === 'memory' && env.NODE_ENV !== 'test') {
    problems.push(
      'STATEHOUSE_STORAGE=memory is for tests only: blobs would vanish on restart (use fs, s3 or postgres)',
    );
  }
  const fsDir = resolve(str('STATEHOUSE_STORAGE_FS_DIR') ?? `${dataDir}/blobs`);
  let s3: S3StorageConfig | undefined;
  if (driver === 's3') {
    const bucket = str('STATEHOUSE_STORAGE_S3_BUCKET');
    if (bucket === undefined)
      problems.push('STATEHOUSE_STORAGE_S3_BUCKET is required with STATEHOUSE_STORAGE=s3');
    const prefix = str('STATEHOUSE_STORAGE_S3_PREFIX') ?? '';
    if (prefix !== '' && !/^[A-Za-z0-9/_.-]+$/.test(prefix)) {
      problems.push('STATEHOUSE_STORAGE_S3_PREFIX may only hold letters, digits and / _ . -');
    }
    s3 = {
      bucket: bucket ?? '',
      prefix: trimBoth(prefix, '/'),
      region: str('STATEHOUSE_STORAGE_S3_REGION') ?? 'us-east-1',
      endpoint: url('STATEHOUSE_STORAGE_S3_ENDPOINT'),
      forcePathStyle: bool('STATEHOUSE_STORAGE_S3_FORCE_PATH_STYLE'),
    };
  }

  const maxVersions = int('STATEHOUSE_MAX_VERSIONS', 0, 0, 1_000_000);
  const maxStateBytes = size('STATEHOUSE_MAX_STATE_BYTES', 512 * 1024 ** 2);
  const inspectionMaxBytes = size('STATEHOUSE_INSPECTION_MAX_BYTES', 2 * maxStateBytes);
  if (inspectionMaxBytes < maxStateBytes) {
    problems.push(
      `STATEHOUSE_INSPECTION_MAX_BYTES must be at least STATEHOUSE_MAX_STATE_BYTES (${maxStateBytes} bytes): a state of the largest accepted size could never be written (got ${inspectionMaxBytes})`,
    );
  }
  const inspectionQueue = int('STATEHOUSE_INSPECTION_QUEUE', 32, 0, 10_000);

  const trustedProxies = (str('STATEHOUSE_TRUSTED_PROXIES') ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  for (const p of trustedProxies) {
    const [addr, bits, ...rest] = p.split('/');
    const family = isIP(addr);
    const maxBits = family === 6 ? 128 : 32;
    if (
      family === 0 ||
      rest.length > 0 ||
      (bits !== undefined && (!/^\d+$/.test(bits) || Number(bits) > maxBits))
    ) {
      problems.push(`STATEHOUSE_TRUSTED_PROXIES entry "${p}" is not an IP address or CIDR range`);
    }
  }

  const corsOrigins: string[] = [];
  for (const entry of (str('STATEHOUSE_CORS_ORIGINS') ?? '').split(',')) {
    if (entry.trim() === '') continue;
    const parsed = parseCorsOrigin(entry.trim());
    if ('problem' in parsed) problems.push(`STATEHOUSE_CORS_ORIGINS: ${parsed.problem}`);
    else if (!corsOrigins.includes(parsed.origin)) corsOrigins.push(parsed.origin);
  }

  const tlsCert = str('STATEHOUSE_TLS_CERT_FILE');
  const tlsKey = str('STATEHOUSE_TLS_KEY_FILE');
  if ((tlsCert === undefined) !== (tlsKey === undefined)) {
    problems.push('STATEHOUSE_TLS_CERT_FILE and STATEHOUSE_TLS_KEY_FILE must be set together');
  }
  const tls =
    tlsCert && tlsKey ? { certFile: resolve(tlsCert), keyFile: resolve(tlsKey) } : undefined;
  const scheme = tls ? 'https' : 'http';
  const publicUrl = url('STATEHOUSE_PUBLIC_URL') ?? `${scheme}://localhost:${port}`;

  /** A secret given as `NAME` or in the file `NAME_FILE` (at most one of them). */
  const token = (name: string): Secret | undefined => {
    const raw = str(name);
    const file = str(`${name}_FILE`);
    if (raw !== undefined && file !== undefined) {
      problems.push(`set only one of ${name} and ${name}_FILE`);
      return undefined;
    }
    if (raw !== undefined) return checkToken(name, raw, problems);
    if (file === undefined) return undefined;
    try {
      return checkToken(`${name}_FILE`, readFileSync(file, 'utf8').trim(), problems);
    } catch (e) {
      problems.push(`${name}_FILE cannot be read: ${(e as Error).message}`);
      return undefined;
    }
  };
  const bootstrapToken = token('STATEHOUSE_BOOTSTRAP_TOKEN');
  const metricsToken = token('STATEHOUSE_METRICS_TOKEN');

  const authDisabled = bool('STATEHOUSE_AUTH_DISABLE');
  if (authDisabled) {
    if (dbRaw !== undefined) {
      problems.push(
        'STATEHOUSE_AUTH_DISABLE is refused when DATABASE_URL is set (development only)',
      );
    }
    if (!isLoopback(host)) {
      problems.push(
        `STATEHOUSE_AUTH_DISABLE is refused unless STATEHOUSE_HOST is a loopback address (got "${host}")`,
      );
    }
    warnings.push(
      'authentication is DISABLED (STATEHOUSE_AUTH_DISABLE): every request is an anonymous admin',
    );
  }

  const logRaw = str('STATEHOUSE_LOG_LEVEL')?.toLowerCase() ?? 'info';
  let logLevel: LogLevel = 'info';
  if ((LOG_LEVELS as readonly string[]).includes(logRaw)) logLevel = logRaw as LogLevel;
  else
    problems.push(`STATEHOUSE_LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')} (got "${logRaw}")`);

  const formatRaw = str('STATEHOUSE_LOG_FORMAT')?.toLowerCase() ?? 'auto';
  let logFormat: LogFormat = 'auto';
  if ((LOG_FORMATS as readonly string[]).includes(formatRaw)) logFormat = formatRaw as LogFormat;
  else
    problems.push(
      `STATEHOUSE_LOG_FORMAT must be one of ${LOG_FORMATS.join(', ')} (got "${formatRaw}")`,
    );
  // https://no-color.org: any non-empty value turns colours off.
  const logColor = (env.NO_COLOR ?? '') === '';
  const shutdownTimeoutSeconds = duration(
    'STATEHOUSE_SHUTDOWN_TIMEOUT',
    DEFAULT_SHUTDOWN_TIMEOUT_SECONDS,
    1,
    3600,
  );
  // The grace is part of the drain: the default shortens to fit a shorter timeout; a grace set
  // longer than the timeout is a contradiction.
  const grace = duration('STATEHOUSE_SHUTDOWN_GRACE', DEFAULT_SHUTDOWN_GRACE_SECONDS, 0, 3600);
  if (str('STATEHOUSE_SHUTDOWN_GRACE') !== undefined && grace > shutdownTimeoutSeconds) {
    problems.push(
      `STATEHOUSE_SHUTDOWN_GRACE (${grace}s) must not be longer than STATEHOUSE_SHUTDOWN_TIMEOUT (${shutdownTimeoutSeconds}s): the grace is part of the drain`,
    );
  }
  const shutdownGraceSeconds = Math.min(grace, shutdownTimeoutSeconds);

  // Human login through OpenID Connect.
  const oidcIssuer = url('STATEHOUSE_OIDC_ISSUER');
  const oidcClient = str('STATEHOUSE_OIDC_CLIENT_ID');
  let oidc: AppConfig['oidc'];
  if ((oidcIssuer === undefined) !== (oidcClient === undefined)) {
    problems.push('STATEHOUSE_OIDC_ISSUER and STATEHOUSE_OIDC_CLIENT_ID must be set together');
  } else if (oidcIssuer && oidcClient) {
    const scopes = (str('STATEHOUSE_OIDC_SCOPES') ?? 'openid email profile')
      .split(/[\s,]+/)
      .filter((x) => x !== '');
    if (!scopes.includes('openid')) problems.push('STATEHOUSE_OIDC_SCOPES must include openid');
    oidc = {
      issuer: str('STATEHOUSE_OIDC_ISSUER') as string,
      clientId: oidcClient,
      scopes,
      groupsClaim: str('STATEHOUSE_OIDC_GROUPS_CLAIM') ?? 'groups',
    };
  }

  // Access-token signing (Ed25519).
  let privateKeyPem: Secret | undefined;
  const keyFile = str('STATEHOUSE_TOKENS_PRIVATE_KEY_FILE');
  if (keyFile !== undefined) {
    try {
      const pem = readFileSync(keyFile, 'utf8');
      const key = createPrivateKey(pem);
      if (key.asymmetricKeyType !== 'ed25519') throw new Error('not an Ed25519 key');
      privateKeyPem = new Secret(pem);
    } catch (e) {
      problems.push(
        `STATEHOUSE_TOKENS_PRIVATE_KEY_FILE must be a readable PKCS#8 PEM Ed25519 private key (${(e as Error).message})`,
      );
    }
  }
  const tokenKid = str('STATEHOUSE_TOKENS_KID');
  if (tokenKid !== undefined && !/^[A-Za-z0-9_-]{1,64}$/.test(tokenKid)) {
    problems.push('STATEHOUSE_TOKENS_KID may only hold letters, digits, _ and - (at most 64)');
  }
  const accessTtlSeconds = duration('STATEHOUSE_TOKENS_ACCESS_TTL', 3600, 60, 86400);
  const refreshTtlSeconds = duration('STATEHOUSE_TOKENS_REFRESH_TTL', 30 * 86400, 10, 400 * 86400);

  // S3 credentials.
  const stsKid = str('STATEHOUSE_STS_KID') ?? 'K1';
  if (!/^[A-Z0-9]{1,8}$/.test(stsKid)) {
    problems.push(
      'STATEHOUSE_STS_KID must be 1 to 8 upper-case letters or digits (it is part of the access key id)',
    );
  }
  const hmacKeys = new Map<string, Secret>();
  for (const [name, value] of Object.entries(env)) {
    if (!name.startsWith('STATEHOUSE_STS_HMAC_') || value === undefined) continue;
    const kid = name.slice('STATEHOUSE_STS_HMAC_'.length);
    if (!/^[A-Z0-9]{1,8}$/.test(kid)) {
      problems.push(
        `${name}: the key id after STATEHOUSE_STS_HMAC_ must be 1 to 8 upper-case letters or digits`,
      );
      continue;
    }
    const raw = value.trim();
    if (!/^[A-Za-z0-9_-]+$/.test(raw) || Buffer.from(raw, 'base64url').length < 32) {
      problems.push(`${name} must be base64url and decode to at least 32 bytes`);
      continue;
    }
    hmacKeys.set(kid, new Secret(raw));
  }
  const stsTtlSeconds = duration('STATEHOUSE_STS_TTL', 900, 60, 12 * 3600);
  const authRateLimitPerMinute = int('STATEHOUSE_AUTH_RATE_LIMIT', 60, 1, 100_000);

  const list = (name: string, def: string): string[] =>
    (str(name) ?? def)
      .split(',')
      .map((x) => x.trim())
      .filter((x) => x !== '');
  const aliases: string[] = [];
  const aliasesRaw = str('STATEHOUSE_ALIASES');
  if (aliasesRaw === undefined) {
    aliases.push(`${scheme}://localhost:${port}`, `${scheme}://127.0.0.1:${port}`);
  } else {
    for (const a of list('STATEHOUSE_ALIASES', '')) {
      try {
        const u = new URL(a);
        if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('scheme');
        if (u.search || u.hash || u.username || u.password) throw new Error('parts');
        aliases.push(trimEnd(a, '/'));
      } catch {
        problems.push(
          `STATEHOUSE_ALIASES: "${a}" must be a base URL like https://statehouse.internal:8443 (comma-separated)`,
        );
      }
    }
  }
  const failpoints = new Set<Failpoint>();
  for (const f of list('STATEHOUSE_TEST_FAILPOINTS', '')) {
    if ((FAILPOINTS as readonly string[]).includes(f)) failpoints.add(f as Failpoint);
    else
      problems.push(
        `STATEHOUSE_TEST_FAILPOINTS: "${f}" is not one of ${FAILPOINTS.join(', ')} (testing only)`,
      );
  }
  if (failpoints.size > 0) {
    warnings.push(
      `STATEHOUSE_TEST_FAILPOINTS is set (${[...failpoints].join(', ')}): this process kills itself there. Testing only.`,
    );
  }
  const buckets = list('STATEHOUSE_S3_DOOR_BUCKETS', 'tfstate');
  for (const b of buckets) {
    if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(b)) {
      problems.push(`STATEHOUSE_S3_DOOR_BUCKETS: "${b}" is not a valid S3 bucket name`);
    }
  }
  if (buckets.length === 0)
    problems.push('STATEHOUSE_S3_DOOR_BUCKETS must name at least one bucket');
  const workspacePrefixes = list('STATEHOUSE_S3_WORKSPACE_PREFIXES', 'env:');
  for (const p of workspacePrefixes) {
    if (!/^[A-Za-z0-9._:-]+$/.test(p)) {
      problems.push(
        `STATEHOUSE_S3_WORKSPACE_PREFIXES: "${p}" must be one path segment of letters, digits and . _ : -`,
      );
    } else if (!/[^A-Za-z0-9._-]/.test(p)) {
      warnings.push(
        `STATEHOUSE_S3_WORKSPACE_PREFIXES: units whose names start with "${p}/" cannot be reached through /s3 (keys there name workspaces)`,
      );
    }
  }

  if (problems.length > 0) throw new ConfigError(problems);
  return {
    port,
    host,
    dataDir,
    databaseUrl,
    databasePoolSize,
    migrate,
    storage: { driver, fsDir, s3 },
    maxVersions,
    maxStateBytes,
    inspection: { maxBytes: inspectionMaxBytes, queue: inspectionQueue },
    trustedProxies,
    corsOrigins,
    publicUrl,
    aliases,
    defaultAliases: aliasesRaw === undefined,
    bootstrapToken,
    metricsToken,
    authDisabled,
    tls,
    logLevel,
    logFormat,
    logColor,
    shutdownTimeoutSeconds,
    shutdownGraceSeconds,
    oidc,
    tokens: { privateKeyPem, kid: tokenKid, accessTtlSeconds, refreshTtlSeconds },
    sts: { kid: stsKid, hmacKeys, ttlSeconds: stsTtlSeconds },
    authRateLimitPerMinute,
    s3Door: { port: s3Port, buckets, workspacePrefixes },
    failpoints,
    warnings,
  };
}

function checkToken(name: string, value: string, problems: string[]): Secret | undefined {
  if (value.length < 32) {
    problems.push(`${name} must be at least 32 characters long`);
    return undefined;
  }
  if (/\s/.test(value)) {
    problems.push(`${name} must not contain whitespace`);
    return undefined;
  }
  return new Secret(value);
}

export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/** Injection token for the AppConfig object. */
export const APP_CONFIG = Symbol('APP_CONFIG');
